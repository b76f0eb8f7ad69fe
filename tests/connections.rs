//! Bank connections (SPEC B1, K): registered from the command line beside a running server,
//! listed there and by `GET /api/connections` in Modern Treasury's shape with no secret, named by
//! live internal accounts (required there), scoped to their organization and mode.

#[macro_use]
mod common;

use std::collections::BTreeSet;

use common::{TestServer, cli, json, live_connection};
use payrail::domain::api_key::Mode;
use serde_json::{Value, json};

const CONNECTION_KEYS: &[&str] =
    &["id", "object", "live_mode", "vendor_id", "vendor_name", "vendor_customer_id", "created_at", "updated_at", "discarded_at"];
/// The private key bytes the SFTP config names: they must never show anywhere.
const IDENTITY: &str =
    "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LWJhbmsta2V5LW1hdGVyaWFsLWZvci1wYXlyYWls\n-----END OPENSSH PRIVATE KEY-----\n";

fn sftp_config(dir: &std::path::Path, org: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("bank_ed25519"), IDENTITY).unwrap();
    let config = dir.join("sftp.toml");
    std::fs::write(
        &config,
        format!(
            r#"name = "Acme Bank"
organization = "{org}"
mode = "live"
timezone = "America/New_York"
cutoffs = ["10:30", "14:30", "16:45"]
[transport]
kind = "sftp"
host = "127.0.0.1"
port = 2222
user = "payrail"
identity_file = "bank_ed25519"
host_key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
outbound_dir = "outbound"
inbound_dir = "inbound"
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
        ),
    )
    .unwrap();
    config
}

