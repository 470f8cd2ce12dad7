#!/usr/bin/env python3
"""Reads Paimon tables with pypaimon's Ray or Daft reader and writes them as JSON lines.

Usage:
    python read_scale.py ENGINE WAREHOUSE_DIR OUT_DIR READ [READ ...]

ENGINE is `ray` (pypaimon.ray.read_paimon into a Ray Dataset, on one local one-CPU Ray
instance for all reads) or `daft` (pypaimon.daft.read_paimon into a Daft DataFrame, native
runner). Each READ is `DATABASE.TABLE` (the latest snapshot) or `DATABASE.TABLE@TAG` (the
snapshot the tag pins). The rows of the i-th READ (from 0) go to OUT_DIR/i.jsonl (Ray and
Daft log to the standard streams), one JSON object per row, rendered and sorted exactly as
read_table.py prints them.

Neither engine phones home: Ray's usage stats and Daft's analytics are switched off before
they are imported.

Exits 1 with a message on stderr on any error, 2 on bad usage.
"""

import argparse
import json
import os
import sys

os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["DAFT_ANALYTICS_ENABLED"] = "0"
os.environ["DO_NOT_TRACK"] = "1"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import render  # noqa: E402  (after the path and the environment are set)


def fail(message):
    print("read_scale.py: error: %s" % message, file=sys.stderr)
    sys.exit(1)


def to_lines(table):
    lines = []
    if table is not None and table.num_rows > 0:
        names = table.column_names
        columns = [table.column(i).to_pylist() for i in range(len(names))]
        for values in zip(*columns):
            row = {name: render(value) for name, value in zip(names, values)}
            lines.append(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    lines.sort()
    return lines


def read_all(engine, warehouse, reads):
    """Yields (read, arrow table) for each `table` / `table@tag`."""
    catalog = {"warehouse": warehouse}
    if engine == "ray":
        import pyarrow as pa
        import ray
        from pypaimon.ray import read_paimon

        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        try:
            for table, at in reads:
                blocks = ray.get(read_paimon(table, catalog, **at).to_arrow_refs())
                yield pa.concat_tables(blocks) if blocks else None
        finally:
            ray.shutdown()
    else:
        from pypaimon.daft import read_paimon

        for table, at in reads:
            yield read_paimon(table, catalog, **at).to_arrow()


def main(argv):
    parser = argparse.ArgumentParser(description="Read Paimon tables with pypaimon's Ray or Daft reader.")
    parser.add_argument("engine", choices=["ray", "daft"])
    parser.add_argument("warehouse", metavar="WAREHOUSE_DIR")
    parser.add_argument("out", metavar="OUT_DIR")
    parser.add_argument("reads", metavar="READ", nargs="+", help="DATABASE.TABLE or DATABASE.TABLE@TAG")
    args = parser.parse_args(argv)

    if not os.path.isdir(args.warehouse):
        fail("warehouse directory %r does not exist" % args.warehouse)
    reads = []
    for r in args.reads:
        table, _, tag = r.partition("@")
        if "." not in table:
            fail("read %r: give DATABASE.TABLE[@TAG]" % r)
        reads.append((table, {"tag_name": tag} if tag else {}))
    done = 0
    try:
        for i, table in enumerate(read_all(args.engine, args.warehouse, reads)):
            with open(os.path.join(args.out, "%d.jsonl" % i), "w", encoding="utf-8") as out:
                for line in to_lines(table):
                    out.write(line)
                    out.write("\n")
            done += 1
    except ImportError as e:
        fail("cannot import %s (%s); run scripts/pyenv.sh --with-scale-readers" % (args.engine, e))
    except Exception as e:  # noqa: BLE001 - report any reader failure plainly
        fail("%s cannot read %s: %s: %s" % (args.engine, args.reads[done], type(e).__name__, e))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
