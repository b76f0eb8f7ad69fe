//! The HTTP sender of webhooks, with its request forgery guard.
//!
//! Every attempt re-checks the URL against the rules in force (`domain::webhook`), and host
//! names go through [`GuardedResolver`]: only the addresses the policy allows are connected to,
//! so a name that starts resolving to a private address (DNS rebinding) is refused at that
//! attempt, which is recorded as a failed attempt. IP literals never reach a resolver, so the
//! URL check covers them. No redirects are followed (a 3xx is a failure), no proxy is used, and
//! nothing of the receiver's answer but its status code is kept.

use std::error::Error as StdError;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};

use super::signer;
use crate::domain::webhook::{self, UrlPolicy};
use crate::domain::webhook_delivery::{ClaimedDelivery, Outcome};

/// Sends deliveries.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    policy: UrlPolicy,
    timeout: Duration,
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

/// Resolves names with the system resolver, keeping only the addresses the policy allows.
#[derive(Debug, Clone, Copy)]
struct GuardedResolver {
    policy: UrlPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let mut allowed: Vec<SocketAddr> = Vec::new();
            let mut refusal = None;
            for addr in found {
                match webhook::address_refusal(&policy, &host, addr.ip()) {
                    None => allowed.push(addr),
                    Some(why) => refusal = Some(why),
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

impl Sender {
    pub fn new(policy: UrlPolicy, timeout: Duration) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .dns_resolver(Arc::new(GuardedResolver { policy }))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(timeout)
            .connect_timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(30))
            .user_agent(concat!("Payrail-Webhooks/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Sender { client, policy, timeout })
    }

    /// Sends one attempt, signed at `unix_secs`, and says how it ended.
    pub async fn send(&self, url: &str, secret: &str, claimed: &ClaimedDelivery, unix_secs: i64) -> Outcome {
        let live_mode = claimed.scope.live_mode;
        let checked = match webhook::check_url("url", url, live_mode, &self.policy) {
            Ok(checked) => checked,
            Err(err) => return Outcome::Failed { status_code: None, error: format!("refused: {err}") },
        };
        let body = claimed.stored.body.as_bytes();
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
        let request = self.client.post(checked.url).headers(headers).body(claimed.stored.body.clone());
        match request.send().await {
            Ok(response) => {
                let status = response.status().as_u16();
                if response.status().is_success() {
                    Outcome::Delivered { status_code: status }
                } else {
                    Outcome::Failed { status_code: Some(status), error: format!("the receiver answered HTTP {status}") }
                }
            }
            Err(err) => Outcome::Failed { status_code: None, error: self.describe(&err) },
        }
    }

    /// A short reason for a failed send, without anything from the receiver's answer.
    fn describe(&self, err: &reqwest::Error) -> String {
        let mut source: Option<&(dyn StdError + 'static)> = err.source();
        while let Some(cause) = source {
            if let Some(refused) = cause.downcast_ref::<Refused>() {
                return refused.0.clone();
            }
            source = cause.source();
        }
        if err.is_timeout() {
            return format!("no answer within {} ms", self.timeout.as_millis());
        }
        let mut text = if err.is_connect() { "could not connect".to_owned() } else { "the request failed".to_owned() };
        let mut source: Option<&(dyn StdError + 'static)> = err.source();
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        text
    }
}
