//! The scenarios and the registry that runs them, in its order.
//!
//! Two kinds (see main.rs for how to add one):
//! - [`OnShared`]: a request stream ([`Requests`]) measured on the shared server, started and
//!   seeded once, at each of its concurrencies; the default [`OnShared::measure`] is one
//!   closed-loop run, and a scenario overrides it to pair its run with a ceiling or a fresh
//!   fixture. Its `<name>_rps` and `<name>_p99_ms` go to the JSON line unless it says not.
//! - [`OwnServers`]: measured after the shared server stopped, on data directories, databases and
//!   servers of its own (the idempotency lookups at scale seed a million replies into theirs).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::ceilings::CeilingServer;
use crate::durability::sqlite_journal_mode;
use crate::harness::{BoxResult, Requests, Results, RunResult, ServerProcess, Store, Target, create_key, measure_http};
use crate::plan::Plan;
use crate::seed::{Fixture, SEED_COUNTERPARTIES_FULL, SEED_COUNTERPARTIES_QUICK, seed};

/// Declares each scenario module of this folder and lists its `SCENARIO` in [`ALL`], in the
/// order given (the order they run in).
macro_rules! registry {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every scenario, in the order they run.
        pub const ALL: &[Scenario] = &[$($module::SCENARIO),*];
    };
}

registry! {
    ping,
    create_counterparty,
    create_payment_order,
    replay,
    get,
    list,
    mix,
    replay_scale,
    ledger_spread,
    ledger_hot,
    ledger_hot_guarded,
    ledger_balance_reads,
}

/// A registered scenario: what `--scenarios` names, and how it runs.
#[derive(Clone, Copy)]
pub enum Scenario {
    Shared(&'static dyn OnShared),
    Own(&'static dyn OwnServers),
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Shared(s) => s.name(),
            Scenario::Own(s) => s.name(),
        }
    }
}

/// A scenario measured on the shared server.
#[async_trait]
pub trait OnShared: Requests {
    /// Its name: in `--scenarios`, in the table, in the JSON line's keys.
    fn name(&self) -> &'static str;

    /// Connections per run.
    fn concurrencies(&self, plan: &Plan) -> Vec<usize> {
        plan.concurrencies()
    }

    /// Whether it reads the counterparties seeded for reads (they are seeded only if one does).
    fn reads_seeded(&self) -> bool {
        false
    }

    /// The run its table row is compared with, at the same concurrency.
    fn baseline(&self) -> Option<&'static str> {
        None
    }

    /// Whether `<name>_rps` and `<name>_p99_ms` (at the headline concurrency) go to the JSON line.
    fn headline_rates(&self) -> bool {
        true
    }

    /// More keys for the JSON line, after every scenario's rates.
    fn report(&self, _results: &Results, _plan: &Plan, _out: &mut Map<String, Value>) {}

    /// Measures it at `conns` connections and pushes its runs (and any paired with it).
    async fn measure(&'static self, shared: &SharedServer<'_>, conns: usize, results: &mut Results) -> BoxResult<()> {
        results.push(shared.measure(self, self.name(), &shared.fixture, conns).await);
        Ok(())
    }
}

/// A scenario measured on servers of its own, after the shared one stopped.
#[async_trait]
pub trait OwnServers: Sync + 'static {
    fn name(&self) -> &'static str;

    /// On PostgreSQL, the databases it needs, by suffix (unique among the scenarios): the bench
    /// creates `<base>_<suffix>` before anything runs and drops them at the end.
    fn databases(&self) -> &'static [&'static str] {
        &[]
    }

    /// The run one of its runs (by name) is compared with in the table, at the same concurrency.
    fn baseline_of(&self, _run: &str) -> Option<&'static str> {
        None
    }

    /// Runs it: its runs, and its keys for the JSON line.
    async fn run(&'static self, own: &Own<'_>) -> BoxResult<Measured>;
}

/// What an [`OwnServers`] scenario measured.
pub struct Measured {
    pub runs: Vec<RunResult>,
    pub keys: Map<String, Value>,
}

/// The shared server, and what its scenarios measure against.
pub struct SharedServer<'a> {
    pub plan: &'a Plan,
    pub store: &'a Store,
    /// The server's data directory (the SQLite commit ceiling writes beside it: the same disk).
    pub dir: &'a Path,
    pub server: &'a ServerProcess,
    pub target: Arc<Target>,
    /// The in-process http_ceiling server, with the same key.
    pub http_ceiling: Arc<Target>,
    pub fixture: Arc<Fixture>,
}

