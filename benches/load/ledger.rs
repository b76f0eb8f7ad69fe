//! What the ledger scenarios share (issue 19): each runs on a server and store of its own,
//! seeded through the API ([`LedgerServer`]: a ledger, its accounts, funding, entries by the
//! thousand in large multi-entry transactions), its write runs paired with the store's commit
//! ceiling measured right before ([`LedgerServer::paired`]), and the JSON keys they report.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::ceilings::commit_ceiling;
use crate::harness::http::send;
use crate::harness::pg::pg_connect;
use crate::harness::results::report_progress;
use crate::harness::{
    BoxResult, Call, Requests, RunResult, ServerProcess, Store, Target, call_json, connect, create_key, measure_http, r1, r3, ratio,
};
use crate::plan::Plan;
use crate::scenarios::{Measured, Own};
use crate::seed::Fixture;

/// Accounts the spread, hot and guarded scenarios post over (quick mode: a token few).
pub const ACCOUNTS_FULL: usize = 10_000;
pub const ACCOUNTS_QUICK: usize = 100;
/// Entries one seeding transaction writes to the account it fills (the API takes 1,000
/// entries a transaction: these and one balancing entry).
pub const ENTRIES_PER_SEED_TXN: u64 = 999;
/// Concurrent connections seeding accounts.
const SEED_WORKERS: usize = 16;
/// Concurrent connections seeding entries on one account: every such transaction locks that
/// account, so more would only queue (on PostgreSQL past the server's 10 s database call
/// timeout: a 999-entry transaction holds the row for most of a second there); two keep one
/// transaction being parsed while the other commits.
const SEED_ENTRY_WORKERS: usize = 2;

/// The ledger a scenario posts to, and a tally of what its server accepted.
#[derive(Debug, Default, Clone)]
pub struct LedgerFixture {
    pub ledger_id: String,
    /// Credit-normal accounts the transactions spread over.
    pub accounts: Vec<String>,
    /// A credit-normal account every transaction of the hot scenarios touches.
    pub hot: String,
    /// A debit-normal account that funds the others (the far side of seeded entries).
    pub source: String,
    /// Balance reads: an account with 100 entries and one with many.
    pub small: String,
    pub large: String,
    /// The effective-time span (µs) the seeded entries lie in, end exclusive.
    pub span: (i64, i64),
    pub tally: Arc<Tally>,
}

/// What the server answered to the guarded debits, warm-up included.
#[derive(Debug, Default)]
pub struct Tally {
    pub sent: AtomicU64,
    pub accepted: AtomicU64,
    pub accepted_sum: AtomicU64,
    pub refused: AtomicU64,
    /// The smallest debit refused (u64::MAX if none): the balance was below it when refused.
    pub min_refused: AtomicU64,
    /// 422s that did not name the balance condition.
    pub wrong_refusals: AtomicU64,
}

impl Tally {
    pub fn new() -> Self {
        Tally { min_refused: AtomicU64::new(u64::MAX), ..Tally::default() }
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }
}

/// A ledger scenario's own server on its own store (SQLite in its own directory, or its own
/// PostgreSQL database).
pub struct LedgerServer {
    pub dir: PathBuf,
    pub store: Store,
    pub server: ServerProcess,
    pub target: Arc<Target>,
}

impl LedgerServer {
    pub async fn start(own: &Own<'_>, name: &str) -> BoxResult<Self> {
        let dir = own.root.join(name);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let store = own.store(name);
        let (_key_id, secret) = create_key(&dir, &store)?;
        let mut server = ServerProcess::start(&dir, &store, &format!("server-{name}.log"))?;
        let target = server.ready(&secret).await?;
        Ok(LedgerServer { dir, store, server, target })
    }

