//! Request metrics in Prometheus text format (SPEC K3): counts and latency histograms by route,
//! method and status. Routes are the matched patterns (`/api/counterparties/{id}`), never raw
//! paths, so ids do not explode the series count.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;

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
