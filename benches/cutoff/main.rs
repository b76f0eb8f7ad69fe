//! The cut-off benchmark (issue 20): `payrail bank cutoff` of 100,000 approved ACH orders over a
//! loopback SFTP connection (a real OpenSSH server on 127.0.0.1, started as the transport tests
//! start it), from `approved` to `sent`, timed and its peak RSS measured, as an operator would
//! run it (the release `payrail` binary as a child process).
//!
//! ```sh
//! cargo bench --bench cutoff                              # SQLite, 100,000 orders, over SFTP
//! cargo bench --bench cutoff -- --orders 10000            # fewer
//! cargo bench --bench cutoff -- --database-url "$url"     # PostgreSQL (creates and drops a database)
//! cargo bench --bench cutoff -- --transport directory     # a local folder pair instead of SFTP
//! ```
//!
//! Steps: a fresh data directory; a live connection (SFTP or directory transport, `[ach]`), an internal
//! account and one order made through the domain; then the orders, copies of that one with
//! their own ids and amounts, written straight to the store in batches of 1,000 (seeding is not
//! what is measured). Idle RSS is the peak of `payrail bank files` on the same database (the
//! command line's own baseline: runtime, store, caches); the cut-off's peak is the kernel's
//! `ru_maxrss` of the `payrail bank cutoff` child, its CPU time `ru_utime + ru_stime`. The file is then parsed back to check it
//! carries every order. Prints a table line and a JSON line (the last line).
//!
//! With `--answers` (issue 21), the bank then answers and `payrail bank inbound` applies each
//! answer file, timed with its own peak RSS (`wait4`): a NACHA file returning the first 10,000
//! orders (`--returns N`), then a `camt.053` of 50,000 booked entries (`--statement-entries N`)
//! with its opening and closing balances. Each run must apply the whole file.

mod probe;
#[path = "../../tests/common/sshd.rs"]
mod sshd;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use payrail::base::api_key::Scope;
use payrail::config::Config;
use payrail::domain::Ctx;
use payrail::domain::payment_order::{PaymentOrder, PaymentOrderInput, ops};
use payrail::domain::time::{Clock, SystemClock};
use payrail::domain::webhook::DirectCommit;
use payrail::domain::{id::Id, internal_account, money::Amount};
use payrail::store::{ObjectRecord, Store, Write, WriteBatch};
use serde_json::json;

const ORG: &str = "bench";

struct Args {
    orders: usize,
    database_url: Option<String>,
    answers: bool,
    returns: usize,
    statement_entries: usize,
    latency: bool,
    sftp: bool,
}

fn args() -> Args {
    let mut out = Args {
        orders: 100_000,
        database_url: None,
        answers: false,
        returns: 10_000,
        statement_entries: 50_000,
        latency: false,
        sftp: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--orders" => out.orders = it.next().and_then(|n| n.parse().ok()).expect("--orders N"),
            "--database-url" => out.database_url = it.next(),
            "--answers" => out.answers = true,
            "--latency" => out.latency = true,
            "--transport" => {
                out.sftp = match it.next().as_deref() {
                    Some("sftp") => true,
                    Some("directory") => false,
                    other => panic!("--transport sftp|directory, not {other:?}"),
                }
            }
            "--returns" => out.returns = it.next().and_then(|n| n.parse().ok()).expect("--returns N"),
            "--statement-entries" => out.statement_entries = it.next().and_then(|n| n.parse().ok()).expect("--statement-entries N"),
            "--bench" => {}
            other => panic!("unknown argument {other} (--orders N, --database-url URL, --transport sftp|directory, --answers, --latency)"),
        }
    }
    out
}

/// A fresh database on the PostgreSQL server of `url`, and its URL.
async fn fresh_database(url: &str) -> (String, String) {
    let name = format!("payrail_bench_cutoff_{}", uuid::Uuid::new_v4().simple());
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("reach PostgreSQL");
    let driver = tokio::spawn(connection);
    client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create the bench database");
    drop(client);
    let _ = driver.await;
    let base = url.rsplit_once('/').map_or(url, |(base, _)| base);
    (format!("{base}/{name}"), name)
}

async fn drop_database(url: &str, name: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("reach PostgreSQL");
    let driver = tokio::spawn(connection);
    let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).await;
    drop(client);
    let _ = driver.await;
}

async fn analyze(url: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("reach PostgreSQL");
    let driver = tokio::spawn(connection);
    client.batch_execute("ANALYZE").await.expect("analyze");
    drop(client);
    let _ = driver.await;
}

