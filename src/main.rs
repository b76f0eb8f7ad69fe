//! The `payrail` command line (SPEC K). Parses flags (each also read from `PAYRAIL_<FLAG>`),
//! builds the configuration and calls into the library; nothing else lives here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use payrail::base::secret_box::SecretBox;
use payrail::config::{self, Config, TlsSource};
use payrail::domain::api_key::{ApiKey, Mode};
use payrail::domain::keys;
use payrail::domain::time::SystemClock;
use serde_json::json;

/// mimalloc rather than glibc's allocator: a request allocates a few dozen small short-lived
/// objects, and glibc's malloc/free were ~10 % of a ping's CPU. Measured with the benchmark:
/// server CPU per ping -10 %, per create -12 % (SQLite and PostgreSQL); peak RSS ~20 MB higher.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "payrail", version, about = "Self-hostable payments API server (Modern Treasury wire format)")]
struct Cli {
    #[command(flatten)]
    storage: StorageArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct StorageArgs {
    /// Data directory: the SQLite database and the self-signed certificate live here.
    #[arg(long, global = true, env = "PAYRAIL_DATA_DIR", default_value = config::DEFAULT_DATA_DIR)]
    data_dir: PathBuf,
    /// Database URL: sqlite://PATH (default: sqlite://<data-dir>/payrail.db) or
    /// postgres://USER:PASSWORD@HOST:PORT/DB for several instances on one database.
    #[arg(long, global = true, env = "PAYRAIL_DATABASE_URL")]
    database_url: Option<String>,
    /// Most PostgreSQL connections this instance opens (ignored for SQLite).
    #[arg(long, global = true, env = "PAYRAIL_DATABASE_POOL_MAX", default_value_t = 16)]
    database_pool_max: usize,
    /// Longest one PostgreSQL connection's set-up (TCP, startup, authentication) may take on one
    /// host before the next host of the URL is tried, in milliseconds.
    #[arg(long, global = true, env = "PAYRAIL_DATABASE_CONNECT_TIMEOUT_MS", default_value_t = 5_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    database_connect_timeout_ms: u64,
    /// Longest one PostgreSQL call (a query, a transaction up to its COMMIT) may take before the
    /// request answers 503, in milliseconds; also the server-side statement_timeout.
    #[arg(long, global = true, env = "PAYRAIL_DATABASE_TIMEOUT_MS", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    database_timeout_ms: u64,
    /// Master key ring that seals secrets at rest (default: <data-dir>/master.key, created on
    /// first use; keep it outside the data directory in production). Must be mode 0600.
    #[arg(long, global = true, env = "PAYRAIL_MASTER_KEY_FILE")]
    master_key_file: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API over HTTPS.
    Serve(ServeArgs),
    /// Manage API keys (works beside a running server).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Manage webhook endpoints (works beside a running server).
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Register and list bank connections (SPEC B1; works beside running servers).
    Connections {
        #[command(subcommand)]
        command: ConnectionsCommand,
    },
    /// Cut-offs and the files sent to banks (SPEC B2, B6; works beside running servers).
    Bank {
        #[command(subcommand)]
        command: BankCommand,
    },
    /// Manage the master key that seals secrets at rest (works beside running servers).
    MasterKey {
        #[command(subcommand)]
        command: MasterKeyCommand,
    },
    /// Apply database migrations and exit.
    Migrate,
    /// Print the API's OpenAPI document (JSON) on stdout; it opens no database.
    Openapi,
}

#[derive(Args)]
struct ServeArgs {
    /// Address of the API (HTTPS, or plain HTTP with --plain-http).
    #[arg(long, env = "PAYRAIL_LISTEN", default_value = config::DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// PEM certificate chain (with --tls-key); without both, a self-signed one is made.
    #[arg(long, env = "PAYRAIL_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "PAYRAIL_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Plain HTTP admin listener for /healthz and /metrics; "off" disables it.
    #[arg(long, env = "PAYRAIL_ADMIN_LISTEN", default_value = config::DEFAULT_ADMIN_LISTEN)]
    admin_listen: String,
    /// Serve plain HTTP (only behind a proxy that terminates TLS).
    #[arg(long, env = "PAYRAIL_PLAIN_HTTP")]
    plain_http: bool,
    /// Reject a reused Idempotency-Key whose method, path or body differ (SPEC I11).
    #[arg(long, env = "PAYRAIL_IDEMPOTENCY_STRICT")]
    idempotency_strict: bool,
    /// Largest request body accepted, in bytes (at least 1).
    #[arg(long, env = "PAYRAIL_BODY_LIMIT_BYTES", default_value_t = 1024 * 1024, value_parser = clap::value_parser!(u32).range(1..))]
    body_limit_bytes: u32,
    /// Longest a request may run before it is answered 503 and abandoned, in milliseconds (at
    /// least 1).
    #[arg(long, env = "PAYRAIL_REQUEST_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    request_timeout_ms: u64,
    /// Time between the sandbox bank's steps on a sandbox payment order, in milliseconds.
    #[arg(long, env = "PAYRAIL_SANDBOX_STEP_MS", default_value_t = 2_000)]
    sandbox_step_ms: u64,
    /// Requests per second each API key may make; 0 turns rate limiting off.
    #[arg(long, env = "PAYRAIL_RATE_LIMIT_PER_SEC", default_value_t = 0)]
    rate_limit_per_sec: u32,
    /// Requests a key may make in a burst above its rate.
    #[arg(long, env = "PAYRAIL_RATE_LIMIT_BURST", default_value_t = 100)]
    rate_limit_burst: u32,
    /// Most connections open at once (at least 1).
    #[arg(long, env = "PAYRAIL_CONNECTIONS_MAX", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    connections_max: u32,
    /// Most connections open at once from one client address (IPv6: one /64); 0: no cap of its
    /// own. Default: 256 over TLS; none with --plain-http, where the proxy is the only client.
    #[arg(long, env = "PAYRAIL_CONNECTIONS_PER_ADDRESS_MAX")]
    connections_per_address_max: Option<usize>,
    #[command(flatten)]
    webhooks: WebhookArgs,
}

/// How webhooks are sent.
#[derive(Args)]
struct WebhookArgs {
    /// Allow webhook URLs on private and link-local networks (10/8, 172.16/12, 192.168/16,
    /// 169.254/16, fc00::/7, fe80::/10...), in both modes. Loopback is for sandbox mode only.
    #[arg(long, env = "PAYRAIL_WEBHOOKS_ALLOW_PRIVATE")]
    webhooks_allow_private: bool,
    /// Webhook endpoints one organization and mode may have; past it, creating one is a 422.
    #[arg(long, env = "PAYRAIL_WEBHOOK_ENDPOINTS_MAX", default_value_t = payrail::domain::webhook::ENDPOINTS_MAX_DEFAULT)]
    webhook_endpoints_max: usize,
    /// How often the webhook worker looks for new events and due retries, in milliseconds.
    #[arg(long, env = "PAYRAIL_WEBHOOK_POLL_MS", default_value_t = 250)]
    webhook_poll_ms: u64,
    /// How long a receiver has to answer, in milliseconds (at least 1).
    #[arg(long, env = "PAYRAIL_WEBHOOK_TIMEOUT_MS", default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..))]
    webhook_timeout_ms: u64,
    /// The first retry waits between half of this and this, in milliseconds; then it doubles.
    #[arg(long, env = "PAYRAIL_WEBHOOK_RETRY_BASE_MS", default_value_t = 5_000)]
    webhook_retry_base_ms: u64,
    /// Longest wait between two attempts, in milliseconds.
    #[arg(long, env = "PAYRAIL_WEBHOOK_RETRY_MAX_MS", default_value_t = 3_600_000)]
    webhook_retry_max_ms: u64,
    /// How long a failing delivery is retried before it is marked failed: 90s, 15m, 24h, 3d.
    #[arg(long, env = "PAYRAIL_WEBHOOK_RETRY_WINDOW", default_value = "3d")]
    webhook_retry_window: String,
}

#[derive(Subcommand)]
enum WebhooksCommand {
    /// Create an endpoint; prints its signing secret once, alone on the last line.
    Create {
        #[arg(long, env = "PAYRAIL_URL")]
        url: String,
        /// Send only these events (repeatable): `completed` or `payment_order.completed`.
        #[arg(long = "event", env = "PAYRAIL_EVENT", value_delimiter = ',')]
        events: Vec<String>,
        #[arg(long, env = "PAYRAIL_MODE", default_value = "sandbox")]
        mode: String,
        #[arg(long, env = "PAYRAIL_ORG", default_value = "default")]
        org: String,
        /// Accept a URL on a private network (the server needs the same flag to send there).
        #[arg(long, env = "PAYRAIL_WEBHOOKS_ALLOW_PRIVATE")]
        webhooks_allow_private: bool,
        /// Endpoints the organization and mode may have at most (as the server's flag).
        #[arg(long, env = "PAYRAIL_WEBHOOK_ENDPOINTS_MAX", default_value_t = payrail::domain::webhook::ENDPOINTS_MAX_DEFAULT)]
        webhook_endpoints_max: usize,
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// List endpoints of every organization and mode (never their secrets).
    List {
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// Delete an endpoint and its deliveries.
    Delete { id: String },
}

#[derive(Subcommand)]
enum MasterKeyCommand {
    /// Write a new key file (one fresh 256-bit key, mode 0600) at PATH; never overwrites.
    Generate { path: PathBuf },
    /// Put a fresh key at the head of the master key file: new secrets are sealed under it,
    /// older ones still open. Then run `rewrap`.
    Rotate,
    /// Re-seal every stored secret (webhook secrets, the API key pepper, bank connection
    /// identity keys, stored replies that carry a secret) under the newest key.
    Rewrap,
    /// Re-seal, then drop every key but the newest from the file.
    Retire,
}

#[derive(Subcommand)]
enum ConnectionsCommand {
    /// Register the bank connection a TOML config file describes (see the README); prints its
    /// id on the last line, or with --json one JSON object.
    Add {
        #[arg(long, env = "PAYRAIL_CONFIG")]
        config: PathBuf,
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// List every registered connection (no secret is shown).
    List {
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
}

#[derive(Subcommand)]
enum BankCommand {
    /// Run a connection's cut-off now: its approved, due live payment orders go to the bank in
    /// one file per rail; files a crashed or failed run left are finished first. Prints a line
    /// per file (id, name, rail, orders, totals, status).
    Cutoff {
        connection_id: String,
        /// Longest wait for a cut-off of the connection running elsewhere, in seconds.
        #[arg(long, env = "PAYRAIL_WAIT_SECS", default_value_t = 60)]
        wait_secs: u64,
    },
    /// Read a connection's inbound folder now: the bank's returns, status reports and
    /// statements are applied, each file once and whole (SPEC B5). Prints a line per file.
    Inbound {
        connection_id: String,
        /// Longest wait for a read of the folder running elsewhere, in seconds.
        #[arg(long, env = "PAYRAIL_WAIT_SECS", default_value_t = 60)]
        wait_secs: u64,
    },
    /// List the files sent to and received from banks (id, name, sha256, direction, rail or
    /// format, orders, totals, status, upload time); `bank files show FILE_ID` prints one file's bytes.
    Files(BankFilesArgs),
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
struct BankFilesArgs {
    #[command(subcommand)]
    command: Option<BankFilesCommand>,
    /// Only this connection's files.
    #[arg(long, env = "PAYRAIL_CONNECTION")]
    connection: Option<String>,
    #[arg(long, env = "PAYRAIL_JSON")]
    json: bool,
}

#[derive(Subcommand)]
enum BankFilesCommand {
    /// Print a file's bytes on stdout, exactly as uploaded or received.
    Show { file_id: String },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a key; prints the secret once, alone on the last line.
    Create {
        #[arg(long, env = "PAYRAIL_NAME")]
        name: String,
        #[arg(long, env = "PAYRAIL_MODE", default_value = "sandbox")]
        mode: String,
        #[arg(long, env = "PAYRAIL_ORG", default_value = "default")]
        org: String,
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// List keys (never their secrets).
    List {
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// Issue a successor; the old key expires after the grace period.
    Roll {
        id: String,
        /// How long the old key keeps working: 90s, 15m, 24h, 7d.
        #[arg(long, env = "PAYRAIL_GRACE", default_value = "24h")]
        grace: String,
        #[arg(long, env = "PAYRAIL_JSON")]
        json: bool,
    },
    /// Revoke a key at once.
    Revoke { id: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("payrail: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("payrail: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("payrail=info,warn"));
    // Colour only for a person at a terminal, never in files or log collectors.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let mut config = Config {
        data_dir: cli.storage.data_dir,
        master_key_file: cli.storage.master_key_file,
        database_url: cli.storage.database_url,
        database_pool_max: cli.storage.database_pool_max,
        database_connect_timeout_ms: cli.storage.database_connect_timeout_ms,
        database_timeout_ms: cli.storage.database_timeout_ms,
        ..Config::default()
    };
    match cli.command {
        Command::Serve(args) => serve(config, args).await,
        Command::Openapi => {
            // `payrail openapi | head` closes the pipe early: that ends the output, not an error
            // worth a panic.
            use std::io::Write as _;
            match std::io::stdout().lock().write_all(payrail::api::openapi::json().as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
                _ => Ok(()),
            }
        }
        Command::Migrate => {
            payrail::migrate(&config).await?;
            // Given a key file, the database is bound to it now (its key pepper sealed under
            // it), so a later command run without the flag is refused instead of binding the
            // database to a key of its own. Without one, migrate touches no secret: it may run
            // from a host that holds no key.
            if config.master_key_file.is_some() {
                payrail::connect(&config).await?;
            }
            println!("migrations applied to {}", config.database_url());
            Ok(())
        }
        Command::Webhooks { command } => {
            config.admin_listen = None;
            let (store, secrets) = payrail::connect(&config).await?;
            run_webhooks(store.as_ref(), &secrets, command).await
        }
        Command::MasterKey { command } => run_master_key(&config, command).await,
        Command::Connections { command } => {
            config.admin_listen = None;
            let (store, secrets) = payrail::connect(&config).await?;
            run_connections(store.as_ref(), &secrets, command).await
        }
        Command::Bank { command } => {
            config.admin_listen = None;
            let (store, secrets) = payrail::connect(&config).await?;
            run_bank(store, &secrets, &config.data_dir, command).await
        }
        Command::Keys { command } => {
            config.admin_listen = None;
            let store = payrail::connect_store(&config).await?;
            run_keys(store.as_ref(), command).await
        }
    }
}

async fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<()> {
    config.tls = match (args.tls_cert, args.tls_key) {
        (Some(cert), Some(key)) => TlsSource::Files { cert, key },
        _ => TlsSource::SelfSigned,
    };
    config.admin_listen = match args.admin_listen.as_str() {
        "off" | "" => None,
        addr => Some(addr.parse().map_err(|_| anyhow::anyhow!("--admin-listen: not an address: {addr}"))?),
    };
    config.plain_http = args.plain_http;
    config.idempotency_strict = args.idempotency_strict;
    config.body_limit_bytes = args.body_limit_bytes as usize;
    config.request_timeout_ms = args.request_timeout_ms;
    config.connections_max = args.connections_max as usize;
    config.connections_per_address_max = args.connections_per_address_max;
    config.sandbox_step_ms = args.sandbox_step_ms;
    config.rate_limit_per_sec = args.rate_limit_per_sec;
    config.rate_limit_burst = args.rate_limit_burst;
    let hooks = args.webhooks;
    config.webhooks_allow_private = hooks.webhooks_allow_private;
    config.webhook_endpoints_max = hooks.webhook_endpoints_max;
    config.webhook_poll_ms = hooks.webhook_poll_ms;
    config.webhook_timeout_ms = hooks.webhook_timeout_ms;
    config.webhook_retry_base_ms = hooks.webhook_retry_base_ms;
    config.webhook_retry_max_ms = hooks.webhook_retry_max_ms;
    config.webhook_retry_window_secs = keys::parse_duration_secs(&hooks.webhook_retry_window)
        .map_err(|_| anyhow::anyhow!("--webhook-retry-window: a duration such as 3d, 24h or 90s"))?;
    let listener =
        tokio::net::TcpListener::bind(args.listen).await.map_err(|err| anyhow::anyhow!("cannot listen on {}: {err}", args.listen))?;
    let server = payrail::launch(config, listener, shutdown_signal()).await?;
    server.wait().await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}

async fn run_webhooks(store: &dyn payrail::store::Store, secrets: &SecretBox, command: WebhooksCommand) -> anyhow::Result<()> {
    use payrail::domain::time::Clock;
    use payrail::domain::webhook::{self, EndpointInput, EndpointRules, UrlPolicy};
    let now = SystemClock.now();
    match command {
        WebhooksCommand::Create { url, events, mode, org, webhooks_allow_private, webhook_endpoints_max, json } => {
            let mode = Mode::parse(&mode).map_err(|_| anyhow::anyhow!("--mode must be sandbox or live"))?;
            let input = EndpointInput { url: Some(url), event_names: Some(events) };
            let rules = EndpointRules { policy: UrlPolicy { allow_private: webhooks_allow_private }, endpoints_max: webhook_endpoints_max };
            let reply = webhook::create_for(store, secrets, now, &org, mode, &input, &rules).await.map_err(cli_error)?;
            let mut created: serde_json::Value = serde_json::from_str(&reply)?;
            created["organization_id"] = json!(org);
            if json {
                println!("{created}");
            } else {
                let mode = if mode.is_live() { "live" } else { "sandbox" };
                println!(
                    "created webhook endpoint {} ({mode}, organization {org}) for {}",
                    created["id"].as_str().unwrap_or(""),
                    created["url"].as_str().unwrap_or("")
                );
                println!("the signing secret is shown once, now; store it safely:");
                println!("{}", created["secret"].as_str().unwrap_or(""));
            }
        }
        WebhooksCommand::List { json } => {
            let all = webhook::list_all(store).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                println!("{:<36}  {:<8}  {:<16}  {:<27}  {:<30}  URL", "ID", "MODE", "ORGANIZATION", "CREATED", "EVENTS");
                for e in &all {
                    let mode = if e.live_mode { "live" } else { "sandbox" };
                    let events = if e.event_names.is_empty() { "*".to_owned() } else { e.event_names.join(",") };
                    println!(
                        "{:<36}  {mode:<8}  {:<16}  {:<27}  {events:<30}  {}",
                        e.id,
                        e.organization_id,
                        e.created_at.to_string(),
                        e.url
                    );
                }
            }
        }
        WebhooksCommand::Delete { id } => {
            let deleted = webhook::delete_by_id(store, secrets, now, &id).await?;
            println!("deleted webhook endpoint {} ({})", deleted.id, deleted.url);
        }
    }
    Ok(())
}

/// `payrail master-key ...` (SPEC S4). Prints key ids, never a key.
async fn run_master_key(config: &Config, command: MasterKeyCommand) -> anyhow::Result<()> {
    match command {
        MasterKeyCommand::Generate { path } => {
            let id = SecretBox::generate_file(&path)?;
            println!("wrote master key {id} to {} (mode 0600)", path.display());
        }
        MasterKeyCommand::Rotate => {
            let secrets = payrail::open_secrets(config)?;
            let id = secrets.rotate()?;
            let path = secrets.path().map(|p| p.display().to_string()).unwrap_or_default();
            println!("master key {id} added at the head of {path}; keys now {}", secrets.key_ids().join(", "));
            println!("next: copy the file to every host, then run `payrail master-key rewrap`");
        }
        MasterKeyCommand::Rewrap => {
            let (store, secrets) = payrail::connect(config).await?;
            rewrap(store.as_ref(), &secrets).await?;
        }
        MasterKeyCommand::Retire => {
            let (store, secrets) = payrail::connect(config).await?;
            rewrap(store.as_ref(), &secrets).await?;
            let dropped = secrets.retire_old()?;
            println!(
                "retired master keys: {}; the file holds {} only",
                if dropped.is_empty() { "none".into() } else { dropped.join(", ") },
                secrets.newest_id()
            );
        }
    }
    Ok(())
}

async fn rewrap(store: &dyn payrail::store::Store, secrets: &SecretBox) -> anyhow::Result<()> {
    let hooks = payrail::domain::webhook::rewrap_secrets(store, secrets, false).await?;
    let pepper = keys::rewrap_pepper(store, secrets).await?;
    let replies = keys::rewrap_replies(store, secrets, payrail::domain::time::Clock::now(&SystemClock)).await?;
    let identities = payrail::bank::connection::rewrap_identities(store, secrets).await?;
    println!(
        "re-sealed {} of {} webhook secrets, {} API key pepper, {} of {} bank connection identity keys and {} of {} stored replies holding a secret under master key {}",
        hooks.resealed,
        hooks.total,
        if pepper { "the" } else { "not the (already current)" },
        identities.resealed,
        identities.resealed + identities.current + identities.unreadable.len(),
        replies.resealed,
        replies.resealed + replies.current + replies.unreadable,
        secrets.newest_id()
    );
    if !identities.unreadable.is_empty() {
        eprintln!(
            "warning: the identity keys of connections {} are sealed under a master key the file no longer holds: they cannot log in to their bank until that key is back in the file and rewrap runs",
            identities.unreadable.join(", ")
        );
    }
    if replies.unreadable > 0 {
        eprintln!(
            "warning: {} stored replies are sealed under a master key the file no longer holds; their replays answer 500 until they expire",
            replies.unreadable
        );
    }
    Ok(())
}

/// A domain error in the command line's words: a 422 names the flag it is about.
fn cli_error(err: payrail::error::Error) -> anyhow::Error {
    match err {
        payrail::error::Error::Invalid { parameter, message, .. } => {
            let flag = if parameter.starts_with("event_names") { "event".to_owned() } else { parameter.replace('_', "-") };
            anyhow::anyhow!("--{flag}: {message}")
        }
        other => anyhow::anyhow!(other),
    }
}

fn connection_json(registered: &payrail::domain::connection::Registered) -> serde_json::Value {
    let c = &registered.connection;
    json!({
        "id": c.id,
        "object": "connection",
        "name": c.vendor_name,
        "vendor_name": c.vendor_name,
        "vendor_id": c.vendor_id,
        "organization_id": registered.scope.organization_id,
        "live_mode": c.live_mode,
        "created_at": c.created_at,
    })
}

async fn run_connections(store: &dyn payrail::store::Store, secrets: &SecretBox, command: ConnectionsCommand) -> anyhow::Result<()> {
    match command {
        ConnectionsCommand::Add { config, json } => {
            let text = std::fs::read_to_string(&config).map_err(|e| anyhow::anyhow!("--config: cannot read {}: {e}", config.display()))?;
            let base_dir = config.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
            let now = payrail::domain::time::Clock::now(&SystemClock);
            let registered = payrail::bank::connection::add(store, secrets, &text, &base_dir, now).await?;
            if json {
                println!("{}", connection_json(&registered));
            } else {
                let c = &registered.connection;
                let mode = if c.live_mode { "live" } else { "sandbox" };
                println!("registered {} for {} ({mode})", c.vendor_name, registered.scope.organization_id);
                println!("{}", c.id);
            }
        }
        ConnectionsCommand::List { json } => {
            let all = payrail::domain::connection::all_with_builtin(store).await?;
            if json {
                println!("{}", serde_json::Value::Array(all.iter().map(connection_json).collect()));
            } else {
                for r in &all {
                    let mode = if r.connection.live_mode { "live" } else { "sandbox" };
                    println!(
                        "{}  {:<9} {:<8} {:<20} {}",
                        r.connection.id, r.connection.vendor_id, mode, r.scope.organization_id, r.connection.vendor_name
                    );
                }
            }
        }
    }
    Ok(())
}

async fn run_bank(
    store: std::sync::Arc<dyn payrail::store::Store>,
    secrets: &SecretBox,
    data_dir: &std::path::Path,
    command: BankCommand,
) -> anyhow::Result<()> {
    use payrail::bank::cutoff;
    match command {
        BankCommand::Cutoff { connection_id, wait_secs } => {
            let registered = cutoff::connection(store.as_ref(), &connection_id).await?;
            let now = payrail::domain::time::Clock::now(&SystemClock);
            let wait = std::time::Duration::from_secs(wait_secs);
            let report = cutoff::run(store, secrets, data_dir, &registered, now, cutoff::Mode::Now, wait).await?;
            let Some(files) = report else {
                anyhow::bail!("another cut-off of connection {connection_id} is still running (waited {wait_secs} s); nothing was done")
            };
            if files.is_empty() {
                println!("no approved payment order of connection {connection_id} was due");
            }
            for report in &files {
                let f = &report.file;
                let outcome = match &report.error {
                    None => f.status.as_str().to_owned(),
                    Some(err) => format!("upload failed (retried later): {err}"),
                };
                println!(
                    "{}  {}  {}  orders={}  credit_total={}  debit_total={}  {outcome}",
                    f.id, f.name, f.rail, f.order_count, f.credit_total, f.debit_total
                );
            }
            if files.iter().any(|r| r.error.is_some()) {
                anyhow::bail!("some files were not uploaded; their orders stay processing until a later attempt uploads them");
            }
        }
        BankCommand::Inbound { connection_id, wait_secs } => {
            let registered = cutoff::connection(store.as_ref(), &connection_id).await?;
            let now = payrail::domain::time::Clock::now(&SystemClock);
            let Some(received) =
                payrail::bank::inbound::poll(store, secrets, data_dir, &registered, now, std::time::Duration::from_secs(wait_secs)).await?
            else {
                anyhow::bail!(
                    "connection {connection_id}'s inbound folder is still being read by another process (waited {wait_secs} s); nothing was done"
                )
            };
            if received.is_empty() {
                println!("connection {connection_id}'s inbound folder is empty");
            }
            for r in &received {
                print_received(r);
            }
        }
        BankCommand::Files(BankFilesArgs { command: Some(BankFilesCommand::Show { file_id }), .. }) => {
            let mut out = std::io::stdout().lock();
            if !payrail::bank::inbound::show_file(store.as_ref(), &file_id, &mut out).await? {
                cutoff::show_file(store.as_ref(), data_dir, &file_id, &mut out).await?;
            }
        }
        BankCommand::Files(BankFilesArgs { command: None, connection, json }) => {
            let files = cutoff::list_files(store.as_ref(), connection.as_deref()).await?;
            let received = payrail::bank::inbound::list_files(store.as_ref(), connection.as_deref()).await?;
            if json {
                let mut listed = Vec::with_capacity(files.len() + received.len());
                for stored in &files {
                    listed.push(cutoff::listed_json(store.as_ref(), stored).await?);
                }
                listed.extend(received.iter().map(|f| payrail::bank::inbound::file_json(&f.scope, &f.file)));
                println!("{}", serde_json::Value::Array(listed));
            } else {
                print_files(&files, &received);
            }
        }
    }
    Ok(())
}

/// The table of `payrail bank files`: sent files, then received ones.
fn print_files(files: &[payrail::bank::cutoff::files::Stored], received: &[payrail::bank::inbound::record::Stored]) {
    println!(
        "{:<36}  {:<40}  {:<13}  {:<9}  {:<8}  {:>7}  {:>14}  {:>14}  {:<27}  SHA256",
        "ID", "NAME", "RAIL", "DIRECTION", "STATUS", "ORDERS", "CREDIT_TOTAL", "DEBIT_TOTAL", "UPLOADED_AT"
    );
    for stored in files {
        let f = &stored.file;
        let uploaded = f.uploaded_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{:<36}  {:<40}  {:<13}  {:<9}  {:<8}  {:>7}  {:>14}  {:>14}  {uploaded:<27}  {}",
            f.id,
            f.name,
            f.rail,
            f.direction,
            f.status.as_str(),
            f.order_count,
            f.credit_total,
            f.debit_total,
            f.sha256.as_deref().unwrap_or("-")
        );
    }
    for stored in received {
        let f = &stored.file;
        println!(
            "{:<36}  {:<40}  {:<13}  {:<9}  {:<8}  {:>7}  {:>14}  {:>14}  {:<27}  {}",
            f.id,
            f.name,
            f.format.as_deref().unwrap_or("-"),
            f.direction,
            f.status.as_str(),
            f.effects.orders,
            "-",
            "-",
            f.created_at.to_string(),
            f.sha256
        );
    }
}

/// One line of `payrail bank inbound`.
fn print_received(r: &payrail::bank::inbound::Received) {
    let e = &r.effects;
    let id = r.file_id.as_deref().unwrap_or("-");
    match &r.error {
        Some(err) => println!("{id}  {}  {}  {err}", r.name, r.status.as_str()),
        None if r.already_applied => println!("{id}  {}  {}  (applied before; removed from the folder)", r.name, r.status.as_str()),
        None => println!(
            "{id}  {}  {}  answers={}  orders={}  transactions={}  returns={}  balance_reports={}  reconciled={}  unmatched={}",
            r.name,
            r.status.as_str(),
            e.answers,
            e.orders,
            e.transactions,
            e.returns,
            e.balance_reports,
            e.reconciled,
            e.notes_total
        ),
    }
}

async fn run_keys(store: &dyn payrail::store::Store, command: KeysCommand) -> anyhow::Result<()> {
    let clock = SystemClock;
    match command {
        KeysCommand::Create { name, mode, org, json } => {
            let mode = Mode::parse(&mode).map_err(|_| anyhow::anyhow!("--mode must be sandbox or live"))?;
            let issued = keys::create(store, &clock, &name, mode, &org).await?;
            print_issued(&issued, json);
        }
        KeysCommand::List { json } => {
            let all = keys::list(store).await?;
            if json {
                let now = payrail::domain::time::Clock::now(&clock);
                let mut listed = Vec::with_capacity(all.len());
                for key in &all {
                    let mut value = serde_json::to_value(key)?;
                    value["state"] = key.state(now).as_str().into();
                    listed.push(value);
                }
                println!("{}", serde_json::to_string_pretty(&listed)?);
            } else {
                print_key_table(&all, &clock);
            }
        }
        KeysCommand::Roll { id, grace, json } => {
            let grace_secs = keys::parse_duration_secs(&grace)?;
            let (issued, old) = keys::roll(store, &clock, &id, grace_secs).await?;
            if !json {
                let until = old.expires_at.map(|t| t.to_string()).unwrap_or_default();
                println!("rolled {}: it keeps working until {until}", old.id);
            }
            print_issued(&issued, json);
        }
        KeysCommand::Revoke { id } => {
            let revoked = keys::revoke(store, &clock, &id).await?;
            println!("revoked {} ({})", revoked.id, revoked.name);
        }
    }
    Ok(())
}

fn print_issued(issued: &keys::IssuedKey, json: bool) {
    let key = &issued.key;
    if json {
        let object = json!({
            "id": key.id,
            "key": issued.secret.expose(),
            "name": key.name,
            "live_mode": key.live_mode,
            "organization_id": key.organization_id,
            "created_at": key.created_at,
        });
        println!("{object}");
    } else {
        let mode = if key.live_mode { "live" } else { "sandbox" };
        println!("created API key {} (name {:?}, {mode}, organization {})", key.id, key.name, key.organization_id);
        println!("the secret is shown once, now; store it safely:");
        println!("{}", issued.secret.expose());
    }
}

fn print_key_table(all: &[ApiKey], clock: &SystemClock) {
    use payrail::domain::time::Clock;
    let now = clock.now();
    println!("{:<36}  {:<8}  {:<8}  {:<16}  {:<27}  NAME", "ID", "MODE", "STATE", "ORGANIZATION", "EXPIRES");
    for key in all {
        let state = key.state(now).as_str();
        let mode = if key.live_mode { "live" } else { "sandbox" };
        let expires = key.expires_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
        let name = on_one_line(&key.name);
        println!("{:<36}  {mode:<8}  {state:<8}  {:<16}  {expires:<27}  {name}", key.id, key.organization_id);
    }
}

/// `text` with its control characters escaped: a name an older release stored with a newline
/// stays on its row.
fn on_one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}