    /// A ledger with `accounts` credit-normal accounts, a hot one and a debit-normal source.
    pub async fn seed_ledger(&self, accounts: usize) -> BoxResult<LedgerFixture> {
        let t0 = Instant::now();
        let mut sender = connect(&self.target).await?;
        let ledger = call_json(&self.target, &mut sender, Call::post("/api/ledgers", r#"{"name":"bench ledger"}"#.into(), None)).await?.0;
        let ledger_id = id(&ledger)?;
        let account = |name: &str, normal: &str| {
            json!({"name": name, "ledger_id": ledger_id, "normal_balance": normal, "currency": "USD"}).to_string()
        };
        let post = |body: String| Call::post("/api/ledger_accounts", body, None);
        let hot = id(&call_json(&self.target, &mut sender, post(account("bench hot", "credit"))).await?.0)?;
        let source = id(&call_json(&self.target, &mut sender, post(account("bench source", "debit"))).await?.0)?;
        let bodies: Arc<dyn Fn(usize) -> String + Send + Sync> = {
            let ledger_id = ledger_id.clone();
            Arc::new(move |i| {
                json!({"name": format!("bench wallet {i}"), "ledger_id": ledger_id, "normal_balance": "credit", "currency": "USD"})
                    .to_string()
            })
        };
        let accounts = post_each(&self.target, "/api/ledger_accounts", accounts, SEED_WORKERS, bodies).await?;
        self.settle_statistics(&["ANALYZE"]).await?;
        eprintln!("bench: seeded a ledger and {} accounts through the API in {:.1} s", accounts.len() + 2, t0.elapsed().as_secs_f64());
        Ok(LedgerFixture { ledger_id, accounts, hot, source, tally: Arc::new(Tally::new()), ..LedgerFixture::default() })
    }

    /// On PostgreSQL, runs `statements` (`ANALYZE`, `VACUUM (ANALYZE) ...`, each on its own:
    /// VACUUM refuses to run in a transaction block) after a bulk seeding: what autovacuum does
    /// within a minute or so of such a load, done at once, so the runs measure the steady
    /// state. (Measured right after seeding 10,000 accounts, before autovacuum came by, the
    /// plans of lookups by id still rested on the empty tables' statistics and scanned every
    /// account: ledger_spread at 98 to 105 postings/s instead of about 600.) Whether it ran.
    pub async fn settle_statistics(&self, statements: &[&str]) -> BoxResult<bool> {
        let Store::Postgres { url } = &self.store else { return Ok(false) };
        let client = pg_connect(url).await?;
        for sql in statements {
            client.batch_execute(sql).await.map_err(|e| {
                let reason = e.as_db_error().map(|db| db.message().to_owned()).unwrap_or_else(|| e.to_string());
                format!("{sql}: {reason}")
            })?;
        }
        Ok(true)
    }

    /// Another account of the fixture's ledger (credit-normal).
    pub async fn account(&self, fx: &LedgerFixture, name: &str) -> BoxResult<String> {
        let mut sender = connect(&self.target).await?;
        let body = json!({"name": name, "ledger_id": fx.ledger_id, "normal_balance": "credit", "currency": "USD"}).to_string();
        id(&call_json(&self.target, &mut sender, Call::post("/api/ledger_accounts", body, None)).await?.0)
    }

    /// Credits `account` with `amount` from the source, posted now.
    pub async fn fund(&self, fx: &LedgerFixture, account: &str, amount: u64) -> BoxResult<()> {
        let mut sender = connect(&self.target).await?;
        call_json(&self.target, &mut sender, Call::post("/api/ledger_transactions", transfer(&fx.source, account, amount, false), None))
            .await?;
        Ok(())
    }

    /// Writes `count` credits of 1 to `account`, balanced by debits of the source, in
    /// transactions of up to `per_txn` credits and one debit, posted at effective times spread
    /// evenly over `span` (µs, end exclusive). Returns how long it took.
    pub async fn seed_entries(&self, fx: &LedgerFixture, account: &str, count: u64, per_txn: u64, span: (i64, i64)) -> BoxResult<Duration> {
        let t0 = Instant::now();
        let txns = count.div_ceil(per_txn);
        let (account, source) = (account.to_owned(), fx.source.clone());
        let bodies: Arc<dyn Fn(usize) -> String + Send + Sync> = Arc::new(move |i| {
            let i = i as u64;
            let credits = per_txn.min(count - i * per_txn);
            let at = span.0 + ((span.1 - span.0) as f64 * (i as f64 + 0.5) / txns as f64) as i64;
            entries_body(&account, &source, credits, at)
        });
        let done = post_each(&self.target, "/api/ledger_transactions", txns as usize, SEED_ENTRY_WORKERS, bodies).await?;
        if done.len() as u64 != txns {
            return Err(format!("seeding entries: {} of {txns} transactions written", done.len()));
        }
        Ok(t0.elapsed())
    }

    /// The account as served (with `query`, e.g. `?balances%5Beffective_at%5D=...`).
    pub async fn read_account(&self, account: &str, query: &str) -> BoxResult<Value> {
        let mut sender = connect(&self.target).await?;
        Ok(call_json(&self.target, &mut sender, Call::get(format!("/api/ledger_accounts/{account}{query}"))).await?.0)
    }

    /// One write run of `requests` at `conns`, right after the store's commit ceiling at the
    /// same concurrency (reported as `ceiling`), so both see the same disk weather.
    pub async fn paired<R: Requests + ?Sized>(
        &self,
        requests: &'static R,
        names: (&'static str, &'static str),
        fixture: &Arc<Fixture>,
        conns: usize,
        plan: &Plan,
    ) -> BoxResult<(RunResult, RunResult)> {
        let ceiling = self.ceiling(names.1, conns, plan).await?;
        Ok((ceiling, self.measure(requests, names.0, fixture, conns, plan).await))
    }

    /// The store's single-row commit ceiling at `conns` (on this scenario's disk or database),
    /// reported as `name`.
    pub async fn ceiling(&self, name: &'static str, conns: usize, plan: &Plan) -> BoxResult<RunResult> {
        let mut run = commit_ceiling(&self.store, &self.dir, conns, plan).await?;
        run.scenario = name;
        report_progress(&run);
        Ok(run)
    }

    pub async fn measure<R: Requests + ?Sized>(
        &self,
        requests: &'static R,
        name: &'static str,
        fixture: &Arc<Fixture>,
        conns: usize,
        plan: &Plan,
    ) -> RunResult {
        let run = measure_http(&self.target, Some(&self.server), name, requests, fixture, conns, plan).await;
        report_progress(&run);
        run
    }
}

/// The plan of the ledger runs: the run's own, but in quick mode a quarter of its duration
/// (a smoke test of the paths, not a measurement).
pub fn ledger_plan(plan: &Plan) -> Plan {
    if plan.opts.quick { plan.rounds(4) } else { plan.clone() }
}

/// Connections per ledger run: the flag's list, else 64.
pub fn ledger_concurrencies(plan: &Plan) -> Vec<usize> {
    plan.opts.connections.clone().unwrap_or_else(|| vec![64])
}

/// Accounts to seed for the spread, hot and guarded scenarios.
pub fn accounts_for(plan: &Plan) -> usize {
    if plan.opts.quick { ACCOUNTS_QUICK } else { ACCOUNTS_FULL }
}

/// A posted two-entry transaction: `amount` from `debit` to `credit`; with `guard`, the debit
/// carries `available_balance_amount: {"gte": 0}`.
pub fn transfer(debit: &str, credit: &str, amount: u64, guard: bool) -> String {
    let condition = if guard { r#","available_balance_amount":{"gte":0}"# } else { "" };
    format!(
        r#"{{"status":"posted","ledger_entries":[{{"ledger_account_id":"{debit}","direction":"debit","amount":{amount}{condition}}},{{"ledger_account_id":"{credit}","direction":"credit","amount":{amount}}}]}}"#
    )
}

/// A posted transaction of `credits` credits of 1 to `account` and one debit of the source.
fn entries_body(account: &str, source: &str, credits: u64, at_micros: i64) -> String {
    let at = payrail::domain::time::Timestamp::from_micros(at_micros);
    let credit = format!(r#"{{"ledger_account_id":"{account}","direction":"credit","amount":1}}"#);
    let mut body = format!(r#"{{"status":"posted","effective_at":"{at}","ledger_entries":["#);
    body.reserve(credit.len() * credits as usize + 128);
    for _ in 0..credits {
        body.push_str(&credit);
        body.push(',');
    }
    body.push_str(&format!(r#"{{"ledger_account_id":"{source}","direction":"debit","amount":{credits}}}]}}"#));
    body
}

/// POSTs `count` bodies (`body(i)`) on `workers` connections; the created ids, in order.
async fn post_each(
    target: &Arc<Target>,
    path: &'static str,
    count: usize,
    workers: usize,
    body: Arc<dyn Fn(usize) -> String + Send + Sync>,
) -> BoxResult<Vec<String>> {
    let workers = workers.min(count.max(1));
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (target, body) = (target.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let mut sender = connect(&target).await?;
            let mut ids = Vec::new();
            for i in (w..count).step_by(workers) {
                let call = Call::post(path, body(i), None);
                let reply = send(&mut sender, &target, &call).await?;
                if reply.status != call.expect {
                    let snippet: String = String::from_utf8_lossy(&reply.body).chars().take(300).collect();
                    return Err(format!("POST {path}: status {} ({snippet})", reply.status.as_u16()));
                }
                #[derive(Deserialize)]
                struct Created {
                    id: String,
                }
                let created: Created = serde_json::from_slice(&reply.body).map_err(|e| format!("POST {path}: {e}"))?;
                ids.push((i, created.id));
            }
            BoxResult::Ok(ids)
        }));
    }
    let mut all = Vec::with_capacity(count);
    for task in tasks {
        all.extend(task.await.map_err(|e| e.to_string())??);
    }
    all.sort_unstable();
    Ok(all.into_iter().map(|(_, id)| id).collect())
}

fn id(value: &Value) -> BoxResult<String> {
    crate::harness::id_of(value)
}

/// The served balance `kind` (`available_balance`, ...) of an account reply: its amount.
pub fn balance(account: &Value, kind: &str) -> BoxResult<i64> {
    account["balances"][kind]["amount"].as_i64().ok_or_else(|| format!("no balances.{kind}.amount in {account}"))
}

/// `<name>_rps`, `_p50_ms`, `_p99_ms` of a run, and with its paired ceiling
/// `<name>_commit_ceiling_tps` and `<name>_vs_commit_ceiling`.
pub fn rate_keys(out: &mut Map<String, Value>, name: &str, run: &RunResult, ceiling: Option<&RunResult>) {
    out.insert(format!("{name}_rps"), json!(r1(run.rps())));
    out.insert(format!("{name}_p50_ms"), json!(r3(run.ms(0.5))));
    out.insert(format!("{name}_p99_ms"), json!(r3(run.ms(0.99))));
    if let Some(ceiling) = ceiling {
        out.insert(format!("{name}_commit_ceiling_tps"), json!(r1(ceiling.rps())));
        out.insert(format!("{name}_vs_commit_ceiling"), json!(ratio(Some(run.rps()), Some(ceiling.rps()))));
    }
}

/// The runs at the largest concurrency measured (their JSON keys are at it).
pub fn top<'a>(runs: &'a [RunResult], name: &str) -> Option<&'a RunResult> {
    let top = runs.iter().filter(|r| r.scenario == name).map(|r| r.connections).max()?;
    runs.iter().find(|r| r.scenario == name && r.connections == top)
}

/// The spread and hot scenarios: a fresh server, a seeded ledger, a paired run at each
/// concurrency, the server stopped; the runs and their keys.
pub async fn run_writes<R: Requests>(
    own: &Own<'_>,
    requests: &'static R,
    name: &'static str,
    ceiling: &'static str,
) -> BoxResult<Measured> {
    let mut ls = LedgerServer::start(own, name).await?;
    let accounts = accounts_for(own.plan);
    let fixture = Arc::new(Fixture { ledger: ls.seed_ledger(accounts).await?, ..Fixture::default() });
    let plan = ledger_plan(own.plan);
    let mut runs = vec![];
    for conns in ledger_concurrencies(own.plan) {
        let (ceiling_run, run) = ls.paired(requests, (name, ceiling), &fixture, conns, &plan).await?;
        runs.extend([ceiling_run, run]);
    }
    ls.server.stop();
    let mut keys = Map::new();
    if let Some(run) = top(&runs, name) {
        rate_keys(&mut keys, name, run, top(&runs, ceiling));
    }
    keys.insert(format!("{name}_accounts"), json!(accounts));
    Ok(Measured { runs, keys })
}
