//! The HTTP sender of webhooks, with its request forgery guard (SPEC W5).
//!
//! Every attempt re-checks the URL against the rules in force (`domain::webhook_url`) for the
//! endpoint's mode, and host names go through [`GuardedResolver`]: the connector is handed only
//! the addresses the policy allows for that mode (one client per mode), so a name that starts
//! resolving to a private or loopback address (DNS rebinding) is refused at that attempt, which
//! is recorded as a failed attempt. IP literals never reach a resolver, so the URL check covers
//! them. No redirects are followed (a 3xx is a failure), no proxy is used, and nothing of the
//! receiver's answer but its status code is kept.
//!
//! A failure is reduced to one of four words ([`Failure`]): the client's own error text (with
//! operating-system errors such as `Connection refused`) is logged at debug level only.

use std::error::Error as StdError;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

use super::signer;
use crate::domain::webhook::{self, UrlPolicy};
use crate::domain::webhook_delivery::{ClaimedDelivery, Failure, Outcome};

/// Sends deliveries.
#[derive(Debug, Clone)]
pub struct Sender {
    sandbox: reqwest::Client,
    live: reqwest::Client,
    policy: UrlPolicy,
}

/// The resolver's refusal, found again in the error chain to say why an attempt failed.
#[derive(Debug)]
struct Refused(String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for Refused {}

/// Resolves names with the system resolver, keeping only the addresses the policy allows for
/// one mode: the connector connects to nothing else.
#[derive(Debug, Clone, Copy)]
struct GuardedResolver {
    policy: UrlPolicy,
    live_mode: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let GuardedResolver { policy, live_mode } = *self;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let mut allowed: Vec<SocketAddr> = Vec::new();
            let mut refusal = None;
            for addr in found {
                match webhook::address_refusal(&policy, &host, addr.ip(), live_mode) {
                    None => allowed.push(addr),
                    Some(why) => refusal = Some(format!("{} is {why}", addr.ip())),
                }
            }
            if allowed.is_empty() {
                let why = refusal.unwrap_or_else(|| "no address".into());
                return Err(Box::new(Refused(format!("refused: {host} resolves to {why}"))) as Box<dyn StdError + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

fn client(policy: UrlPolicy, live_mode: bool, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(GuardedResolver { policy, live_mode }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_idle_timeout(Duration::from_secs(30))
        .user_agent(concat!("Payrail-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
}

impl Sender {
    pub fn new(policy: UrlPolicy, timeout: Duration) -> anyhow::Result<Self> {
        Ok(Sender { sandbox: client(policy, false, timeout)?, live: client(policy, true, timeout)?, policy })
    }

    /// Sends one attempt, signed at `unix_secs`, and says how it ended.
    pub async fn send(&self, url: &str, secret: &str, claimed: &ClaimedDelivery, unix_secs: i64) -> Outcome {
        let live_mode = claimed.scope.live_mode;
        let delivery_id = &claimed.stored.delivery.id;
        let checked = match webhook::check_url("url", url, live_mode, &self.policy) {
            Ok(checked) => checked,
            Err(err) => {
                tracing::debug!(delivery = %delivery_id, %err, "webhook attempt refused before connecting");
                return Outcome::Failed(Failure::ConnectionFailed);
            }
        };
        let body = claimed.body.as_bytes();
        let delivery = &claimed.stored.delivery;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let mut put = |name: &'static str, value: &str| {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(name, value);
            }
        };
        put("x-signature", &signer::signature_hex(secret.as_bytes(), body));
        put(signer::TIMESTAMPED_HEADER, &signer::timestamped(secret.as_bytes(), unix_secs, body));
        put("x-webhook-id", &delivery.id);
        put("x-topic", &delivery.resource);
        put("x-event-name", &delivery.event_name);
        put("x-live-mode", if live_mode { "true" } else { "false" });
        let client = if live_mode { &self.live } else { &self.sandbox };
        let request = client.post(checked.url).headers(headers).body(claimed.body.clone());
        match request.send().await {
            Ok(response) if response.status().is_success() => Outcome::Delivered { status_code: response.status().as_u16() },
            Ok(response) => Outcome::Failed(Failure::Status(response.status().as_u16())),
            Err(err) => {
                tracing::debug!(delivery = %delivery_id, detail = %chain(&err), "webhook attempt failed");
                Outcome::Failed(failure_of(&err))
            }
        }
    }
}

/// The error and its causes, for debug logs only.
fn chain(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Which of the four failures a client error is. Connecting is two steps: the TCP connector's
/// errors are hyper-util's `ConnectError` (not exported: found by its `Debug` name); any other
/// connect error happened after TCP, in the TLS handshake (refused, closed, or not TLS).
fn failure_of(err: &reqwest::Error) -> Failure {
    if err.is_timeout() {
        return Failure::Timeout;
    }
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(cause) = source {
        if cause.is::<Refused>() || format!("{cause:?}").starts_with("ConnectError(") {
            return Failure::ConnectionFailed;
        }
        if cause.is::<rustls::Error>() {
            return Failure::TlsFailed;
        }
        source = cause.source();
    }
    if err.is_connect() { Failure::TlsFailed } else { Failure::ConnectionFailed }
}
