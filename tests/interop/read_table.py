#!/usr/bin/env python3
"""Reads a Paimon table with pypaimon and prints it as JSON lines.

Usage:
    python read_table.py WAREHOUSE_DIR DATABASE.TABLE [--snapshot N | --tag NAME]
    python read_table.py WAREHOUSE_DIR DATABASE.TABLE --changes

With --changes, reads the table's changelog with pypaimon's streaming reader
(new_stream_read_builder().with_include_row_kind(True)), snapshot by snapshot
from the first, and prints every change row in read order with its row kind
("_row_kind": "+I", "-U", "+U" or "-D") and "_snapshot".

Opens a filesystem catalog at WAREHOUSE_DIR, batch-reads the whole table (the
latest snapshot, or the snapshot / tag given for time travel) and prints one
JSON object per row, keys = column names (sorted), compact separators, lines
sorted by their JSON text. Values:

    STRING/CHAR/VARCHAR   string as-is
    TINYINT..BIGINT       JSON integer
    DECIMAL(p,s)          string in plain notation keeping the scale ("12.50")
    BOOLEAN               true / false
    TIMESTAMP[_LTZ]       "YYYY-MM-DDTHH:MM:SS.mmm" in UTC, no suffix (truncated to ms)
    NULL                  null

Other types are rendered best-effort (floats as numbers, dates/times as ISO
strings, bytes as base64, arrays/maps/rows recursively).

Exits 1 with a message on stderr on any error, 2 on bad usage.
"""

import argparse
import base64
import datetime as dt
import decimal
import json
import os
import sys
from urllib.parse import urlparse


def render(value):
    """Converts one Python value from pyarrow's to_pylist() into its JSON form."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, decimal.Decimal):
        if value.is_zero():
            value = abs(value)  # "-0.00" -> "0.00"
        return format(value, "f")
    if isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return "%04d-%02d-%02dT%02d:%02d:%02d.%03d" % (
            value.year, value.month, value.day,
            value.hour, value.minute, value.second, value.microsecond // 1000)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, float):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(k): render(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # pyarrow renders MAP values as a list of (key, value) tuples.
        if value and all(isinstance(e, tuple) and len(e) == 2 for e in value):
            return {str(render(k)): render(v) for k, v in value}
        return [render(v) for v in value]
    return str(value)


def fail(message):
    print("read_table.py: error: %s" % message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    parser = argparse.ArgumentParser(
        description="Print a Paimon table as sorted JSON lines using pypaimon.")
    parser.add_argument("warehouse", metavar="WAREHOUSE_DIR")
    parser.add_argument("table", metavar="DATABASE.TABLE")
    travel = parser.add_mutually_exclusive_group()
    travel.add_argument("--snapshot", type=int, metavar="N",
                        help="read snapshot N instead of the latest")
    travel.add_argument("--tag", metavar="NAME", help="read the snapshot of tag NAME")
    travel.add_argument("--changes", action="store_true",
                        help="stream every snapshot's changelog with row kinds")
    args = parser.parse_args(argv)

    if "." not in args.table:
        fail("table must be given as DATABASE.TABLE, got %r" % args.table)
    scheme = urlparse(args.warehouse).scheme
    if (not scheme or scheme == "file") and not os.path.isdir(
            args.warehouse[len("file://"):] if scheme == "file" else args.warehouse):
        fail("warehouse directory %r does not exist" % args.warehouse)

    try:
        from pypaimon import CatalogFactory
    except ImportError as e:
        fail("cannot import pypaimon (%s); run scripts/pyenv.sh and use its python" % e)

    try:
        catalog = CatalogFactory.create({"warehouse": args.warehouse})
        table = catalog.get_table(args.table)
    except Exception as e:  # noqa: BLE001 - report any pypaimon failure plainly
        fail("cannot open table %s in %s: %s: %s"
             % (args.table, args.warehouse, type(e).__name__, e))

    try:
        if args.snapshot is not None:
            table = table.copy({"scan.snapshot-id": str(args.snapshot)})
        elif args.tag is not None:
            table = table.copy({"scan.tag-name": args.tag})
    except Exception as e:  # noqa: BLE001
        what = ("snapshot %d" % args.snapshot) if args.snapshot is not None else ("tag %r" % args.tag)
        fail("cannot time-travel %s to %s: %s: %s" % (args.table, what, type(e).__name__, e))

    if args.changes:
        return print_changes(table, args.table)

    try:
        read_builder = table.new_read_builder()
        splits = read_builder.new_scan().plan().splits()
        arrow_table = read_builder.new_read().to_arrow(splits)
    except Exception as e:  # noqa: BLE001
        fail("cannot read %s: %s: %s" % (args.table, type(e).__name__, e))

    lines = []
    if arrow_table is not None and arrow_table.num_rows > 0:
        names = arrow_table.column_names
        columns = [arrow_table.column(i).to_pylist() for i in range(len(names))]
        for values in zip(*columns):
            row = {name: render(value) for name, value in zip(names, values)}
            lines.append(json.dumps(row, sort_keys=True, separators=(",", ":"),
                                    ensure_ascii=False))
    lines.sort()
    out = sys.stdout
    for line in lines:
        out.write(line)
        out.write("\n")
    out.flush()
    return 0


def print_changes(table, name):
    """Streams the changelog of every snapshot in order through pypaimon's streaming read."""
    try:
        builder = table.new_stream_read_builder().with_include_row_kind(True)
        scan = builder.new_streaming_scan()
        read = builder.new_read()
        latest = table.snapshot_manager().get_latest_snapshot()
        out = sys.stdout
        for snapshot_id in range(1, (latest.id if latest else 0) + 1):
            snapshot = scan._snapshot_manager.get_snapshot_by_id(snapshot_id)
            if snapshot is None or not scan.follow_up_scanner.should_scan(snapshot):
                continue
            plan = scan._create_follow_up_plan(snapshot)
            arrow_table = read.to_arrow(plan.splits())
            if arrow_table is None or arrow_table.num_rows == 0:
                continue
            names = arrow_table.column_names
            columns = [arrow_table.column(i).to_pylist() for i in range(len(names))]
            for values in zip(*columns):
                row = {n: render(v) for n, v in zip(names, values)}
                row["_snapshot"] = snapshot_id
                out.write(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
                out.write("\n")
        out.flush()
    except Exception as e:  # noqa: BLE001
        fail("cannot stream changes of %s: %s: %s" % (name, type(e).__name__, e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
