//! Command-line arguments, as parsed by clap. Checked further in `commands`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "livestate",
    version,
    about = "The company's live state as Apache Paimon tables, derived from an append-only record of events.",
    long_about = "livestate keeps every event the company's modules emit in a durable record, derives \
always-current state tables from it as Apache Paimon primary-key tables, and lets agents read them with \
receipts.\n\nStart with `livestate demo`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the record and the Paimon warehouse from a company spec.
    #[command(after_help = "Example:\n  livestate init --dir ./acme --spec examples/company")]
    Init {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Directory of spec *.toml files [default: the built-in example company]
        #[arg(long)]
        spec: Option<PathBuf>,
        /// Keep the Paimon warehouse in object storage, s3://bucket/prefix, instead of DIR/warehouse/
        /// (recorded in DIR/warehouse.json; endpoint, region and credentials from AWS_ENDPOINT_URL,
        /// AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in every later command's environment)
        #[arg(long, value_name = "URI")]
        warehouse: Option<String>,
    },
    /// Append JSON-lines events to the record; prints each line's offset.
    #[command(
        after_help = "Each line: {\"id\":\"e1\",\"type\":\"inventory.stock_counted\",\"occurred_at\":\"2026-03-02T08:00:00Z\",\"data\":{...}}\n\
Every line is checked first: one invalid line rejects the whole input (nothing is appended) unless --skip-invalid.\n\
Re-sending an id returns its original offset and appends nothing.\n\nExample:\n  livestate emit --dir ./acme events.jsonl"
    )]
    Emit {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// File of JSON lines, or `-` for standard input
        #[arg(default_value = "-")]
        input: String,
        /// Append the valid lines and report the invalid ones instead of rejecting the input
        #[arg(long)]
        skip_invalid: bool,
        /// Print one JSON object per line instead of text
        #[arg(long)]
        json: bool,
    },
    /// Fold the record into every state table, committing at each table's freshness budget.
    #[command(
        after_help = "Without --once, runs until interrupted (Ctrl-C commits what is pending and exits).\n\nExample:\n  livestate derive --dir ./acme --once"
    )]
    Derive {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Catch every table up to the record's head, commit, and exit
        #[arg(long)]
        once: bool,
        /// While catching up, commit every table after this many events
        #[arg(long, default_value_t = livestate_engine::CATCH_UP_COMMIT_EVENTS, value_parser = clap::value_parser!(u64).range(1..))]
        commit_every: u64,
    },
    /// Print a state table's rows with a receipt (snapshot, record offset, lag against budget).
    #[command(
        after_help = "Examples:\n  livestate read --dir ./acme stock --key item=part-0001 --key location=north\n  livestate read --dir ./acme stock --snapshot 3 --json\n  livestate read --dir ./acme stock --tag audit-p17\n  livestate read --dir ./acme record.events --json   # the record archive, every event in offset order"
    )]
    Read {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Table name (see `livestate tables`), or record.events (the archive, read whole)
        table: String,
        /// Filter `column=value`; repeat for several columns
        #[arg(long = "key", value_name = "COLUMN=VALUE")]
        keys: Vec<String>,
        /// Read the table as of this snapshot id
        #[arg(long, conflicts_with = "tag")]
        snapshot: Option<i64>,
        /// Read the table as of this tag
        #[arg(long)]
        tag: Option<String>,
        /// Print {"receipt":…, "rows":[…]} as JSON
        #[arg(long)]
        json: bool,
    },
    /// List the state tables: merge engine, budget, snapshot, offset, lag, files.
    #[command(
        after_help = "Examples:\n  livestate tables --dir ./acme\n  livestate tables --dir ./acme --advise"
    )]
    Tables {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
        /// Instead, recommend each table's budget from the declared decision kinds that read it:
        /// the loosest budget serving every one, with the commits an hour saved or needed
        #[arg(long)]
        advise: bool,
    },
    /// Derive tables again from the whole record, after fixing their mappings in the spec.
    #[command(
        after_help = "Fix the spec (a copy of DIR/spec/ with the mappings corrected), then name the tables the fix\n\
changes. They are derived again from offset 0 in a scratch twin with the fixed spec, and each takes the\n\
twin's rows in one OVERWRITE snapshot, followed by a changelog of every key the fix changed; their\n\
quarantine entries become the twin's, and the fixed spec replaces DIR/spec/. Events, columns, keys,\n\
merge engines and options stay as they are, and tables not named must not change. Earlier snapshots\n\
and tags keep the old rows. The directory must not be in use; interrupted, run it again.\n\n\
Example:\n  livestate rederive --dir ./acme --spec ./fixed-spec stock open_orders"
    )]
    Rederive {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Directory of the fixed spec's *.toml files [default: DIR/spec/ as it is]
        #[arg(long)]
        spec: Option<PathBuf>,
        /// The state tables to derive again
        #[arg(required = true)]
        tables: Vec<String>,
        /// Print the report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Compact a table's LSM tree now (what universal compaction picks, or everything with --full).
    #[command(
        after_help = "Commits a COMPACT snapshot that replaces the merged files. `livestate derive` also compacts on its\n\
own, as each table's freshness budget says; this runs it by hand (the directory must not be in use).\nFor record.events, an append table, compaction merges consecutive small files in the order they\nwere written (--full: into files of up to target-file-size).\n\nExamples:\n  livestate compact --dir ./acme stock\n  livestate compact --dir ./acme item_first_seen --full\n  livestate compact --dir ./acme record.events"
    )]
    Compact {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// State table name, or record.events
        table: String,
        /// Merge every bucket into one sorted run at the top level, dropping deletes (record.events:
        /// every run of small files into files of up to target-file-size)
        #[arg(long)]
        full: bool,
    },
    /// Expire old snapshots and tags and delete the files only they referenced, then remove orphans.
    #[command(
        after_help = "Retention follows each table's Paimon options: snapshot.num-retained.min (10), snapshot.num-retained.max,\n\
snapshot.time-retained (1 h), tag.default-time-retained. Files no snapshot or tag references (left by a crash)\n\
are removed once older than --orphans-older-than.\n\nExamples:\n  livestate expire --dir ./acme\n  livestate expire --dir ./acme stock --orphans-older-than 0s"
    )]
    Expire {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// One table (state table name or record.events) [default: every table]
        table: Option<String>,
        /// Safety window for orphan files, e.g. `1h`, `30min`, `0s`
        #[arg(long, default_value = "1h", value_parser = parse_window)]
        orphans_older_than: std::time::Duration,
    },
    /// Check every stored file: the record's checksums, every Paimon file against its metadata.
    #[command(
        after_help = "Reads the record's table files block by block (each block carries an xxh3 checksum), decodes every\n\
event and cross-checks the id index; checks the lookup index and proposal store files the same way; and for\n\
every table walks each snapshot and tag to its manifest lists, manifests and data files: each must exist, have\n\
the size its metadata records and decode (Paimon keeps no checksums). Changes nothing; needs the directory to\n\
itself. Exit code 0 when everything checks out, 1 listing each damaged or missing file otherwise.\n\n\
Example:\n  livestate verify --dir ./acme"
    )]
    Verify {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Print the whole report as JSON
        #[arg(long)]
        json: bool,
    },
    /// Print a trigger's firings as JSON lines, each once per consumer (its cursor is kept).
    #[command(
        after_help = "Prints the firings after the consumer's cursor and moves the cursor past those printed (after they are\n\
written), so each reaches the consumer once. Firings exist once `livestate derive` has committed the change.\n\
One process owns a directory: while `derive` runs, firings are read through the server instead.\n\nExamples:\n  livestate watch --dir ./acme stock_below_reorder_point --consumer buyer\n  livestate watch --dir ./acme job_blocked --consumer ops --peek"
    )]
    Watch {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Trigger name (see the spec's [triggers.NAME])
        trigger: String,
        /// Who is reading; each consumer has its own cursor
        #[arg(long)]
        consumer: String,
        /// Print without moving the cursor
        #[arg(long)]
        peek: bool,
    },
    /// Serve the HTTP API: record events, derive every table, answer reads, proposals and decisions.
    #[command(
        after_help = "Every route but /v1/health and /v1/openapi.json needs `Authorization: Bearer <token>`; issue tokens with\n\
`livestate token add`. The routes and the permission each needs are in GET /v1/openapi.json and docs/api.md.\n\
Ctrl-C commits what is pending and stops.\n\nExamples:\n  livestate token add --dir ./acme agent:procurement\n  livestate serve --dir ./acme --listen 127.0.0.1:7070\n  livestate serve --dir ./acme --webhook procurement=http://127.0.0.1:9000/approved"
    )]
    Serve {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        #[arg(long, default_value = "127.0.0.1:7070")]
        listen: String,
        /// Principals file (default: DIR/principals.toml)
        #[arg(long)]
        principals: Option<PathBuf>,
        /// How long tags pinning a proposal's evidence are kept (Paimon duration, e.g. `400 d`)
        #[arg(long, default_value = "400 d")]
        tag_retention: String,
        /// POST each approved proposal of MODULE to URL (repeatable), besides its outbox
        #[arg(long, value_name = "MODULE=URL", value_parser = parse_webhook)]
        webhook: Vec<(String, String)>,
    },
    /// Run one read-only SQL query over the state tables (paimon-datafusion).
    #[command(
        after_help = "Only queries: INSERT, UPDATE, DELETE, CALL, DDL, COPY and second statements are refused on the\n\
query's plan. Time travel: `FROM stock VERSION AS OF 12` or `VERSION AS OF 'tag'`. Each table read gets a receipt.\n\n\
Examples:\n  livestate sql --dir ./acme \"SELECT item, sum(on_hand) AS on_hand FROM stock GROUP BY item ORDER BY item\"\n  livestate sql --dir ./acme \"SELECT * FROM stock VERSION AS OF 3 WHERE item = 'bolt'\" --json"
    )]
    Sql {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// The query
        query: String,
        /// At most this many rows
        #[arg(long, default_value_t = 1000)]
        limit: usize,
        /// Print rows and receipts as JSON
        #[arg(long)]
        json: bool,
    },
    /// Serve the Model Context Protocol on stdio for an LLM agent, acting with its token.
    #[command(
        after_help = "Tools: list_tables, describe_table, read_rows, consistent_read, sql, propose, proposal_status,\n\
wait_for_trigger; resources: livestate://tables/NAME. Every call goes through the HTTP API with the agent's token,\n\
so the token decides what the agent may do.\n\nExample (an MCP client's server command):\n  livestate mcp --url http://127.0.0.1:7070 --token $AGENT_TOKEN"
    )]
    Mcp {
        #[arg(long, default_value = "http://127.0.0.1:7070", env = "LIVESTATE_URL")]
        url: String,
        /// The agent's token
        #[arg(long, env = "LIVESTATE_TOKEN", hide_env_values = true)]
        token: String,
    },
    /// Manage who may call the API: issue, revoke and list tokens (stored hashed).
    #[command(subcommand)]
    Token(TokenCommand),
    /// Print what another engine needs to take over derivation (docs/scale-out.md).
    #[command(subcommand)]
    Export(ExportCommand),
    /// Show a proposal's audit: the rows it cited read back from their pinned tags, the
    /// decision, the events it caused and the state after them.
    #[command(
        after_help = "Asks a running server. Example:\n  livestate audit p3f9a... --url http://127.0.0.1:7070 --token $LIVESTATE_TOKEN"
    )]
    Audit {
        /// Proposal id
        id: String,
        #[command(flatten)]
        server: Reader,
        /// Print the audit as JSON
        #[arg(long)]
        json: bool,
    },
    /// Show a proposal's decision input sheet: every number the decision looked at, where it
    /// came from, how fresh it was against what the decision needs, what it is now, the rule's
    /// arithmetic and whether the numbers were read at one instant.
    #[command(
        after_help = "Asks a running server; the proposal's kind must be declared in the spec ([decisions.KIND]). Examples:\n  livestate sheet p3f9a... --url http://127.0.0.1:7070 --token $LIVESTATE_TOKEN\n  livestate sheet --kind stock_replenishment --since 7d --token $LIVESTATE_TOKEN"
    )]
    Sheet {
        /// Proposal id (or --kind for the history of a kind)
        #[arg(required_unless_present = "kind", conflicts_with = "kind")]
        id: Option<String>,
        /// The history of a declared decision kind instead: decisions per day, time to decide,
        /// and per input how often it changed before the decision and was staler than needed
        #[arg(long)]
        kind: Option<String>,
        /// With --kind: how far back, e.g. 30d, 12h
        #[arg(long, default_value = "30d", requires = "kind")]
        since: String,
        #[command(flatten)]
        server: Reader,
        /// Print the sheet as JSON
        #[arg(long)]
        json: bool,
    },
    /// Run the example company live: modules, agents, proposals, approvals, all in one process.
    #[command(
        after_help = "Starts a server on the demo directory (replaced on each run), the simulated modules (inventory,\n\
commerce, procurement, operations), the procurement and work-queue agents and, with --approve auto, a person\n\
approving each proposal; prints the URL and tokens and narrates shortages, proposals, decisions, orders and\n\
deliveries. Without --duration it runs until Ctrl-C; either way it ends with a summary.\n\n\
Examples:\n  livestate demo\n  livestate demo --duration 60s --approve auto --seed 42\n  livestate demo --approve manual --listen 127.0.0.1:7070"
    )]
    Demo {
        #[arg(long, default_value = "./livestate-demo")]
        dir: PathBuf,
        /// Seed of the simulated business
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Items (each stocked in three warehouses)
        #[arg(long, default_value_t = 200)]
        items: usize,
        /// Business events per second
        #[arg(long, default_value_t = 20.0)]
        rate: f64,
        /// Stop after this long (e.g. 60s, 5min) and print the summary
        #[arg(long, value_parser = parse_window)]
        duration: Option<std::time::Duration>,
        /// Who approves proposals
        #[arg(long, value_enum, default_value = "auto")]
        approve: crate::demo::Approve,
        #[arg(long, default_value = "127.0.0.1:7070")]
        listen: String,
        /// A job blocked this long gets a proposal from the work-queue agent
        #[arg(long, default_value = "10s", value_parser = parse_window)]
        blocked_after: std::time::Duration,
    },
}