impl SharedServer<'_> {
    /// One run of `requests` against the server, reported as `name`, with the server's CPU,
    /// disk writes and memory.
    pub async fn measure<R: Requests + ?Sized>(
        &self,
        requests: &'static R,
        name: &'static str,
        fixture: &Arc<Fixture>,
        conns: usize,
    ) -> RunResult {
        measure_http(&self.target, Some(self.server), name, requests, fixture, conns, self.plan).await
    }
}

/// What an [`OwnServers`] scenario gets: the plan, a directory for its data, the shared
/// server's fixture (its replies' bodies are real), and its databases.
pub struct Own<'a> {
    pub plan: &'a Plan,
    pub root: &'a Path,
    pub fixture: &'a Fixture,
    stores: &'a BTreeMap<String, Store>,
}

impl Own<'_> {
    /// The store of one of its [`OwnServers::databases`] (on SQLite: SQLite, in its own directory).
    pub fn store(&self, suffix: &str) -> Store {
        self.stores.get(suffix).cloned().unwrap_or(Store::Sqlite)
    }
}

/// What the shared server's scenarios measured.
pub struct SharedRun {
    pub results: Results,
    /// The server's peak resident set over its whole life.
    pub peak_rss_mb: Option<f64>,
    pub fixture: Arc<Fixture>,
    pub journal_mode: Option<String>,
}

fn on_shared(plan: &Plan) -> impl Iterator<Item = &'static dyn OnShared> + '_ {
    ALL.iter().filter_map(|s| if let Scenario::Shared(s) = s { Some(*s) } else { None }).filter(|s| plan.selected(s.name()))
}

fn own_servers(plan: &Plan) -> impl Iterator<Item = &'static dyn OwnServers> + '_ {
    ALL.iter().filter_map(|s| if let Scenario::Own(s) = s { Some(*s) } else { None }).filter(|s| plan.selected(s.name()))
}

/// The database suffixes the selected [`OwnServers`] scenarios need, in registry order.
pub fn own_databases(plan: &Plan) -> Vec<&'static str> {
    own_servers(plan).flat_map(|s| s.databases().iter().copied()).collect()
}

/// The run a run of this name is compared with in the table: an [`OnShared`] scenario's
/// baseline, or what an [`OwnServers`] scenario says of one of its runs.
pub fn baseline_of(name: &str) -> Option<&'static str> {
    ALL.iter().find_map(|s| match s {
        Scenario::Shared(s) if s.name() == name => s.baseline(),
        Scenario::Shared(_) => None,
        Scenario::Own(s) => s.baseline_of(name),
    })
}

/// The shared server: starts it, seeds it, measures every selected [`OnShared`] scenario on it,
/// with its ceilings, then stops it.
pub async fn run_shared(plan: &Plan, root: &Path, store: &Store) -> BoxResult<SharedRun> {
    let dir = root.join("main");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let (_key_id, secret) = create_key(&dir, store)?;
    let mut server = ServerProcess::start(&dir, store, "server.log")?;
    let target = server.ready(&secret).await?;
    let count = match (on_shared(plan).any(|s| s.reads_seeded()), plan.opts.quick) {
        (false, _) => 0,
        (true, true) => SEED_COUNTERPARTIES_QUICK,
        (true, false) => SEED_COUNTERPARTIES_FULL,
    };
    let t0 = Instant::now();
    let fixture = Arc::new(seed(&target, count).await?);
    eprintln!("bench: seeded {count} counterparties through the API in {:.2} s", t0.elapsed().as_secs_f64());
    let ceiling = CeilingServer::start(&secret)?;
    let shared = SharedServer { plan, store, dir: &dir, server: &server, target, http_ceiling: ceiling.target(&secret)?, fixture };
    let mut results = Results::default();
    for scenario in on_shared(plan) {
        for conns in scenario.concurrencies(plan) {
            scenario.measure(&shared, conns, &mut results).await?;
        }
    }
    let fixture = shared.fixture;
    drop(ceiling);
    // VmHWM only grows: read after the last run, it is the peak over the server's whole life,
    // the 64-connection runs included.
    let peak_rss_mb = server.peak_rss_mb();
    server.stop();
    let journal_mode = match store {
        Store::Sqlite => Some(sqlite_journal_mode(&dir.join("payrail.db"))?),
        Store::Postgres { .. } => None,
    };
    Ok(SharedRun { results, peak_rss_mb, fixture, journal_mode })
}

/// Every selected [`OwnServers`] scenario, in registry order, with what it measured.
pub async fn run_own(
    plan: &Plan,
    root: &Path,
    fixture: &Fixture,
    stores: &BTreeMap<String, Store>,
) -> BoxResult<Vec<(&'static str, Measured)>> {
    let own = Own { plan, root, fixture, stores };
    let mut measured = vec![];
    for scenario in own_servers(plan) {
        measured.push((scenario.name(), scenario.run(&own).await?));
    }
    Ok(measured)
}
