"""The pypaimon peer of the livestate benchmark.

This script does, with the official Python Paimon library (pypaimon), what a
user would do to keep the benchmark's state tables in Paimon from Python.
livestate does the same job natively. It is run with the benchmark's venv
python (pypaimon 2.1.0, pyarrow 19), and each subcommand prints exactly one
JSON object as the last line on stdout. Logs go to stderr.

Subcommands
-----------
write   --warehouse DIR --events FILE --batch N
    Creates a filesystem catalog in a fresh warehouse, database ``bench``, and
    the tables from spec/tables.toml plus an append-only ``events`` table. It
    then reads the JSON-lines events file N lines at a time. For each batch it
    builds one Arrow table per target table and writes and commits each
    non-empty one. That is one Paimon snapshot per table per batch, the way a
    Python user calls write_arrow / prepare_commit / commit. The timed part
    runs from reading the first line to the last commit, so JSON parsing is
    included (livestate and PostgreSQL parse the same lines). Table creation is
    not timed.
scan    --warehouse DIR --database DB --table T [--repeat 3]
    Full read of a table into Arrow, repeated; reports the median time. It
    uses only the generic catalog API, so it also reads tables that another
    Paimon implementation wrote (livestate: database ``state``, table
    ``stock``).
lookups --warehouse DIR --database DB --table stock --keys FILE --n N
    For each of the first N ``[item, location]`` keys in FILE (JSON lines),
    times one read with the predicate ``item = x AND location = y``: plan,
    read and to_arrow, as a user of the read builder would do for a point
    query. A result that is not exactly one row counts as a miss.

Mapping choices (mirroring spec/tables.toml and spec/mappings.toml)
--------------------------------------------------------------------
* stock: ``merge-engine=partial-update``. Each stock event writes item,
  location, its own value column and updated_at; the other value columns stay
  null, and Paimon's partial update merges non-null columns at read time. The
  three stock modules fill one row without knowing about each other.
* work_queue: ``deduplicate``. The latest event for a job replaces the whole
  row, and optional fields that the event leaves out become null.
* open_orders: ``deduplicate`` with ``rowkind.field=_kind``. order_placed
  writes ``+I`` rows. order_shipped and order_cancelled write ``-D`` rows
  that carry only the key, so the merge drops the order line. The extra
  string column ``_kind`` is how pypaimon accepts deletes from Arrow input
  (pypaimon/write/row_kind.py).
* events: append-only (no primary key). ``data`` holds the event's data
  object as compact JSON.
* "timestamp" is TIMESTAMP(3) without time zone (Arrow ``timestamp('ms')``),
  holding the UTC instant of ``occurred_at``. Timestamps are converted per
  batch with one vectorized Arrow cast rather than per row in Python.
* "int" is INT (int32), the constant INT below. livestate's own tables
  currently store the spec's "int" as BIGINT; scan and lookups do not care.
  Decimals are ``decimal.Decimal`` values, and line_value is computed exactly
  as ``qty * unit_price``.

pypaimon 2.1.0's writer does not compact: every commit adds one data file per
written bucket, and reads merge all of them. The peer leaves it that way,
because that is what a user of the plain write API gets.
"""

import argparse
import json
import logging
import math
import os
import resource
import statistics
import sys
import time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from pypaimon import CatalogFactory, Schema

log = logging.getLogger("pypaimon_peer")

DATABASE = "bench"
TIMESTAMP = pa.timestamp("ms")
# The spec's "int". INT (int32) as the brief asks; livestate currently stores BIGINT.
INT = pa.int64()

STOCK = pa.schema([
    ("item", pa.string()),
    ("location", pa.string()),
    ("on_hand", INT),
    ("reserved", INT),
    ("inbound", INT),
    ("reorder_point", INT),
    ("target", INT),
    ("updated_at", TIMESTAMP),
])
WORK_QUEUE = pa.schema([
    ("job_id", pa.string()),
    ("status", pa.string()),
    ("block_reason", pa.string()),
    ("machine", pa.string()),
    ("team", pa.string()),
    ("changed_at", TIMESTAMP),
])
OPEN_ORDERS = pa.schema([
    ("order_id", pa.string()),
    ("line", INT),
    ("customer", pa.string()),
    ("item", pa.string()),
    ("location", pa.string()),
    ("qty", INT),
    ("unit_price", pa.decimal128(12, 2)),
    ("line_value", pa.decimal128(14, 2)),
    ("placed_at", TIMESTAMP),
    ("_kind", pa.string()),
])
EVENTS = pa.schema([
    ("id", pa.string()),
    ("type", pa.string()),
    ("occurred_at", TIMESTAMP),
    ("data", pa.string()),
])

