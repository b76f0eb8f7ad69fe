//! Request metrics in Prometheus text format (SPEC K3): counts and latency histograms by route,
//! method and status. Routes are the matched patterns (`/api/counterparties/{id}`), never raw
//! paths, so ids do not explode the series count. Beside them, the listener's connection
//! counters (SPEC T4): connections open, refused at accept by the cap they hit, and TLS
//! handshakes that timed out.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS_S: [f64; 12] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0];

/// The method a series is labelled with: the standard ones as they are, any other (clients may
/// send any token, before authentication too) as one `OTHER`, so that no client can grow the
/// series without bound.
fn series_method(method: &axum::http::Method) -> axum::http::Method {
    use axum::http::Method;
    const STANDARD: [Method; 9] = [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
        Method::HEAD,
        Method::OPTIONS,
        Method::CONNECT,
        Method::TRACE,
    ];
    if STANDARD.contains(method) {
        return method.clone();
    }
    Method::from_bytes(b"OTHER").expect("a valid method token")
}

/// One route's series, by method and status.
type RouteSeries = HashMap<(axum::http::Method, u16), Series>;

/// Series by route, then by (method, status): a request finds its series without allocating.
#[derive(Debug, Default)]
pub struct Metrics {
    series: Mutex<HashMap<String, RouteSeries>>,
    connections: ConnectionCounters,
}

/// Why the listener closed a connection as soon as it was accepted (SPEC T4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The server holds `--connections-max` connections.
    GlobalCap,
    /// The client's address holds `--connections-per-address-max` connections.
    PerAddressCap,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::GlobalCap => "global_cap",
            Refusal::PerAddressCap => "per_address_cap",
        }
    }
}

/// The listener's counters: one atomic each, touched once per connection, never per request.
#[derive(Debug, Default)]
struct ConnectionCounters {
    open: AtomicU64,
    refused_global: AtomicU64,
    refused_per_address: AtomicU64,
    handshake_timeouts: AtomicU64,
}

#[derive(Debug, Default, Clone)]
struct Series {
    count: u64,
    sum_s: f64,
    buckets: [u64; BUCKETS_S.len()],
}

impl Metrics {
    pub fn observe(&self, route: &str, method: &axum::http::Method, status: u16, elapsed_s: f64) {
        let method = series_method(method);
        let mut series = self.series.lock().unwrap_or_else(|p| p.into_inner());
        if !series.contains_key(route) {
            series.insert(route.to_owned(), HashMap::new());
        }
        let by_route = series.get_mut(route).expect("inserted above");
        let entry = by_route.entry((method, status)).or_default();
        entry.count += 1;
        entry.sum_s += elapsed_s;
        for (bucket, bound) in entry.buckets.iter_mut().zip(BUCKETS_S) {
            if elapsed_s <= bound {
                *bucket += 1;
            }
        }
    }