/// The bank the cut-off delivers to: its two folders as local paths, and the OpenSSH server in
/// front of them when the transport is SFTP (stopped on drop).
struct BankSide {
    outbound: PathBuf,
    inbound: PathBuf,
    sshd: Option<sshd::Sshd>,
}

impl BankSide {
    fn start(dir: &Path, sftp: bool) -> BankSide {
        let sshd = sftp.then(sshd::Sshd::start);
        let root = sshd.as_ref().map_or_else(|| dir.join("acme-bank"), |s| s.dir().to_owned());
        let (outbound, inbound) = (root.join("outbound"), root.join("inbound"));
        for folder in [&outbound, &inbound] {
            std::fs::create_dir_all(folder).unwrap();
        }
        BankSide { outbound, inbound, sshd }
    }

    /// The connection config's `[transport]` table; an SFTP identity file is written in `dir`.
    fn transport_toml(&self, dir: &Path) -> String {
        let (outbound, inbound) = (self.outbound.display(), self.inbound.display());
        let folders = format!("outbound_dir = \"{outbound}\"\ninbound_dir = \"{inbound}\"\n");
        let Some(sshd) = &self.sshd else { return format!("kind = \"directory\"\n{folders}") };
        std::fs::write(dir.join("bank_ed25519"), &sshd.user_key.private).unwrap();
        format!(
            "kind = \"sftp\"\nhost = \"127.0.0.1\"\nport = {}\nuser = \"{}\"\nidentity_file = \"bank_ed25519\"\nhost_key = \"{}\"\n{folders}",
            sshd.port, sshd.user, sshd.host_key.public
        )
    }

    fn kind(&self) -> &'static str {
        if self.sshd.is_some() { "sftp" } else { "directory" }
    }
}

/// The connection's ACH identities.
const ACH: &str = r#"[ach]
immediate_destination = "021000021"
immediate_destination_name = "ACME BANK"
immediate_origin = "1234567890"
immediate_origin_name = "ACME CORP"
company_id = "1234567890"
company_name = "ACME CORP"
"#;

/// Registers the connection, an account on it and `n` approved ACH orders; the connection's id.
async fn seed(config: &Config, dir: &Path, bank_side: &BankSide, n: usize) -> String {
    let (store, secrets) = payrail::connect(config).await.expect("open the store");
    let bank = dir.join("acme-bank");
    std::fs::create_dir_all(&bank).unwrap();
    let head = "name = \"Bench Bank\"\norganization = \"bench\"\nmode = \"live\"\ntimezone = \"America/New_York\"\ncutoffs = [\"16:45\"]\n";
    let toml = format!("{head}[transport]\n{}{ACH}", bank_side.transport_toml(&bank));
    let now = SystemClock.now();
    let registered = payrail::bank::connection::add(store.as_ref(), &secrets, &toml, &bank, now).await.expect("register the connection");
    let scope = Scope { organization_id: ORG.into(), live_mode: true };
    let ctx = Ctx { store: store.as_ref(), rails: None, secrets: &secrets, scope: &scope, now };
    let commit = DirectCommit(store.as_ref());
    let account: internal_account::InternalAccountInput =
        serde_json::from_value(json!({"name": "Operating", "currency": "USD", "connection_id": registered.connection.id})).unwrap();
    let account: serde_json::Value = serde_json::from_str(&internal_account::create(&ctx, &commit, &account).await.unwrap()).unwrap();
    let input: PaymentOrderInput = serde_json::from_value(json!({
        "type": "ach", "amount": 100, "direction": "credit", "originating_account_id": account["id"],
        "remittance_information": "Invoice 42",
        "receiving_account": {
            "party_name": "Jane Doe", "account_type": "checking",
            "account_details": [{"account_number": "123456789"}],
            "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}],
        },
    }))
    .unwrap();
    let template: PaymentOrder = serde_json::from_str(&ops::create(&ctx, &commit, &input).await.unwrap()).unwrap();
    let started = Instant::now();
    for chunk in (1..n).collect::<Vec<_>>().chunks(1000) {
        let mut batch = WriteBatch::new();
        for i in chunk {
            let mut order = template.clone();
            order.id = Id::generate();
            order.amount = Amount::parse("amount", 100 + (*i as i64 % 100_000)).unwrap();
            let record = ObjectRecord {
                id: order.id.to_string(),
                kind: "payment_order",
                scope: scope.clone(),
                parent_id: None,
                created_at: order.created_at,
                doc: serde_json::to_string(&order).unwrap(),
                terms: order.terms(),
            };
            batch.push(Write::Insert(record));
        }
        store.commit(batch).await.expect("seed orders");
    }
    eprintln!("seeded {n} approved ACH orders in {:.1} s", started.elapsed().as_secs_f64());
    drop::<std::sync::Arc<dyn Store>>(store);
    registered.connection.id
}