/// `livestate export ...`
#[derive(Debug, clap::Subcommand)]
pub enum ExportCommand {
    /// Print the Flink SQL that recreates the state tables in a Paimon catalog (same columns, keys
    /// and options as stored) and the INSERT jobs deriving them from a Kafka topic of the record.
    #[command(
        after_help = "Mappings Flink SQL cannot express (deletes, $event.offset) are printed as `--` comments naming why.\n\n\
Example:\n  livestate export flink-sql --dir ./acme --kafka-topic acme.record --kafka-bootstrap kafka:9092 --warehouse s3://acme/warehouse"
    )]
    FlinkSql {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Kafka topic carrying the record (one JSON message per event, canonical form)
        #[arg(long, default_value = "livestate.record")]
        kafka_topic: String,
        /// Kafka bootstrap servers
        #[arg(long, value_name = "HOST:PORT", default_value = "localhost:9092")]
        kafka_bootstrap: String,
        /// Warehouse URI for the Paimon catalog [default: this directory's warehouse as file://]
        #[arg(long, value_name = "URI")]
        warehouse: Option<String>,
    },
}

/// `livestate token ...`
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Issue a token for a new principal and print it (only its hash is stored).
    #[command(
        after_help = "Names: module:<m> (emits m's events, pulls m's outbox), agent:<a> (reads, subscribes, proposes),\n\
person:<p> --scope <module>... (reads, decides proposals for those modules; `*` for all), admin.\n\n\
Example:\n  livestate token add --dir ./acme person:ana --scope procurement"
    )]
    Add {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        /// Principal name, e.g. agent:procurement
        name: String,
        /// Modules whose proposals a person may decide (repeatable)
        #[arg(long)]
        scope: Vec<String>,
    },
    /// Revoke a principal's token (a running server stops accepting it at once).
    Revoke {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
        name: String,
    },
    /// List principals (names and scopes; tokens are never stored).
    List {
        #[arg(long, default_value = "./livestate-data", env = "LIVESTATE_DIR")]
        dir: PathBuf,
    },
}

fn parse_webhook(v: &str) -> Result<(String, String), String> {
    match v.split_once('=') {
        Some((m, url)) if !m.is_empty() && (url.starts_with("http://") || url.starts_with("https://")) => {
            Ok((m.to_string(), url.to_string()))
        }
        _ => Err(format!("`{v}` is not MODULE=http://host/path")),
    }
}

fn parse_window(v: &str) -> Result<std::time::Duration, String> {
    livestate_lsm::parse_duration(v)
        .ok_or_else(|| format!("`{v}` is not a duration such as `1h`, `30min` or `0s`"))
}

/// A running server and a token allowed to read there (agent, person or admin).
#[derive(Debug, Args)]
pub struct Reader {
    #[arg(long, default_value = "http://127.0.0.1:7070", env = "LIVESTATE_URL")]
    pub url: String,
    /// A token allowed to read (agent, person or admin)
    #[arg(long, env = "LIVESTATE_TOKEN", hide_env_values = true)]
    pub token: String,
}