fn keys_of(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

on_both_stores! {
    #[tokio::test]
    async fn b1_connections_add_and_list_beside_a_running_server() {
        let server = TestServer::start().await;
        let config = sftp_config(server.dir.path(), "acme");
        let added = cli(&server, &["connections", "add", "--config", config.to_str().unwrap(), "--json"]).await;
        assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
        let printed = String::from_utf8_lossy(&added.stdout).into_owned();
        let added: Value = serde_json::from_str(&printed).unwrap();
        let id = added["id"].as_str().unwrap().to_owned();
        assert_eq!((added["organization_id"].as_str(), added["live_mode"].as_bool()), (Some("acme"), Some(true)));
        let plain = cli(&server, &["connections", "add", "--config", config.to_str().unwrap()]).await;
        assert!(plain.status.success());
        let second = String::from_utf8_lossy(&plain.stdout).lines().last().unwrap().to_owned();
        assert_ne!(second, id, "the id alone on the last line, a new connection each time");
        let listed = cli(&server, &["connections", "list", "--json"]).await;
        let listed_text = String::from_utf8_lossy(&listed.stdout).into_owned();
        let listed: Value = serde_json::from_str(&listed_text).unwrap();
        assert!(listed.as_array().unwrap().iter().any(|c| c["id"] == id.as_str()));
        // The API: the tenant's own connections only, in MT's shape.
        let live = server.key_for("acme", Mode::Live).await;
        let (status, body) = json(server.get("/api/connections", &live).send().await.unwrap()).await;
        assert_eq!(status, 200);
        let served = body.as_array().unwrap();
        assert_eq!(served.len(), 2, "{body}");
        assert_eq!(keys_of(&served[1]), CONNECTION_KEYS.iter().map(|k| k.to_string()).collect());
        assert_eq!(served[1]["id"], id.as_str());
        assert_eq!((served[1]["vendor_name"].as_str(), served[1]["vendor_id"].as_str()), (Some("Acme Bank"), Some("sftp")));
        let sandbox = server.key_for("acme", Mode::Sandbox).await;
        let (_, body) = json(server.get("/api/connections", &sandbox).send().await.unwrap()).await;
        assert_eq!(body.as_array().unwrap().len(), 1, "sandbox: only the built-in sandbox connection: {body}");
        let builtin = body[0].clone();
        // SPEC L1: a page never holds more than per_page, the built-in connection included; it
        // comes last, on a page of its own when the last page is full, the same every time.
        let sandbox_config = server.dir.path().join("sandbox.toml");
        std::fs::write(&sandbox_config, std::fs::read_to_string(&config).unwrap().replace("mode = \"live\"", "mode = \"sandbox\"")).unwrap();
        let added = cli(&server, &["connections", "add", "--config", sandbox_config.to_str().unwrap()]).await;
        assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
        let mut pages = Vec::new();
        let mut cursor = String::new();
        loop {
            let response = server.get(&format!("/api/connections?per_page=1&after_cursor={cursor}"), &sandbox).send().await.unwrap();
            let next = response.headers().get("x-after-cursor").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default();
            let (status, page) = json(response).await;
            assert_eq!(status, 200, "{page}");
            assert!(page.as_array().unwrap().len() <= 1, "more than per_page: {page}");
            pages.extend(page.as_array().unwrap().iter().cloned());
            if next.is_empty() {
                break;
            }
            cursor = next;
        }
        assert_eq!(pages.len(), 2, "{pages:?}");
        assert_eq!(pages[0]["vendor_name"], "Acme Bank");
        assert_eq!(pages[1], builtin, "the built-in connection, last and unchanged");
        // The command line lists the built-in sandbox connection too, as the API does, and
        // takes its id where it takes a connection's.
        let listed_now = cli(&server, &["connections", "list", "--json"]).await;
        let listed_now: Value = serde_json::from_slice(&listed_now.stdout).unwrap();
        let builtin_listed = listed_now.as_array().unwrap().iter().find(|c| c["id"] == builtin["id"]).expect("the built-in connection");
        assert_eq!((builtin_listed["organization_id"].as_str(), builtin_listed["live_mode"].as_bool()), (Some("acme"), Some(false)));
        let files = cli(&server, &["bank", "files", "--connection", builtin["id"].as_str().unwrap(), "--json"]).await;
        assert!(files.status.success(), "{}", String::from_utf8_lossy(&files.stderr));
        // Its cut-offs are the sandbox bank's own: asking for one says so, not "no connection".
        let cutoff = cli(&server, &["bank", "cutoff", builtin["id"].as_str().unwrap()]).await;
        let said = String::from_utf8_lossy(&cutoff.stderr);
        assert!(!cutoff.status.success() && said.contains("built-in sandbox connection") && !said.contains("no connection"), "{said}");
        let stranger = server.key_for("other-org", Mode::Live).await;
        let (_, body) = json(server.get("/api/connections", &stranger).send().await.unwrap()).await;
        assert_eq!(body, json!([]));
        // No secret anywhere it could leak: command output, API, the database file (SQLite).
        for text in [&printed, &listed_text, &body.to_string()] {
            assert!(!text.contains("c2VjcmV0LWJhbmsta2V5"), "the identity key leaked: {text}");
        }
        if !common::on_postgres() {
            for entry in std::fs::read_dir(server.dir.path()).unwrap() {
                let path = entry.unwrap().path();
                if path.file_name().unwrap().to_string_lossy().starts_with("payrail.db") {
                    let bytes = std::fs::read(&path).unwrap();
                    assert!(!bytes.windows(20).any(|w| w == b"c2VjcmV0LWJhbmsta2V5"), "identity stored in the clear in {}", path.display());
                }
            }
        }
    }

    #[tokio::test]
    async fn b1_live_internal_accounts_name_their_connection() {
        let server = TestServer::start().await;
        let live = server.key_for("default", Mode::Live).await;
        let (status, body) = json(server.post("/api/internal_accounts", &live, &json!({"name": "Ops", "currency": "USD"})).send().await.unwrap()).await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["errors"]["parameter"], "connection_id");
        let id = live_connection(&server, "default").await;
        let theirs = live_connection(&server, "someone-else").await;
        let (status, body) = json(server.post("/api/internal_accounts", &live, &json!({"name": "Ops", "currency": "USD", "connection_id": theirs})).send().await.unwrap()).await;
        assert_eq!(status, 422, "another organization's connection: {body}");
        assert_eq!(body["errors"]["parameter"], "connection_id");
        let (status, body) = json(server.post("/api/internal_accounts", &live, &json!({"name": "Ops", "currency": "USD", "connection_id": id})).send().await.unwrap()).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["connection"]["id"], id.as_str());
        assert_eq!(body["connection"]["vendor_name"], "Test Bank");
        // A live account may carry its bank's own numbers (what its files name); a sandbox one
        // gets the sandbox bank's.
        let numbered = json!({"name": "Ops", "currency": "USD", "connection_id": id,
            "account_details": [{"account_number": "987654321"}],
            "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}]});
        let (status, body) = json(server.post("/api/internal_accounts", &live, &numbered).send().await.unwrap()).await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["account_details"][0]["account_number"], "987654321");
        assert_eq!((body["routing_details"].as_array().unwrap().len(), body["routing_details"][0]["routing_number"].as_str()), (1, Some("021000021")));
        let mut bad = numbered.clone();
        bad["routing_details"][0]["routing_number"] = json!("021000022");
        let (status, body) = json(server.post("/api/internal_accounts", &live, &bad).send().await.unwrap()).await;
        assert_eq!((status, body["errors"]["parameter"].as_str()), (422, Some("routing_details[0].routing_number")), "{body}");
        // Sandbox: the built-in connection when none is named.
        let sandbox = server.key().await;
        let (status, body) = json(server.post("/api/internal_accounts", &sandbox, &json!({"name": "Ops", "currency": "USD"})).send().await.unwrap()).await;
        assert_eq!(status, 201, "{body}");
        let (_, listed) = json(server.get("/api/connections", &sandbox).send().await.unwrap()).await;
        assert_eq!(body["connection"]["id"], listed[0]["id"]);
        let sandbox_numbered = json!({"name": "Ops", "currency": "USD", "account_details": [{"account_number": "987654321"}]});
        let (status, body) = json(server.post("/api/internal_accounts", &sandbox, &sandbox_numbered).send().await.unwrap()).await;
        assert_eq!((status, body["errors"]["parameter"].as_str()), (422, Some("account_details")), "{body}");
    }
}

#[tokio::test]
async fn b1_a_bad_config_is_refused_naming_the_key() {
    let server = TestServer::start().await;
    let config = sftp_config(server.dir.path(), "acme");
    let text = std::fs::read_to_string(&config).unwrap();
    for (from, to, key) in [
        ("America/New_York", "Mars/Olympus", "timezone"),
        ("021000021", "021000022", "immediate_destination"),
        ("identity_file = \"bank_ed25519\"", "identity_file = \"missing_key\"", "identity_file"),
        ("host_key = \"ssh-ed25519", "host_key = \"ssh-bogus", "host_key"),
        ("port = 2222", "port = 0", "port"),
        // An organization no API key can have.
        ("organization = \"acme\"", "organization = \"no such org!\"", "organization"),
        ("organization = \"acme\"", "organization = \"\"", "organization"),
    ] {
        std::fs::write(&config, text.replace(from, to)).unwrap();
        let run = cli(&server, &["connections", "add", "--config", config.to_str().unwrap()]).await;
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(!run.status.success() && stderr.contains(key), "{key}: {stderr}");
    }
    let listed = cli(&server, &["connections", "list", "--json"]).await;
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]", "nothing was registered");
}