/// The children waited for so far: the largest peak RSS in MB (`ru_maxrss` is in KiB on
/// Linux) and the CPU seconds they used, user and system together.
fn children_usage() -> (f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage; RUSAGE_CHILDREN is a valid `who`.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (usage.ru_maxrss as f64 / 1024.0, secs(usage.ru_utime) + secs(usage.ru_stime))
}

/// The `payrail` command; `PAYRAIL_BENCH_WRAPPER` (such as `perf record -g --`) goes in front of
/// the cut-off.
fn payrail(dir: &Path, database_url: Option<&str>, args: &[&str]) -> Command {
    let wrapper = std::env::var("PAYRAIL_BENCH_WRAPPER")
        .ok()
        .filter(|w| !w.is_empty() && args.first() == Some(&"bank") && matches!(args.get(1), Some(&"cutoff" | &"inbound")));
    let mut command = match &wrapper {
        Some(wrapper) => {
            let mut words = wrapper.split_whitespace();
            let mut command = Command::new(words.next().expect("a wrapper command"));
            command.args(words).arg(env!("CARGO_BIN_EXE_payrail"));
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_payrail")),
    };
    command.arg("--data-dir").arg(dir);
    if let Some(url) = database_url {
        command.arg("--database-url").arg(url);
    }
    command.args(args).env("RUST_LOG", std::env::var("PAYRAIL_BENCH_LOG").unwrap_or_else(|_| "payrail=warn".into()));
    command
}

fn main() {
    let args = args();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (database_url, database_name) = match &args.database_url {
        Some(url) => {
            let (db, name) = runtime.block_on(fresh_database(url));
            (Some(db), Some(name))
        }
        None => (None, None),
    };
    let config = Config { data_dir: dir.path().to_owned(), database_url: database_url.clone(), ..Config::default() };
    let bank_side = BankSide::start(dir.path(), args.sftp);
    let connection = runtime.block_on(seed(&config, dir.path(), &bank_side, args.orders));
    if let Some(url) = &database_url {
        // A live database has statistics; a fresh one filled in seconds has none until
        // autovacuum's next round, and plans its term lookups blind meanwhile.
        runtime.block_on(analyze(url));
    }
    let store_name = if database_url.is_some() { "postgres" } else { "sqlite" };

    let idle = payrail(dir.path(), database_url.as_deref(), &["bank", "files", "--connection", &connection]).output().unwrap();
    assert!(idle.status.success(), "bank files: {}", String::from_utf8_lossy(&idle.stderr));
    let (idle_mb, idle_cpu) = children_usage();
    if args.latency
        && let Ok(filter) = std::env::var("PAYRAIL_BENCH_LOG")
    {
        // The server runs in this process here: its log lines (the cut-off's phases) to stderr.
        tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).with_writer(std::io::stderr).init();
    }
    let api = args.latency.then(|| runtime.block_on(probe::launch(config.clone(), ORG)));
    let idle_latency = api.as_ref().map(|(api, _)| runtime.block_on(api.idle()));

    if let Some((api, server)) = &api {
        let now = payrail::domain::time::Clock::now(&payrail::domain::time::SystemClock);
        eprintln!("{now} the cut-off starts (the probe's offsets count from here)");
        let probing = probe::Probing::start(&runtime, api);
        let (seconds, lines) = runtime.block_on(server.cutoff(&connection));
        let during = probing.finish(&runtime);
        print!("{lines}");
        println!("cutoff {store_name}: {} ACH orders approved -> sent in {seconds:.1} s, in the server's process", args.orders);
        probe::report(store_name, "the cut-off", idle_latency.as_ref().unwrap(), &during);
    }
    let run = if api.is_none() {
        let started = Instant::now();
        let run = payrail(dir.path(), database_url.as_deref(), &["bank", "cutoff", &connection]).output().unwrap();
        Some((run, started.elapsed().as_secs_f64()))
    } else {
        None
    };
    let files: Vec<_> = std::fs::read_dir(&bank_side.outbound).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "one file: {files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let parsed = payrail::bank::formats::nacha::parse(&text).expect("the file parses");
    let entries: usize = parsed.batches.iter().map(|b| b.entries.len()).sum();
    assert_eq!(entries, args.orders, "every order is in the file");
    if let Some((run, seconds)) = run {
        report_cli_run(&args, (store_name, bank_side.kind()), &run, seconds, idle_mb, idle_cpu, text.len());
    }
    if args.answers {
        let account = runtime.block_on(account_number(&config));
        let probe = api.as_ref().zip(idle_latency.as_ref()).map(|((api, server), idle)| (&runtime, api, server, idle));
        answers::run(&args, dir.path(), &bank_side.inbound, database_url.as_deref(), &connection, &text, &account, store_name, probe);
    }
    drop(api);
    if let (Some(url), Some(name)) = (&args.database_url, &database_name) {
        runtime.block_on(drop_database(url, name));
    }
}

