//! Bank connection set-up the bank suites share (SPEC B1): a live tenant on a directory
//! connection, payment orders on it, and reading its folders and files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{Key, TestServer, json};
use payrail::domain::api_key::Mode;

/// The time zone of the suites' connections.
pub const NEW_YORK: &str = "America/New_York";

/// A local time 12 hours from now in New York: the scheduled worker never reaches it during a test.
pub fn far_cutoff() -> String {
    far_cutoff_in(NEW_YORK)
}

/// A local time 12 hours from now in `timezone`.
pub fn far_cutoff_in(timezone: &str) -> String {
    let later = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_hours(12)).unwrap();
    later.to_zoned(jiff::tz::TimeZone::get(timezone).unwrap()).strftime("%H:%M").to_string()
}

/// A live connection's config for `org` with ACH and ISO 20022 identities, the cut-off time
/// `cutoff` and the `[transport]` section's keys `transport`.
pub fn config_toml(org: &str, cutoff: &str, transport: &str) -> String {
    format!(
        r#"name = "Acme Bank"
organization = "{org}"
mode = "live"
timezone = "America/New_York"
cutoffs = ["{cutoff}"]
[transport]
{transport}
[ach]
immediate_destination = "021000021"
immediate_destination_name = "ACME BANK"
immediate_origin = "1234567890"
immediate_origin_name = "ACME CORP"
company_id = "1234567890"
company_name = "ACME CORP"
[iso20022]
initiating_party_name = "ACME CORP"
debtor_agent_bic = "ACMEUS33XXX"
"#
    )
}

/// Registers the connection `config` describes (`payrail connections add`, the file in `dir`);
/// returns its id.
pub async fn add_connection(server: &TestServer, dir: &Path, config: &str) -> String {
    let path = dir.join("connection.toml");
    std::fs::write(&path, config).unwrap();
    let output = super::cli(server, &["connections", "add", "--config", path.to_str().unwrap(), "--json"]).await;
    assert!(output.status.success(), "connections add: {}", String::from_utf8_lossy(&output.stderr));
    let added: Value = serde_json::from_slice(&output.stdout).unwrap();
    added["id"].as_str().unwrap().to_owned()
}

/// Registers a live directory connection for `org` with ACH and ISO 20022 identities and the
/// given cut-off time; returns its id and its outbound folder.
pub async fn bank(server: &TestServer, org: &str, cutoff: &str) -> (String, PathBuf) {
    bank_in(server, org, cutoff, NEW_YORK).await
}

/// [`bank`], for a connection in `timezone`.
pub async fn bank_in(server: &TestServer, org: &str, cutoff: &str, timezone: &str) -> (String, PathBuf) {
    let dir = server.dir.path().join(format!("bank-{org}"));
    std::fs::create_dir_all(&dir).unwrap();
    let transport = "kind = \"directory\"\noutbound_dir = \"outbound\"\ninbound_dir = \"inbound\"";
    let config = config_toml(org, cutoff, transport).replace(NEW_YORK, timezone);
    let id = add_connection(server, &dir, &config).await;
    (id, dir.join("outbound").canonicalize().unwrap())
}

/// A live tenant with a connection and an internal account on it.
pub struct Live {
    pub key: Key,
    pub connection: String,
    pub outbound: PathBuf,
    pub account: String,
}

pub async fn live(server: &TestServer, org: &str) -> Live {
    live_at(server, org, &far_cutoff()).await
}

pub async fn live_at(server: &TestServer, org: &str, cutoff: &str) -> Live {
    live_in(server, org, cutoff, NEW_YORK).await
}

/// [`live_at`], with the connection in `timezone`.
pub async fn live_in(server: &TestServer, org: &str, cutoff: &str, timezone: &str) -> Live {
    let key = server.key_for(org, Mode::Live).await;
    let (connection, outbound) = bank_in(server, org, cutoff, timezone).await;
    let body = json!({"name": "Operating", "currency": "USD", "party_name": "Acme Corp", "connection_id": connection});
    let (status, account) = json(server.post("/api/internal_accounts", &key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{account}");
    Live { key, connection, outbound, account: account["id"].as_str().unwrap().to_owned() }
}

pub fn ach_receiving(name: &str) -> Value {
    json!({
        "party_name": name,
        "account_type": "checking",
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}],
    })
}

pub fn wire_receiving(name: &str) -> Value {
    json!({
        "party_name": name,
        "party_address": {"line1": "1 Main St", "locality": "Springfield", "region": "IL", "postal_code": "62701", "country": "US"},
        "account_details": [{"account_number": "987654321"}],
        "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}],
    })
}

/// Creates a payment order (approved at creation); returns it.
pub async fn order(server: &TestServer, live: &Live, body: Value) -> Value {
    let mut body = body;
    body["originating_account_id"] = json!(live.account);
    let (status, created) = json(server.post("/api/payment_orders", &live.key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["status"], "approved");
    created
}

pub async fn get_order(server: &TestServer, live: &Live, id: &str) -> Value {
    let (status, body) = json(server.get(&format!("/api/payment_orders/{id}"), &live.key).send().await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    body
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The files in a folder, by name (no `.part` may be among them).
pub fn folder(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

pub async fn bank_files(server: &TestServer, connection: &str) -> Vec<Value> {
    let output = super::cli(server, &["bank", "files", "--connection", connection, "--json"]).await;
    assert!(output.status.success(), "bank files: {}", text(&output.stderr));
    serde_json::from_slice::<Value>(&output.stdout).unwrap().as_array().unwrap().clone()
}