    pub fn connection_opened(&self) {
        self.connections.open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections.open.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn connection_refused(&self, why: Refusal) {
        let counter = match why {
            Refusal::GlobalCap => &self.connections.refused_global,
            Refusal::PerAddressCap => &self.connections.refused_per_address,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn handshake_timed_out(&self) {
        self.connections.handshake_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    /// The connection counters in Prometheus text.
    fn render_connections(&self, out: &mut String) {
        let c = &self.connections;
        out.push_str("# HELP payrail_connections_open API connections open now.\n# TYPE payrail_connections_open gauge\n");
        let _ = writeln!(out, "payrail_connections_open {}", c.open.load(Ordering::Relaxed));
        out.push_str(
            "# HELP payrail_connections_refused_total API connections closed at accept, by the cap they hit.\n\
             # TYPE payrail_connections_refused_total counter\n",
        );
        for (why, counter) in [(Refusal::GlobalCap, &c.refused_global), (Refusal::PerAddressCap, &c.refused_per_address)] {
            let _ = writeln!(out, "payrail_connections_refused_total{{reason=\"{}\"}} {}", why.label(), counter.load(Ordering::Relaxed));
        }
        out.push_str(
            "# HELP payrail_tls_handshake_timeouts_total API connections closed for not completing TLS in time.\n\
             # TYPE payrail_tls_handshake_timeouts_total counter\n",
        );
        let _ = writeln!(out, "payrail_tls_handshake_timeouts_total {}", c.handshake_timeouts.load(Ordering::Relaxed));
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let series: BTreeMap<(String, String, u16), Series> = {
            let series = self.series.lock().unwrap_or_else(|p| p.into_inner());
            series
                .iter()
                .flat_map(|(route, by)| {
                    by.iter().map(move |((method, status), s)| ((route.clone(), method.to_string(), *status), s.clone()))
                })
                .collect()
        };
        let mut out = String::new();
        out.push_str("# HELP payrail_http_requests_total API requests answered.\n# TYPE payrail_http_requests_total counter\n");
        for ((route, method, status), s) in &series {
            let _ = writeln!(out, "payrail_http_requests_total{{route=\"{route}\",method=\"{method}\",status=\"{status}\"}} {}", s.count);
        }
        out.push_str("# HELP payrail_http_request_duration_seconds Time to answer API requests.\n# TYPE payrail_http_request_duration_seconds histogram\n");
        for ((route, method, status), s) in &series {
            let labels = format!("route=\"{route}\",method=\"{method}\",status=\"{status}\"");
            for (bucket, bound) in s.buckets.iter().zip(BUCKETS_S) {
                let _ = writeln!(out, "payrail_http_request_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {bucket}");
            }
            let _ = writeln!(out, "payrail_http_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}", s.count);
            let _ = writeln!(out, "payrail_http_request_duration_seconds_sum{{{labels}}} {}", s.sum_s);
            let _ = writeln!(out, "payrail_http_request_duration_seconds_count{{{labels}}} {}", s.count);
        }
        self.render_connections(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k3_renders_counts_and_cumulative_buckets() {
        let metrics = Metrics::default();
        metrics.observe("/api/ping", &axum::http::Method::GET, 200, 0.002);
        metrics.observe("/api/ping", &axum::http::Method::GET, 200, 2.0);
        let text = metrics.render();
        assert!(text.contains("payrail_http_requests_total{route=\"/api/ping\",method=\"GET\",status=\"200\"} 2"));
        assert!(text.contains("le=\"0.0025\"} 1"));
        assert!(text.contains("le=\"+Inf\"} 2"));
    }

    #[test]
    fn t4_renders_connection_counters_by_reason() {
        let metrics = Metrics::default();
        metrics.connection_opened();
        metrics.connection_opened();
        metrics.connection_closed();
        metrics.connection_refused(Refusal::PerAddressCap);
        metrics.connection_refused(Refusal::PerAddressCap);
        metrics.connection_refused(Refusal::GlobalCap);
        metrics.handshake_timed_out();
        let text = metrics.render();
        assert!(text.contains("payrail_connections_open 1\n"), "{text}");
        assert!(text.contains("payrail_connections_refused_total{reason=\"per_address_cap\"} 2\n"), "{text}");
        assert!(text.contains("payrail_connections_refused_total{reason=\"global_cap\"} 1\n"), "{text}");
        assert!(text.contains("payrail_tls_handshake_timeouts_total 1\n"), "{text}");
    }

    #[test]
    fn k3_unknown_methods_share_one_series() {
        let metrics = Metrics::default();
        for i in 0..100 {
            let method = axum::http::Method::from_bytes(format!("M{i}").as_bytes()).unwrap();
            metrics.observe("unmatched", &method, 401, 0.001);
        }
        let text = metrics.render();
        assert!(text.contains("payrail_http_requests_total{route=\"unmatched\",method=\"OTHER\",status=\"401\"} 100"), "{text}");
        assert_eq!(text.matches("payrail_http_requests_total{").count(), 1);
    }
}