# name -> (arrow schema, primary key, table options)
TABLES = {
    "stock": (STOCK, ["item", "location"],
              {"merge-engine": "partial-update", "bucket": "2"}),
    "work_queue": (WORK_QUEUE, ["job_id"],
                   {"merge-engine": "deduplicate", "bucket": "1"}),
    "open_orders": (OPEN_ORDERS, ["order_id", "line"],
                    {"merge-engine": "deduplicate", "bucket": "2",
                     "rowkind.field": "_kind"}),
    "events": (EVENTS, [], {}),
}

# Stock events: event type -> the one value column it sets.
STOCK_COLUMNS = {
    "inventory.stock_counted": "on_hand",
    "commerce.reservation_changed": "reserved",
    "procurement.inbound_changed": "inbound",
}
STOCK_VALUE_COLUMNS = ("on_hand", "reserved", "inbound", "reorder_point", "target")
ORDER_DELETES = ("commerce.order_shipped", "commerce.order_cancelled")


def open_catalog(warehouse):
    return CatalogFactory.create({"warehouse": os.path.abspath(warehouse)})


def emit(result):
    print(json.dumps(result), flush=True)


class Batch:
    """Column lists for each target table, filled from one batch of events."""

    def __init__(self):
        self.columns = {name: {field.name: [] for field in schema}
                        for name, (schema, _, _) in TABLES.items()}

    def add(self, event):
        kind, data, at = event["type"], event["data"], event["occurred_at"]
        events = self.columns["events"]
        events["id"].append(event["id"])
        events["type"].append(kind)
        events["occurred_at"].append(at)
        events["data"].append(json.dumps(data, separators=(",", ":")))

        if kind in STOCK_COLUMNS:
            own = STOCK_COLUMNS[kind]
            stock = self.columns["stock"]
            stock["item"].append(data["item"])
            stock["location"].append(data["location"])
            for column in STOCK_VALUE_COLUMNS:
                stock[column].append(data[own] if column == own else None)
            stock["updated_at"].append(at)
        elif kind == "operations.job_status_changed":
            jobs = self.columns["work_queue"]
            jobs["job_id"].append(data["job_id"])
            jobs["status"].append(data["status"])
            for column in ("block_reason", "machine", "team"):
                jobs[column].append(data.get(column))
            jobs["changed_at"].append(at)
        elif kind == "commerce.order_placed":
            price = Decimal(data["unit_price"])
            self._order(data, "+I", data["customer"], data["item"],
                        data["location"], data["qty"], price,
                        data["qty"] * price, at)
        elif kind in ORDER_DELETES:
            # A delete needs only the key; Paimon drops the row on merge.
            self._order(data, "-D", None, None, None, None, None, None, None)

    def _order(self, data, row_kind, customer, item, location, qty,
               unit_price, line_value, placed_at):
        orders = self.columns["open_orders"]
        orders["order_id"].append(data["order_id"])
        orders["line"].append(data["line"])
        orders["customer"].append(customer)
        orders["item"].append(item)
        orders["location"].append(location)
        orders["qty"].append(qty)
        orders["unit_price"].append(unit_price)
        orders["line_value"].append(line_value)
        orders["placed_at"].append(placed_at)
        orders["_kind"].append(row_kind)

    def arrow_tables(self):
        """Yield (table name, arrow table) for every non-empty target table."""
        for name, (schema, _, _) in TABLES.items():
            columns = self.columns[name]
            if not columns[schema.names[0]]:
                continue
            arrays = [to_timestamps(columns[field.name]) if field.type == TIMESTAMP
                      else pa.array(columns[field.name], type=field.type)
                      for field in schema]
            yield name, pa.Table.from_arrays(arrays, schema=schema)


def to_timestamps(values):
    """ISO-8601 UTC strings ("...T08:00:00.123Z") to timestamp('ms') UTC."""
    utc = pc.cast(pa.array(values, type=pa.string()), pa.timestamp("ms", tz="UTC"))
    return utc.cast(TIMESTAMP)


def read_batches(path, size):
    """Yield lists of at most `size` parsed events from a JSON-lines file."""
    batch = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            batch.append(json.loads(line))
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def write_and_commit(table, data):
    """One batch write of `data` to `table` and its commit (one snapshot)."""
    builder = table.new_batch_write_builder()
    writer = builder.new_write()
    committer = builder.new_commit()
    try:
        writer.write_arrow(data)
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()


