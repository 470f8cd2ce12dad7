#!/usr/bin/env python3
"""Reads every state table of a livestate warehouse with pypaimon: the latest snapshot and every tag.

Usage:
    python read_all.py WAREHOUSE_DIR [TABLE ...]
    python read_all.py --files WAREHOUSE_DIR [TABLE ...]

Prints one JSON object per read, one per line:

    {"table": "stock", "tag": null | "NAME", "snapshot_id": N, "identifier": N, "rows": [...]}

`identifier` is the snapshot's commit identifier (for livestate, the record offset the snapshot
reflects); rows are rendered as in read_table.py. Tables with no snapshot print
{"table": ..., "tag": null, "snapshot_id": null, ...}. One process reads everything, so a caller
checking a warehouse many times pays for the import once per check.

With --files, prints per table {"table": ..., "files": [...]}: the names of the data files that
the scan plans of every kept snapshot and every tag read, i.e. every data file something still
references (so a caller can tell files on disk that nothing references).

Exits 1 naming the table and tag on any error.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import render  # noqa: E402


def rows_of(table):
    builder = table.new_read_builder()
    arrow_table = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    if arrow_table is None or arrow_table.num_rows == 0:
        return []
    names = arrow_table.column_names
    columns = [arrow_table.column(i).to_pylist() for i in range(len(names))]
    return [{n: render(v) for n, v in zip(names, values)} for values in zip(*columns)]


def referenced_files(catalog, db_dir, name):
    """Data files the plans of every kept snapshot and every tag of state.NAME read."""
    files = set()
    table_dir = os.path.join(db_dir, name)
    travels = []
    snap_dir = os.path.join(table_dir, "snapshot")
    if os.path.isdir(snap_dir):
        # A temporary file (a commit killed before its rename) is no snapshot.
        travels += [("scan.snapshot-id", f[len("snapshot-"):]) for f in os.listdir(snap_dir)
                    if f.startswith("snapshot-") and ".tmp" not in f]
    tag_dir = os.path.join(table_dir, "tag")
    if os.path.isdir(tag_dir):
        travels += [("scan.tag-name", f[len("tag-"):]) for f in os.listdir(tag_dir)
                    if f.startswith("tag-") and ".tmp" not in f]
    for key, value in travels:
        table = catalog.get_table("state." + name).copy({key: value})
        for split in table.new_read_builder().new_scan().plan().splits():
            files.update(f.file_name for f in split.files)
    return sorted(files)


def main(argv):
    files_mode = bool(argv) and argv[0] == "--files"
    if files_mode:
        argv = argv[1:]
    if not argv:
        print("usage: read_all.py WAREHOUSE_DIR [TABLE ...]", file=sys.stderr)
        return 2
    warehouse = argv[0]
    from pypaimon import CatalogFactory

    catalog = CatalogFactory.create({"warehouse": warehouse})
    db_dir = os.path.join(warehouse, "state.db")
    names = argv[1:] or sorted(
        n for n in os.listdir(db_dir) if os.path.isdir(os.path.join(db_dir, n)))
    out = sys.stdout
    if files_mode:
        for name in names:
            try:
                line = {"table": name, "files": referenced_files(catalog, db_dir, name)}
            except Exception as e:  # noqa: BLE001 - name what failed
                print("read_all.py: error: files of state.%s: %s: %s" % (name, type(e).__name__, e),
                      file=sys.stderr)
                return 1
            out.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
        out.flush()
        return 0
    for name in names:
        reads = [None]
        tag_dir = os.path.join(db_dir, name, "tag")
        if os.path.isdir(tag_dir):
            reads += sorted(f[len("tag-"):] for f in os.listdir(tag_dir)
                            if f.startswith("tag-") and ".tmp" not in f)
        for tag in reads:
            try:
                table = catalog.get_table("state." + name)
                if tag is not None:
                    snapshot = table.tag_manager().get_or_throw(tag)
                    table = table.copy({"scan.tag-name": tag})
                else:
                    snapshot = table.snapshot_manager().get_latest_snapshot()
                rows = rows_of(table) if snapshot is not None else []
                line = {
                    "table": name,
                    "tag": tag,
                    "snapshot_id": snapshot.id if snapshot is not None else None,
                    "identifier": snapshot.commit_identifier if snapshot is not None else None,
                    "rows": rows,
                }
            except Exception as e:  # noqa: BLE001 - name what failed
                print("read_all.py: error: state.%s%s: %s: %s"
                      % (name, " tag " + tag if tag else "", type(e).__name__, e), file=sys.stderr)
                return 1
            out.write(json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
            out.write("\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
