//! Payrail's load benchmark (issue 7): the real server against the machine's own ceilings.
//!
//! Run: `cargo bench --bench load -- --quick` (about 30 s), or `cargo bench --bench load` (full:
//! every scenario at 1, 16 and 64 connections, 10 s each, plus the 1,000,000-reply check, and
//! the ledger scenarios at 64 connections on servers of their own).
//! Flags: `--quick`, `--database-url URL` (a PostgreSQL server: the bench creates a fresh database
//! in it and drops it at the end), `--duration-secs N`, `--connections 1,16,64`,
//! `--scenarios ping,create_counterparty,...` (a subset; `replay_scale` names the 10k/1M check,
//! `ledger_balance_reads` the balance reads), `--ledger-entries N` (entries of the large account
//! the as-of reads run on).
//! Environment: `PAYRAIL_BENCH_SERVER_WRAPPER="valgrind --tool=callgrind ..."` starts the server
//! under a wrapper (for profiles).
//!
//! What it does:
//! - Starts the `payrail` binary that cargo built for this bench (`CARGO_BIN_EXE_payrail`, the
//!   bench profile, i.e. release) as a child process on a fresh temporary data directory, creates
//!   its API key with `payrail keys create --json`, seeds what the scenarios need through the
//!   API, and kills it at the end.
//! - A closed-loop load generator: N connections, each its own HTTP/1.1 keep-alive connection over
//!   TLS (hyper's client connection over tokio-rustls, trusting the server's self-signed
//!   certificate), each sending its next request when the last reply's body is read. Latencies
//!   go into an HdrHistogram (microseconds). A reply with an unexpected status (or a replay
//!   without `Idempotent-Replayed: true`) is an error, counted and sampled in the report.
//! - Ceilings, in the same run on the same machine: `http_ceiling`, a minimal axum + rustls
//!   server inside this process (its own runtime, as many workers as Payrail's) checking a Basic
//!   header in constant time and answering a small JSON body, driven by the same generator at the
//!   same concurrency; `commit_ceiling`, single-row durable commits on the same disk (SQLite: WAL,
//!   synchronous=FULL, one INSERT per transaction on one writer; PostgreSQL: single-row INSERT
//!   transactions with synchronous_commit=on at the create run's concurrency).
//! - Prints a table, then one final line of JSON (the last line of stdout).
//!
//! Layout: this file (the command line's run: stores, stages, the JSON line); `plan` (flags,
//! concurrencies); `harness/` (the server process, TLS client, closed-loop driver, results,
//! /proc sampling, PostgreSQL helpers); `ceilings` (http_ceiling, commit_ceiling); `seed`
//! (fixtures); `ledger` (the ledger scenarios' servers, seeding and pairing with the commit
//! ceiling); `durability` (the durability checks); `report` (table and JSON line);
//! `scenarios/` (one module per scenario, and the registry that runs them in order).
//!
//! Adding a scenario: write `scenarios/<name>.rs` with a unit struct, its [`harness::Requests`]
//! (the request of one connection's next call, over the [`seed::Fixture`]; add any fixture it
//! needs there), and `pub const SCENARIO: Scenario = Scenario::Shared(&MyScenario);` with an
//! `impl OnShared` giving its `name()` (override `measure` to pair its runs with a ceiling, or
//! `concurrencies`, `baseline`, `report` for its own JSON keys). A scenario that needs servers,
//! stores or configuration of its own (an ingestion directory, a cut-off clock) implements
//! `OwnServers` instead, as `replay_scale` and the ledger scenarios (`ledger` has what they
//! share) do, and runs after the shared server stopped. Then
//! add its module name to the `registry!` list in `scenarios/mod.rs`, where it should run: that
//! one line declares the module, registers it for `--scenarios`, the table and the JSON line
//! (`<name>_rps`, `<name>_p99_ms`, and its runs under `runs`). BENCHMARKS.md describes each.

mod ceilings;
mod durability;
mod harness;
mod ledger;
mod plan;
mod report;
mod scenarios;
mod seed;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde_json::Value;

use crate::durability::durability;
use crate::harness::pg::{pg_create_database, pg_drop_database};
use crate::harness::{BoxResult, Store, server_bin, unix_micros};
use crate::plan::{Plan, parse_args};

/// The stores of a run: the shared server's, and each own-servers scenario's by suffix.
struct Stores {
    shared: Store,
    own: BTreeMap<String, Store>,
}

async fn run(plan: Plan) -> BoxResult<Value> {
    let started = Instant::now();
    let machine = report::machine();
    eprintln!("bench: machine {machine}");
    if machine["loadavg_1m_at_start"].as_f64().is_some_and(|l| l > 0.5) {
        eprintln!("bench: WARNING the machine is busy (1-minute load average above 0.5): figures will be noisy");
    }
    let root = tempfile::Builder::new().prefix("payrail-bench-").tempdir().map_err(|e| e.to_string())?;
    let mut created_dbs = vec![];
    let outcome = match &plan.opts.database_url {
        None => Ok(Stores { shared: Store::Sqlite, own: BTreeMap::new() }),
        Some(admin) => create_databases(&plan, admin, &mut created_dbs).await,
    };
    let outcome = match outcome {
        Ok(stores) => run_stores(&plan, root.path(), &stores, machine, started).await,
        Err(e) => Err(e),
    };
    if let Some(admin) = &plan.opts.database_url {
        for db in &created_dbs {
            pg_drop_database(admin, db).await;
        }
    }
    outcome
}

/// On PostgreSQL, a fresh database for the shared server and one per database an own-servers
/// scenario needs; `created` lists them for dropping at the end.
async fn create_databases(plan: &Plan, admin: &str, created: &mut Vec<String>) -> BoxResult<Stores> {
    let base = format!("payrail_bench_{}_{}", std::process::id(), unix_micros());
    let mut create = async |name: String| -> BoxResult<Store> {
        let url = pg_create_database(admin, &name).await?;
        created.push(name);
        Ok(Store::Postgres { url })
    };
    let shared = create(base.clone()).await?;
    let mut own = BTreeMap::new();
    for suffix in scenarios::own_databases(plan) {
        own.insert(suffix.to_owned(), create(format!("{base}_{suffix}")).await?);
    }
    Ok(Stores { shared, own })
}

async fn run_stores(plan: &Plan, root: &Path, stores: &Stores, machine: Value, started: Instant) -> BoxResult<Value> {
    let store = &stores.shared;
    eprintln!("bench: server {} on {}, data in {}", server_bin().display(), store.name(), root.display());
    let shared = scenarios::run_shared(plan, root, store).await?;
    let own = scenarios::run_own(plan, root, &shared.fixture, &stores.own).await?;
    let durability = durability(store, &shared, plan.opts.quick).await;
    let run = report::Run { plan, store, shared: &shared, own: &own, durability, machine, started };
    report::print_table(&run.all());
    Ok(run.json_line())
}

fn main() {
    if cfg!(debug_assertions) {
        eprintln!("bench: WARNING built without optimisations; use `cargo bench --bench load`");
    }
    let opts = match parse_args() {
        Ok(opts) => opts,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let plan = Plan::new(opts);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime");
    match runtime.block_on(run(plan)) {
        Ok(out) => println!("{out}"),
        Err(e) => {
            eprintln!("bench: FAILED: {e}");
            std::process::exit(1);
        }
    }
}