def cmd_write(args):
    if os.path.isdir(args.warehouse) and os.listdir(args.warehouse):
        sys.exit(f"warehouse {args.warehouse} is not empty; the write needs a fresh one")
    os.makedirs(args.warehouse, exist_ok=True)
    catalog = open_catalog(args.warehouse)
    catalog.create_database(DATABASE, False)
    tables = {}
    for name, (schema, primary_key, options) in TABLES.items():
        identifier = f"{DATABASE}.{name}"
        catalog.create_table(
            identifier,
            Schema.from_pyarrow_schema(schema, primary_keys=primary_key, options=options),
            False)
        tables[name] = catalog.get_table(identifier)

    events = rows = commits = 0
    start = time.perf_counter()
    for parsed in read_batches(args.events, args.batch):
        batch = Batch()
        for event in parsed:
            batch.add(event)
        for name, data in batch.arrow_tables():
            write_and_commit(tables[name], data)
            rows += data.num_rows
            commits += 1
        events += len(parsed)
        log.info("%d events, %d rows, %d commits", events, rows, commits)
    seconds = time.perf_counter() - start

    emit({
        "events": events,
        "rows": rows,
        "commits": commits,
        "seconds": seconds,
        "events_per_s": events / seconds if seconds > 0 else None,
        "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    })


def read_table(table, predicate=None):
    """Plan and read a table (optionally filtered) into one Arrow table."""
    builder = table.new_read_builder()
    if predicate is not None:
        builder = builder.with_filter(predicate)
    splits = builder.new_scan().plan().splits()
    return builder.new_read().to_arrow(splits)


def row_count(result):
    # to_arrow may return None when there is nothing to read.
    return 0 if result is None else result.num_rows


def cmd_scan(args):
    table = open_catalog(args.warehouse).get_table(f"{args.database}.{args.table}")
    times = []
    rows = None
    for _ in range(args.repeat):
        start = time.perf_counter()
        result = read_table(table)
        times.append(time.perf_counter() - start)
        rows = row_count(result)
        log.info("scan %s.%s: %d rows in %.3f s", args.database, args.table,
                 rows, times[-1])
    median = statistics.median(times)
    emit({"rows": rows, "seconds_median": median,
          "rows_per_s": rows / median if median > 0 else None})


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending, non-empty list."""
    rank = max(1, math.ceil(len(sorted_values) * fraction))
    return sorted_values[rank - 1]


def cmd_lookups(args):
    table = open_catalog(args.warehouse).get_table(f"{args.database}.{args.table}")
    keys = []
    with open(args.keys, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                keys.append(json.loads(line))
            if len(keys) == args.n:
                break
    if not keys:
        sys.exit(f"no keys in {args.keys}")

    predicates = table.new_read_builder().new_predicate_builder()
    micros = []
    misses = 0
    for item, location in keys:
        predicate = predicates.and_predicates([
            predicates.equal("item", item),
            predicates.equal("location", location),
        ])
        start = time.perf_counter()
        result = read_table(table, predicate)
        micros.append((time.perf_counter() - start) * 1e6)
        if row_count(result) != 1:
            misses += 1
    log.info("%d lookups, %d misses", len(keys), misses)

    ordered = sorted(micros)
    emit({"n": len(keys), "p50_us": percentile(ordered, 0.50),
          "p99_us": percentile(ordered, 0.99),
          "mean_us": statistics.fmean(micros), "misses": misses})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    write = commands.add_parser("write", help="create the tables and write the events")
    write.add_argument("--warehouse", required=True)
    write.add_argument("--events", required=True)
    write.add_argument("--batch", type=int, required=True)
    write.set_defaults(run=cmd_write)

    scan = commands.add_parser("scan", help="full read of one table, repeated")
    scan.add_argument("--warehouse", required=True)
    scan.add_argument("--database", required=True)
    scan.add_argument("--table", required=True)
    scan.add_argument("--repeat", type=int, default=3)
    scan.set_defaults(run=cmd_scan)

    lookups = commands.add_parser("lookups", help="point reads of stock by key")
    lookups.add_argument("--warehouse", required=True)
    lookups.add_argument("--database", required=True)
    lookups.add_argument("--table", required=True)
    lookups.add_argument("--keys", required=True)
    lookups.add_argument("--n", type=int, required=True)
    lookups.set_defaults(run=cmd_lookups)

    args = parser.parse_args()
    for name in ("batch", "repeat", "n"):
        if getattr(args, name, 1) < 1:
            parser.error(f"--{name} must be at least 1")
    # pypaimon's own INFO logs are chatty; keep them at WARNING.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    log.setLevel(logging.INFO)
    args.run(args)


if __name__ == "__main__":
    main()
