//! The command line ([`parse_args`]) and the plan it makes: which scenarios run, at which
//! concurrencies, for how long.

use std::time::Duration;

use crate::harness::BoxResult;
use crate::scenarios;

#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub database_url: Option<String>,
    pub duration: Duration,
    pub warmup: Duration,
    pub connections: Option<Vec<usize>>,
    pub scenarios: Option<Vec<String>>,
    /// Entries of the large account of `ledger_balance_reads` (else its default).
    pub ledger_entries: Option<u64>,
}

pub fn parse_args() -> BoxResult<Options> {
    let mut opts = Options {
        quick: false,
        database_url: None,
        duration: Duration::ZERO,
        warmup: Duration::ZERO,
        connections: None,
        scenarios: None,
        ledger_entries: None,
    };
    let mut duration_secs: Option<f64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--bench" => {} // passed by `cargo bench`
            "--quick" => opts.quick = true,
            "--database-url" => opts.database_url = Some(value("--database-url")?),
            "--duration-secs" => {
                let v = value("--duration-secs")?;
                duration_secs = Some(v.parse().map_err(|_| format!("--duration-secs: not a number: {v}"))?);
            }
            "--connections" => {
                let v = value("--connections")?;
                let list = v.split(',').map(|s| s.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>();
                match list {
                    Ok(list) if !list.is_empty() && list.iter().all(|&n| n > 0) => opts.connections = Some(list),
                    _ => return Err(format!("--connections: expected a list like 1,16,64, got {v}")),
                }
            }
            "--ledger-entries" => {
                let v = value("--ledger-entries")?;
                match v.parse::<u64>() {
                    Ok(n) if n > 0 => opts.ledger_entries = Some(n),
                    _ => return Err(format!("--ledger-entries: expected a positive whole number, got {v}")),
                }
            }
            "--scenarios" => opts.scenarios = Some(value("--scenarios")?.split(',').map(|s| s.trim().to_owned()).collect()),
            "-h" | "--help" => {
                eprintln!(
                    "usage: cargo bench --bench load -- [--quick] [--database-url URL] [--duration-secs N] \
                     [--connections 1,16,64] [--scenarios ping,create_counterparty,...] [--ledger-entries N]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other} (try --help)")),
        }
    }
    let secs = duration_secs.unwrap_or(if opts.quick { 2.0 } else { 10.0 });
    if secs.is_nan() || secs <= 0.0 {
        return Err("--duration-secs must be positive".into());
    }
    opts.duration = Duration::from_secs_f64(secs);
    opts.warmup = if opts.quick { Duration::from_millis(250) } else { Duration::from_secs(1) };
    if let Some(names) = &opts.scenarios {
        for name in names {
            if !scenarios::ALL.iter().any(|s| s.name() == name) {
                return Err(format!("unknown scenario {name}"));
            }
        }
    }
    Ok(opts)
}

#[derive(Clone)]
pub struct Plan {
    pub opts: Options,
    pub postgres: bool,
}

impl Plan {
    pub fn new(opts: Options) -> Self {
        Plan { postgres: opts.database_url.is_some(), opts }
    }

    /// Whether `--scenarios` (if given) names this scenario.
    pub fn selected(&self, name: &str) -> bool {
        self.opts.scenarios.as_ref().is_none_or(|names| names.iter().any(|n| n == name))
    }

    /// Connections per run of most scenarios: the flag's list, else 64 (quick) or 1, 16, 64.
    pub fn concurrencies(&self) -> Vec<usize> {
        match &self.opts.connections {
            Some(list) => list.clone(),
            None if self.opts.quick => vec![64],
            None => vec![1, 16, 64],
        }
    }

    /// Connections per create_counterparty run: the flag's list, else quick (64, plus 1, plus 32
    /// on PostgreSQL) or full (1, 16, 64; plus 32 on PostgreSQL).
    pub fn create_concurrencies(&self) -> Vec<usize> {
        if let Some(list) = &self.opts.connections {
            return list.clone();
        }
        match (self.opts.quick, self.postgres) {
            (true, false) => vec![1, 64],
            (true, true) => vec![1, 32, 64],
            (false, true) => vec![1, 16, 32, 64],
            (false, false) => vec![1, 16, 64],
        }
    }

    /// The concurrency of the headline figures: 64 when measured, else the largest.
    pub fn headline(&self) -> usize {
        let list = self.create_concurrencies();
        if list.contains(&64) { 64 } else { list.into_iter().max().unwrap_or(64) }
    }

    /// The same plan with each run a `1 / rounds` share of the duration (for runs measured in
    /// alternating rounds).
    pub fn rounds(&self, rounds: u32) -> Plan {
        Plan { opts: Options { duration: self.opts.duration / rounds, ..self.opts.clone() }, ..self.clone() }
    }
}