/// The command line cut-off's figures: its time, CPU and peak RSS (`wait4` of the child).
fn report_cli_run(
    args: &Args,
    (store_name, transport): (&str, &str),
    run: &std::process::Output,
    seconds: f64,
    idle_mb: f64,
    idle_cpu: f64,
    file_bytes: usize,
) {
    assert!(run.status.success(), "bank cutoff: {}\n{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    let (peak_mb, all_cpu) = children_usage();
    let cpu = all_cpu - idle_cpu;
    eprint!("{}", String::from_utf8_lossy(&run.stderr));
    print!("{}", String::from_utf8_lossy(&run.stdout));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?").to_owned();
    println!(
        "cutoff {store_name} over {transport}: {} ACH orders approved -> sent in {seconds:.1} s ({:.0} orders/s, {cpu:.1} s CPU); peak RSS {peak_mb:.0} MB, idle {idle_mb:.0} MB, +{:.0} MB; file {file_bytes} bytes; load average {load}",
        args.orders,
        args.orders as f64 / seconds,
        peak_mb - idle_mb,
    );
    println!(
        "{}",
        json!({"bench": "cutoff", "store": store_name, "transport": transport, "orders": args.orders, "seconds": seconds, "cpu_seconds": cpu, "load_average": load, "peak_rss_mb": peak_mb, "idle_rss_mb": idle_mb, "rss_above_idle_mb": peak_mb - idle_mb, "file_bytes": file_bytes})
    );
}

/// The account number of the bench's internal account (what a statement names it by).
async fn account_number(config: &Config) -> String {
    let (store, _) = payrail::connect(config).await.expect("open the store");
    let scope = Scope { organization_id: ORG.into(), live_mode: true };
    let query = payrail::store::ListQuery { kind: internal_account::KIND, scope, filters: Vec::new(), after_seq: None, limit: 1 };
    let stored = store.list(&query).await.unwrap().items.remove(0);
    let account = internal_account::parse(&stored).unwrap();
    account.account_details[0].account_number.clone().unwrap()
}

mod answers {
    //! The `--answers` phase: answer files made with Payrail's writers (checked by the readers'
    //! own tests against carta-ach and the official XSDs), applied by `payrail bank inbound`.

    use std::io::Read;
    use std::path::Path;
    use std::time::Instant;

    use payrail::bank::formats::iso20022::camt::{CamtWriter, ReportHeader};
    use payrail::bank::formats::nacha::answers::{AnswerKind, AnswerWriter, EntryAnswer};
    use payrail::domain::bank_answer::{AccountRef, EntryDirection, StatementBalance, StatementEntry};
    use payrail::domain::money::Currency;
    use serde_json::json;

    /// The runtime, API client, in-process server and idle latencies of `--latency`.
    pub type Probe<'a> = (&'a tokio::runtime::Runtime, &'a super::probe::Api, &'a super::probe::Running, &'a super::probe::Latencies);

    #[allow(clippy::too_many_arguments)]
    pub fn run(
        args: &super::Args,
        dir: &Path,
        inbound: &Path,
        url: Option<&str>,
        connection: &str,
        sent: &str,
        account: &str,
        store: &str,
        probe: Option<Probe<'_>>,
    ) {
        let returns = returns_file(sent, args.returns.min(args.orders));
        std::fs::write(inbound.join("returns.ach"), &returns).unwrap();
        let (seconds, peak_mb, out) = probed(probe, store, "the returns file", dir, url, connection);
        assert!(out.contains(&format!("returns={}", args.returns.min(args.orders))), "every return applied: {out}");
        report("returns", store, args.returns.min(args.orders), returns.len(), seconds, peak_mb);

        let statement = statement_file(account, args.statement_entries);
        std::fs::write(inbound.join("statement.xml"), &statement).unwrap();
        let (seconds, peak_mb, out) = probed(probe, store, "the camt.053", dir, url, connection);
        assert!(out.contains(&format!("transactions={}", args.statement_entries)), "every entry applied: {out}");
        report("camt053", store, args.statement_entries, statement.len(), seconds, peak_mb);
    }

    /// The inbound folder applied: by `payrail bank inbound` (seconds, its peak RSS, its
    /// output), or, when probing, in the server's process with the API's latency reported (no
    /// RSS of its own: NaN).
    fn probed(probe: Option<Probe<'_>>, store: &str, what: &str, dir: &Path, url: Option<&str>, connection: &str) -> (f64, f64, String) {
        let Some((runtime, api, server, idle)) = probe else { return apply(dir, url, connection) };
        let probing = super::probe::Probing::start(runtime, api);
        let (seconds, out) = runtime.block_on(server.inbound(connection));
        super::probe::report(store, what, idle, &probing.finish(runtime));
        (seconds, f64::NAN, out)
    }

    fn report(kind: &str, store: &str, items: usize, bytes: usize, seconds: f64, peak_mb: f64) {
        println!("inbound {store}: a {kind} file of {items} items ({bytes} bytes) applied in {seconds:.1} s; peak RSS {peak_mb:.0} MB");
        println!(
            "{}",
            json!({"bench": "inbound", "file": kind, "store": store, "items": items, "bytes": bytes, "seconds": seconds, "peak_rss_mb": peak_mb})
        );
    }

    fn returns_file(sent: &str, n: usize) -> Vec<u8> {
        let parsed = payrail::bank::formats::nacha::parse(sent).unwrap();
        let payments = payrail::sandbox::payments::read(sent.as_bytes()).unwrap();
        let mut writer = AnswerWriter::new(Vec::new(), &parsed.header, parsed.header.created.date()).unwrap();
        for payment in payments.into_iter().take(n) {
            let kind = AnswerKind::Return { code: "R01".into(), date_of_death: None, information: String::new() };
            writer.push(&EntryAnswer { original: payment.ach.unwrap(), kind }).unwrap();
        }
        writer.finish().unwrap().0
    }

    fn statement_file(account: &str, n: usize) -> Vec<u8> {
        let usd = Currency::parse("currency", "USD").unwrap();
        let account = AccountRef { iban: None, account_number: Some(account.to_owned()) };
        let balance = |balance_type: &str, amount| StatementBalance {
            account: account.clone(),
            balance_type: balance_type.into(),
            amount,
            currency: usd,
            as_of_date: "2026-11-26".into(),
            as_of_time: None,
        };
        let header = ReportHeader {
            message_id: "BENCH-STMT-1".into(),
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            report_id: "BENCH-STMT-1".into(),
            account: account.clone(),
            currency: usd,
        };
        let balances = [balance("opening_ledger", 1_000_000), balance("closing_ledger", 1_000_000 + n as i64 * 100)];
        let mut writer = CamtWriter::statement(Vec::new(), &header, &balances).unwrap();
        for i in 0..n {
            writer
                .entry(&StatementEntry {
                    account: account.clone(),
                    amount: 100,
                    currency: usd,
                    direction: EntryDirection::Credit,
                    booking_date: "2026-11-26".into(),
                    booking_time: None,
                    value_date: None,
                    end_to_end_id: None,
                    ach_trace_number: None,
                    bank_reference: Some(format!("BENCH-{i}")),
                    description: "INCOMING ACH".into(),
                    rail: Some("ach".into()),
                    reversal: false,
                    return_code: None,
                    counterparty: None,
                })
                .unwrap();
        }
        writer.finish().unwrap()
    }

    /// Runs `payrail bank inbound`: its seconds, its own peak RSS in MB, and its stdout.
    #[allow(clippy::zombie_processes)] // reaped by `wait4`, which gives the child's own rusage
    fn apply(dir: &Path, url: Option<&str>, connection: &str) -> (f64, f64, String) {
        let started = Instant::now();
        let mut child = super::payrail(dir, url, &["bank", "inbound", connection]).stdout(std::process::Stdio::piped()).spawn().unwrap();
        let mut out = String::new();
        child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        let mut status = 0;
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: the pid is our child's, `status` and `usage` are valid and writable.
        let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
        assert!(pid > 0 && status == 0, "bank inbound failed: {out}");
        (started.elapsed().as_secs_f64(), usage.ru_maxrss as f64 / 1024.0, out)
    }
}
