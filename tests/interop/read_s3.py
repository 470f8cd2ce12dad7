#!/usr/bin/env python3
"""Reads a Paimon table in an S3 warehouse with pypaimon and prints it as JSON lines.

Usage:
    python read_s3.py S3_WAREHOUSE DATABASE.TABLE [--tag NAME]

The S3 settings come from the environment, as livestate takes them: AWS_ENDPOINT_URL,
AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY. They are handed to pypaimon's S3 file
system as the catalog options fs.s3.endpoint, fs.s3.region, fs.s3.accessKeyId and
fs.s3.accessKeySecret. Rows are rendered and sorted exactly as read_table.py prints them.

Exits 1 with a message on stderr on any error, 2 on bad usage.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from read_table import render  # noqa: E402


def fail(message):
    print("read_s3.py: error: %s" % message, file=sys.stderr)
    sys.exit(1)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("warehouse")
    parser.add_argument("table")
    parser.add_argument("--tag")
    args = parser.parse_args(argv)
    if not args.warehouse.startswith("s3://"):
        fail("the warehouse must be s3://bucket/prefix, got %r" % args.warehouse)
    options = {"warehouse": args.warehouse}
    for key, var in [("fs.s3.endpoint", "AWS_ENDPOINT_URL"), ("fs.s3.region", "AWS_REGION"),
                     ("fs.s3.accessKeyId", "AWS_ACCESS_KEY_ID"),
                     ("fs.s3.accessKeySecret", "AWS_SECRET_ACCESS_KEY")]:
        if os.environ.get(var):
            options[key] = os.environ[var]
    from pypaimon import CatalogFactory
    try:
        table = CatalogFactory.create(options).get_table(args.table)
        if args.tag is not None:
            table = table.copy({"scan.tag-name": args.tag})
        read_builder = table.new_read_builder()
        splits = read_builder.new_scan().plan().splits()
        arrow_table = read_builder.new_read().to_arrow(splits)
    except Exception as e:  # noqa: BLE001 - report any pypaimon failure plainly
        fail("cannot read %s in %s: %s: %s" % (args.table, args.warehouse, type(e).__name__, e))
    lines = []
    if arrow_table is not None and arrow_table.num_rows > 0:
        names = arrow_table.column_names
        columns = [arrow_table.column(i).to_pylist() for i in range(len(names))]
        for values in zip(*columns):
            row = {name: render(value) for name, value in zip(names, values)}
            lines.append(json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False))
    lines.sort()
    for line in lines:
        sys.stdout.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
