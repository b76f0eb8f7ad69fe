//! SPEC E1, E4, A3, L1-L4 on counterparties, external accounts and internal accounts, over HTTPS
//! against the real server. Shapes are checked against the Modern Treasury SDK 1.80 / OpenAPI
//! field lists: every field present (null, [] or {} when empty), nothing else.

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Key, TestServer, assert_error, json};
use payrail::domain::api_key::Mode;
use reqwest::RequestBuilder;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Shapes (SDK `types/`, OpenAPI `components.schemas`)
// ---------------------------------------------------------------------------------------------

const COUNTERPARTY_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "name",
    "email",
    "accounts",
    "metadata",
    "external_id",
    "legal_entity_id",
    "send_remittance_advice",
    "verification_status",
    "created_at",
    "updated_at",
    "discarded_at",
];
/// `Counterparty.accounts[]`: an external account without `counterparty_id`.
const EMBEDDED_ACCOUNT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "account_details",
    "account_type",
    "card_id",
    "contact_details",
    "created_at",
    "discarded_at",
    "external_id",
    "ledger_account_id",
    "metadata",
    "name",
    "party_address",
    "party_name",
    "party_type",
    "routing_details",
    "updated_at",
    "verification_source",
    "verification_status",
];
const ACCOUNT_DETAIL_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "account_number",
    "account_number_safe",
    "account_number_type",
    "created_at",
    "updated_at",
    "discarded_at",
];
const ROUTING_DETAIL_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "bank_address",
    "bank_name",
    "payment_type",
    "routing_number",
    "routing_number_type",
    "created_at",
    "updated_at",
    "discarded_at",
];
const ADDRESS_KEYS: &[&str] =
    &["id", "object", "live_mode", "line1", "line2", "locality", "region", "postal_code", "country", "created_at", "updated_at"];
const CONTACT_DETAIL_KEYS: &[&str] =
    &["id", "object", "live_mode", "contact_identifier", "contact_identifier_type", "created_at", "updated_at", "discarded_at"];
const INTERNAL_ACCOUNT_KEYS: &[&str] = &[
    "id",
    "object",
    "live_mode",
    "account_capabilities",
    "account_details",
    "account_type",
    "connection",
    "contra_ledger_account_id",
    "counterparty_id",
    "created_at",
    "currency",
    "debitable",
    "external_id",
    "ledger_account_id",
    "legal_entity_id",
    "metadata",
    "name",
    "parent_account_id",
    "party_address",
    "party_name",
    "party_type",
    "routing_details",
    "status",
    "updated_at",
    "vendor_id",
];
const CONNECTION_KEYS: &[&str] =
    &["id", "object", "live_mode", "vendor_id", "vendor_name", "vendor_customer_id", "created_at", "updated_at", "discarded_at"];
const CAPABILITY_KEYS: &[&str] =
    &["id", "object", "live_mode", "direction", "payment_type", "identifier", "created_at", "updated_at", "discarded_at"];
const EVENT_KEYS: &[&str] =
    &["id", "object", "live_mode", "resource", "event_name", "event_time", "entity_id", "data", "created_at", "updated_at"];

fn external_account_keys() -> Vec<&'static str> {
    let mut keys = EMBEDDED_ACCOUNT_KEYS.to_vec();
    keys.push("counterparty_id");
    keys
}

fn assert_keys(value: &Value, expected: &[&str], what: &str) {
    let got: BTreeSet<&str> =
        value.as_object().unwrap_or_else(|| panic!("{what} is an object: {value}")).keys().map(String::as_str).collect();
    let want: BTreeSet<&str> = expected.iter().copied().collect();
    let missing: Vec<_> = want.difference(&got).collect();
    let extra: Vec<_> = got.difference(&want).collect();
    assert!(missing.is_empty() && extra.is_empty(), "{what}: missing {missing:?}, unexpected {extra:?} in {value}");
}

fn assert_timestamp(value: &Value, what: &str) {
    let text = value.as_str().unwrap_or_else(|| panic!("{what} is a string: {value}"));
    assert!(text.len() >= 20 && text.as_bytes()[4] == b'-' && text.as_bytes()[10] == b'T', "{what} is RFC 3339: {text}");
}

/// Checks an external account (embedded or not) and every object nested in it.
fn assert_account_shape(account: &Value, embedded: bool, what: &str) {
    if embedded {
        assert_keys(account, EMBEDDED_ACCOUNT_KEYS, what);
    } else {
        assert_keys(account, &external_account_keys(), what);
    }
    assert_eq!(account["object"], "external_account", "{what}");
    assert!(account["party_name"].is_string(), "{what}: party_name is a string");
    assert!(account["verification_status"].is_string(), "{what}: verification_status");
    assert!(account["metadata"].is_object(), "{what}: metadata is an object");
    for (field, keys) in
        [("account_details", ACCOUNT_DETAIL_KEYS), ("routing_details", ROUTING_DETAIL_KEYS), ("contact_details", CONTACT_DETAIL_KEYS)]
    {
        for (i, item) in account[field].as_array().unwrap_or_else(|| panic!("{what}.{field} is an array")).iter().enumerate() {
            assert_keys(item, keys, &format!("{what}.{field}[{i}]"));
        }
    }
    for item in account["routing_details"].as_array().unwrap() {
        assert!(item["bank_name"].is_string(), "{what}: routing_details[].bank_name is a string");
    }
    if !account["party_address"].is_null() {
        assert_keys(&account["party_address"], ADDRESS_KEYS, &format!("{what}.party_address"));
    }
    assert_timestamp(&account["created_at"], what);
    assert_timestamp(&account["updated_at"], what);
}

fn assert_counterparty_shape(counterparty: &Value, what: &str) {
    assert_keys(counterparty, COUNTERPARTY_KEYS, what);
    assert_eq!(counterparty["object"], "counterparty");
    assert!(counterparty["verification_status"].is_string(), "{what}: verification_status is a string");
    assert!(counterparty["send_remittance_advice"].is_boolean());
    assert!(counterparty["metadata"].is_object());
    for (i, account) in counterparty["accounts"].as_array().unwrap_or_else(|| panic!("{what}.accounts")).iter().enumerate() {
        assert_account_shape(account, true, &format!("{what}.accounts[{i}]"));
    }
}

fn assert_internal_account_shape(account: &Value, what: &str) {
    assert_keys(account, INTERNAL_ACCOUNT_KEYS, what);
    assert_eq!(account["object"], "internal_account");
    assert_keys(&account["connection"], CONNECTION_KEYS, &format!("{what}.connection"));
    assert!(account["party_name"].is_string());
    for item in account["account_details"].as_array().unwrap() {
        assert_keys(item, ACCOUNT_DETAIL_KEYS, &format!("{what}.account_details[]"));
    }
    for item in account["routing_details"].as_array().unwrap() {
        assert_keys(item, ROUTING_DETAIL_KEYS, &format!("{what}.routing_details[]"));
    }
    for item in account["account_capabilities"].as_array().unwrap() {
        assert_keys(item, CAPABILITY_KEYS, &format!("{what}.account_capabilities[]"));
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

async fn send(request: RequestBuilder) -> (u16, Value, HeaderMap) {
    let response = request.send().await.expect("request");
    let headers = response.headers().clone();
    let (status, body) = json(response).await;
    (status, body, headers)
}

async fn create(server: &TestServer, path: &str, key: &Key, body: Value) -> Value {
    let (status, created) = json(server.post(path, key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "POST {path} {body}: {created}");
    created
}

async fn fetch(server: &TestServer, path: &str, key: &Key) -> Value {
    let (status, body) = json(server.get(path, key).send().await.unwrap()).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    body
}

async fn patch(server: &TestServer, path: &str, key: &Key, body: Value) -> Value {
    let (status, patched) = json(server.patch(path, key, &body).send().await.unwrap()).await;
    assert_eq!(status, 200, "PATCH {path} {body}: {patched}");
    patched
}

/// One page: its items, `X-After-Cursor` and `X-Per-Page`.
async fn page(server: &TestServer, path: &str, key: &Key) -> (Vec<Value>, String, String) {
    let (status, body, headers) = send(server.get(path, key)).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    let header = |name: &str| headers.get(name).unwrap_or_else(|| panic!("{name} on {path}")).to_str().unwrap().to_owned();
    let items = body.as_array().unwrap_or_else(|| panic!("a bare array from {path}: {body}")).clone();
    (items, header("x-after-cursor"), header("x-per-page"))
}

/// The items of a list (first page of up to 100).
async fn list(server: &TestServer, path: &str, key: &Key) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    page(server, &format!("{path}{sep}per_page=100"), key).await.0
}

fn ids(items: &[Value]) -> Vec<String> {
    items.iter().map(|o| o["id"].as_str().expect("id").to_owned()).collect()
}

fn id_set(items: &[Value]) -> BTreeSet<String> {
    ids(items).into_iter().collect()
}

fn id(value: &Value) -> String {
    value["id"].as_str().unwrap_or_else(|| panic!("id in {value}")).to_owned()
}

async fn status_of(request: RequestBuilder) -> (u16, Value) {
    json(request.send().await.unwrap()).await
}

fn aba_account(number: &str) -> Value {
    json!({
        "account_details": [{"account_number": number}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba", "payment_type": "ach"}],
    })
}

// ---------------------------------------------------------------------------------------------
// E1: counterparties embed their accounts
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn e1_counterparty_with_inline_accounts() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let created = create(
        &server,
        "/api/counterparties",
        &key,
        json!({
            "name": "Acme Corp",
            "email": "billing@acme.example",
            "external_id": "acme-1",
            "send_remittance_advice": true,
            "verification_status": "verified",
            "metadata": {"region": "west"},
            "accounts": [
                {
                    "account_type": "checking",
                    "party_name": "Alice Smith",
                    "party_type": "individual",
                    "party_address": {"line1": "1 Main St", "locality": "Springfield", "region": "IL", "postal_code": "62701", "country": "US"},
                    "account_details": [{"account_number": "123456789"}],
                    "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba", "payment_type": "ach"}],
                    "contact_details": [{"contact_identifier": "alice@acme.example", "contact_identifier_type": "email"}],
                    "metadata": {"primary": "true"}
                },
                {
                    "name": "Euro account",
                    "account_details": [{"account_number": "GB82WEST12345698765432", "account_number_type": "iban"}],
                    "routing_details": [{"routing_number": "DEUTDEFF", "routing_number_type": "swift"}]
                }
            ]
        }),
    )
    .await;
    assert_counterparty_shape(&created, "created counterparty");
    assert_eq!(created["name"], "Acme Corp");
    assert_eq!(created["email"], "billing@acme.example");
    assert_eq!(created["external_id"], "acme-1");
    assert_eq!(created["send_remittance_advice"], true);
    assert_eq!(created["metadata"], json!({"region": "west"}));
    assert_eq!(created["live_mode"], false);
    assert_eq!(created["legal_entity_id"], Value::Null);
    assert_eq!(created["verification_status"], "verified", "MT's deprecated field, kept as given");
    assert_eq!(created["discarded_at"], Value::Null);

    let accounts = created["accounts"].as_array().unwrap();
    assert_eq!(accounts.len(), 2);
    let alice = accounts.iter().find(|a| a["party_name"] == "Alice Smith").expect("Alice's account");
    assert_eq!(alice["account_type"], "checking");
    assert_eq!(alice["party_type"], "individual");
    assert_eq!(alice["metadata"], json!({"primary": "true"}));
    assert_eq!(alice["account_details"][0]["account_number"], "123456789");
    assert_eq!(alice["account_details"][0]["account_number_safe"], "6789");
    assert_eq!(alice["account_details"][0]["account_number_type"], "other");
    assert_eq!(alice["routing_details"][0]["routing_number"], "121141822");
    assert_eq!(alice["routing_details"][0]["routing_number_type"], "aba");
    assert_eq!(alice["routing_details"][0]["payment_type"], "ach");
    assert_eq!(alice["party_address"]["line1"], "1 Main St");
    assert_eq!(alice["party_address"]["line2"], Value::Null);
    assert_eq!(alice["contact_details"][0]["contact_identifier"], "alice@acme.example");
    let euro = accounts.iter().find(|a| a["name"] == "Euro account").expect("the IBAN account");
    assert_eq!(euro["party_name"], "Acme Corp", "party_name defaults to the counterparty's name");
    assert_eq!(euro["account_details"][0]["account_number_type"], "iban");
    assert_eq!(euro["routing_details"][0]["routing_number_type"], "swift");
    assert_eq!(euro["party_address"], Value::Null);
    assert_eq!(euro["contact_details"], json!([]));
    assert_eq!(euro["metadata"], json!({}));

    let cp_id = id(&created);
    let retrieved = fetch(&server, &format!("/api/counterparties/{cp_id}"), &key).await;
    assert_counterparty_shape(&retrieved, "retrieved counterparty");
    assert_eq!(retrieved, created, "retrieve returns what create returned, accounts embedded");
    let listed = list(&server, "/api/counterparties", &key).await;
    assert_eq!(listed, vec![created.clone()], "the list embeds the accounts too");

    let standalone = list(&server, &format!("/api/external_accounts?counterparty_id={cp_id}"), &key).await;
    assert_eq!(standalone.len(), 2);
    let embedded: BTreeMap<String, Value> = accounts.iter().map(|a| (id(a), a.clone())).collect();
    for account in &standalone {
        assert_account_shape(account, false, "listed external account");
        assert_eq!(account["counterparty_id"], cp_id.as_str());
        let mut without = account.clone();
        without.as_object_mut().unwrap().remove("counterparty_id");
        assert_eq!(Some(&without), embedded.get(&id(account)), "the embedded account is the account without counterparty_id");
        assert_eq!(&fetch(&server, &format!("/api/external_accounts/{}", id(account)), &key).await, account);
    }
}
}

// ---------------------------------------------------------------------------------------------
// E: create, retrieve, list, update, delete
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn e_counterparty_crud() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let created = create(&server, "/api/counterparties", &key, json!({"name": "Crud Co"})).await;
    assert_counterparty_shape(&created, "counterparty");
    assert_eq!((&created["accounts"], &created["metadata"], &created["email"]), (&json!([]), &json!({}), &Value::Null));
    assert_eq!(created["send_remittance_advice"], false);
    let cp_id = id(&created);
    let path = format!("/api/counterparties/{cp_id}");
    assert_eq!(fetch(&server, &path, &key).await, created);
    let other = create(&server, "/api/counterparties", &key, json!({"name": "Other Co"})).await;
    assert_eq!(ids(&list(&server, "/api/counterparties", &key).await), vec![id(&other), cp_id.clone()], "newest first");

    server.clock.advance_secs(5);
    let patched = patch(
        &server,
        &path,
        &key,
        json!({"name": "Crud Co 2", "email": "ap@crud.example", "metadata": {"k": "v"}, "send_remittance_advice": true, "external_id": "ext-1"}),
    )
    .await;
    assert_counterparty_shape(&patched, "patched counterparty");
    assert_eq!(patched["id"], created["id"]);
    assert_eq!(patched["name"], "Crud Co 2");
    assert_eq!(patched["email"], "ap@crud.example");
    assert_eq!(patched["metadata"], json!({"k": "v"}));
    assert_eq!(patched["send_remittance_advice"], true);
    assert_eq!(patched["external_id"], "ext-1");
    assert_eq!(patched["created_at"], created["created_at"]);
    assert!(patched["updated_at"].as_str() > created["updated_at"].as_str(), "updated_at moves forward on PATCH");
    assert_eq!(fetch(&server, &path, &key).await, patched, "the change is stored");
    let cleared = patch(&server, &path, &key, json!({"external_id": null})).await;
    assert_eq!(cleared["external_id"], Value::Null, "null clears a nullable field");
    assert_eq!(cleared["name"], "Crud Co 2", "absent fields are left alone");

    // Deleting removes the counterparty and its accounts.
    let account = create(&server, "/api/external_accounts", &key, json!({"counterparty_id": cp_id, "party_name": "Acct"})).await;
    assert_eq!(fetch(&server, &path, &key).await["accounts"].as_array().unwrap().len(), 1);
    let (status, body, _) = send(server.delete(&path, &key)).await;
    assert_eq!((status, body), (204, Value::Null), "204 with an empty body");
    let (status, body) = status_of(server.get(&path, &key)).await;
    assert_error(status, &body, 404, "resource_not_found");
    assert_eq!(ids(&list(&server, "/api/counterparties", &key).await), vec![id(&other)], "gone from the list");
    let (status, _) = status_of(server.get(&format!("/api/external_accounts/{}", id(&account)), &key)).await;
    assert_eq!(status, 404, "its account is gone with it");
    assert!(list(&server, "/api/external_accounts", &key).await.is_empty());
    let (status, _) = status_of(server.patch(&path, &key, &json!({"name": "x"}))).await;
    assert_eq!(status, 404, "PATCH after delete");
    let (status, body) = status_of(server.delete(&path, &key)).await;
    assert_error(status, &body, 404, "resource_not_found");
    let (status, _) = status_of(server.get("/api/counterparties/not-a-uuid", &key)).await;
    assert_eq!(status, 404, "an id that cannot exist is simply not found");
}
}

on_both_stores! {
#[tokio::test]
async fn e_external_account_crud() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let owner1 = id(&create(&server, "/api/counterparties", &key, json!({"name": "Owner One"})).await);
    let owner2 = id(&create(&server, "/api/counterparties", &key, json!({"name": "Owner Two"})).await);

    let mut body = aba_account("000123456789");
    body["counterparty_id"] = json!(owner1);
    let account = create(&server, "/api/external_accounts", &key, body).await;
    assert_account_shape(&account, false, "external account");
    assert_eq!(account["counterparty_id"], owner1.as_str());
    assert_eq!(account["party_name"], "Owner One", "party_name defaults to the counterparty's name");
    assert_eq!(account["account_type"], "other");
    let solo = create(&server, "/api/external_accounts", &key, json!({"party_name": "Solo Person", "account_type": "savings"})).await;
    assert_account_shape(&solo, false, "standalone account");
    assert_eq!((&solo["counterparty_id"], &solo["account_type"]), (&Value::Null, &json!("savings")));

    let acct_id = id(&account);
    let path = format!("/api/external_accounts/{acct_id}");
    assert_eq!(fetch(&server, &path, &key).await, account);
    assert_eq!(ids(&list(&server, "/api/external_accounts", &key).await), vec![id(&solo), acct_id.clone()]);
    assert_eq!(ids(&list(&server, &format!("/api/external_accounts?counterparty_id={owner1}"), &key).await), vec![acct_id.clone()]);
    assert_eq!(ids(&list(&server, "/api/external_accounts?party_name=SOLO", &key).await), vec![id(&solo)], "party_name: partial, any case");
    let embedded = fetch(&server, &format!("/api/counterparties/{owner1}"), &key).await;
    assert_eq!(ids(embedded["accounts"].as_array().unwrap()), vec![acct_id.clone()]);

    server.clock.advance_secs(5);
    let patched = patch(
        &server,
        &path,
        &key,
        json!({"name": "Main", "party_name": "Renamed", "party_type": "business", "account_type": "checking",
               "metadata": {"x": "y"}, "counterparty_id": owner2, "party_address": {"line1": "2 Side St", "country": "US"}}),
    )
    .await;
    assert_account_shape(&patched, false, "patched account");
    assert_eq!(patched["name"], "Main");
    assert_eq!(patched["party_name"], "Renamed");
    assert_eq!(patched["party_type"], "business");
    assert_eq!(patched["account_type"], "checking");
    assert_eq!(patched["metadata"], json!({"x": "y"}));
    assert_eq!(patched["counterparty_id"], owner2.as_str());
    assert_eq!(patched["party_address"]["line1"], "2 Side St");
    assert_eq!(patched["account_details"], account["account_details"], "untouched fields stay");
    assert_eq!(patched["created_at"], account["created_at"]);
    assert!(patched["updated_at"].as_str() > account["updated_at"].as_str(), "updated_at moves forward");
    assert_eq!(fetch(&server, &path, &key).await, patched);
    assert!(fetch(&server, &format!("/api/counterparties/{owner1}"), &key).await["accounts"].as_array().unwrap().is_empty(), "moved away");
    assert_eq!(
        ids(fetch(&server, &format!("/api/counterparties/{owner2}"), &key).await["accounts"].as_array().unwrap()),
        vec![acct_id.clone()]
    );
    let cleared = patch(&server, &path, &key, json!({"party_type": null, "name": null})).await;
    assert_eq!((&cleared["party_type"], &cleared["name"]), (&Value::Null, &Value::Null));

    let (status, body, _) = send(server.delete(&path, &key)).await;
    assert_eq!((status, body), (204, Value::Null));
    let (status, body) = status_of(server.get(&path, &key)).await;
    assert_error(status, &body, 404, "resource_not_found");
    assert_eq!(ids(&list(&server, "/api/external_accounts", &key).await), vec![id(&solo)]);
    assert!(fetch(&server, &format!("/api/counterparties/{owner2}"), &key).await["accounts"].as_array().unwrap().is_empty());
    let (status, _) = status_of(server.delete(&path, &key)).await;
    assert_eq!(status, 404);
}
}

on_both_stores! {
#[tokio::test]
async fn e_internal_account_crud() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let operating = create(&server, "/api/internal_accounts", &key, json!({"name": "Operating", "currency": "USD"})).await;
    assert_internal_account_shape(&operating, "internal account");
    assert_eq!(operating["name"], "Operating");
    assert_eq!(operating["party_name"], "Operating");
    assert_eq!(operating["currency"], "USD");
    assert_eq!(operating["status"], "active");
    assert_eq!(operating["live_mode"], false);
    assert_eq!(operating["account_details"].as_array().unwrap().len(), 1);
    let routing = &operating["routing_details"][0];
    assert_eq!((&routing["routing_number_type"], routing["routing_number"].as_str().unwrap().len()), (&json!("aba"), 9));
    assert_eq!(operating["connection"]["object"], "connection");

    let payroll = create(
        &server,
        "/api/internal_accounts",
        &key,
        json!({"name": "Payroll", "currency": "EUR", "account_type": "checking", "party_name": "Payrail Inc", "party_type": "business",
               "metadata": {"dept": "hr"}, "external_id": "pay-1",
               "account_capabilities": [{"direction": "credit", "payment_type": "sepa", "identifier": "x"}]}),
    )
    .await;
    assert_internal_account_shape(&payroll, "internal account with capabilities");
    assert_eq!(payroll["party_name"], "Payrail Inc");
    assert_eq!(payroll["account_capabilities"][0]["payment_type"], "sepa");
    assert_eq!(payroll["connection"]["id"], operating["connection"]["id"], "one connection per organization and mode");

    let path = format!("/api/internal_accounts/{}", id(&operating));
    assert_eq!(fetch(&server, &path, &key).await, operating);
    assert_eq!(ids(&list(&server, "/api/internal_accounts", &key).await), vec![id(&payroll), id(&operating)], "newest first");
    assert_eq!(ids(&list(&server, "/api/internal_accounts?currency=EUR", &key).await), vec![id(&payroll)]);
    // Found by the core audit: a currency that is none answered an empty page.
    let (status, body) = status_of(server.get("/api/internal_accounts?currency=ZZZ", &key)).await;
    assert_eq!((status, body["errors"]["parameter"].as_str()), (422, Some("currency")), "{body}");
    // Range filters this list does not take are unknown parameters, ignored whatever their
    // operator (L2); before, a misspelt operator was a 422 and a well-formed one was ignored.
    for ignored in ["created_at[gte]=2099-01-01", "created_at[gtee]=2026-01-01", "updated_at[bogus]=x"] {
        let listed = list(&server, &format!("/api/internal_accounts?{ignored}"), &key).await;
        assert_eq!(ids(&listed), vec![id(&payroll), id(&operating)], "{ignored}");
    }
    assert_eq!(ids(&list(&server, "/api/internal_accounts?metadata[dept]=hr", &key).await), vec![id(&payroll)]);

    server.clock.advance_secs(5);
    let patched = patch(&server, &path, &key, json!({"name": "Operating 2", "metadata": {"a": "b"}, "external_id": "op-1"})).await;
    assert_internal_account_shape(&patched, "patched internal account");
    assert_eq!(
        (&patched["name"], &patched["metadata"], &patched["external_id"]),
        (&json!("Operating 2"), &json!({"a": "b"}), &json!("op-1"))
    );
    assert_eq!(patched["currency"], "USD");
    assert_eq!(patched["created_at"], operating["created_at"]);
    assert!(patched["updated_at"].as_str() > operating["updated_at"].as_str());
    assert_eq!(fetch(&server, &path, &key).await, patched);
    // An account may not be its own ancestor, however far up (A -> B -> A).
    let child = create(&server, "/api/internal_accounts", &key, json!({"name": "Child", "currency": "USD", "parent_account_id": id(&operating)})).await;
    let grandchild = create(&server, "/api/internal_accounts", &key, json!({"name": "Grandchild", "currency": "USD", "parent_account_id": id(&child)})).await;
    for parent in [id(&grandchild), id(&child)] {
        let (status, body) = status_of(server.patch(&path, &key, &json!({"parent_account_id": parent}))).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "parent_account_id", "{body}");
    }
    assert_eq!(fetch(&server, &path, &key).await["parent_account_id"], Value::Null, "a refused edit changes nothing");
    let closing = patch(&server, &path, &key, json!({"status": "pending_closure"})).await;
    assert_eq!(closing["status"], "pending_closure");
    // An account being closed sends no new payment order.
    let order = json!({"type": "book", "amount": 100, "direction": "credit", "originating_account_id": id(&operating), "receiving_account_id": id(&payroll)});
    let (status, body) = status_of(server.post("/api/payment_orders", &key, &order)).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "originating_account_id", "{body}");

    // SPEC E lists no DELETE for internal accounts.
    let (status, _) = status_of(server.delete(&path, &key)).await;
    assert_eq!(status, 405, "DELETE is not a method of internal accounts");
    assert_eq!(fetch(&server, &path, &key).await, closing);
    let (status, body) = status_of(server.get("/api/internal_accounts/00000000-0000-4000-8000-000000000000", &key)).await;
    assert_error(status, &body, 404, "resource_not_found");
}
}

// ---------------------------------------------------------------------------------------------
// A3: tenant and mode isolation
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn a3_tenant_isolation() {
    let server = TestServer::start().await;
    let owner = server.key().await;
    let owner_live = server.key_for("default", Mode::Live).await;
    let stranger = server.key_for("org-b", Mode::Sandbox).await;

    let cp = create(&server, "/api/counterparties", &owner, json!({"name": "Private", "accounts": [aba_account("111222333")]})).await;
    let cp_id = id(&cp);
    let acct_id = id(&cp["accounts"][0]);
    let ia = create(&server, "/api/internal_accounts", &owner, json!({"name": "Mine", "currency": "USD"})).await;
    let ia_id = id(&ia);
    let events = list(&server, "/api/events", &owner).await;
    assert!(!events.is_empty());
    let acct = fetch(&server, &format!("/api/external_accounts/{acct_id}"), &owner).await;

    let live_cp = create(&server, "/api/counterparties", &owner_live, json!({"name": "Live One"})).await;
    assert_eq!(live_cp["live_mode"], true, "a live key's objects are live_mode");
    assert_eq!(cp["live_mode"], false);

    // A live internal account names its connection (SPEC B1); the body below is otherwise the same.
    let live_connection = common::live_connection(&server, "default").await;
    for (who, key) in [("another organization", &stranger), ("the same organization's live key", &owner_live)] {
        let account = |extra: Value| {
            let mut body = json!({"name": "X", "currency": "USD"});
            if std::ptr::eq(key, &owner_live) {
                body["connection_id"] = json!(live_connection);
            }
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        for path in
            [format!("/api/counterparties/{cp_id}"), format!("/api/external_accounts/{acct_id}"), format!("/api/internal_accounts/{ia_id}")]
        {
            let (status, body) = status_of(server.get(&path, key)).await;
            assert_error(status, &body, 404, "resource_not_found");
            let (status, body) = status_of(server.patch(&path, key, &json!({"name": "Stolen"}))).await;
            assert_eq!(status, 404, "PATCH {path} by {who}: {body}");
            if !path.contains("internal_accounts") {
                let (status, body) = status_of(server.delete(&path, key)).await;
                assert_eq!(status, 404, "DELETE {path} by {who}: {body}");
            }
        }
        for event in &events {
            let (status, _) = status_of(server.get(&format!("/api/events/{}", id(event)), key)).await;
            assert_eq!(status, 404, "event seen by {who}");
        }
        for path in ["/api/counterparties", "/api/external_accounts", "/api/internal_accounts", "/api/events"] {
            let seen = id_set(&list(&server, path, key).await);
            for hidden in [&cp_id, &acct_id, &ia_id] {
                assert!(!seen.contains(hidden), "{path} for {who} shows {hidden}");
            }
        }
        let filtered = list(&server, &format!("/api/external_accounts?counterparty_id={cp_id}"), key).await;
        assert!(filtered.is_empty(), "filtering by a foreign counterparty finds nothing for {who}");
        let (status, _) = status_of(server.get(&format!("/api/events?entity_id={cp_id}"), key)).await;
        assert_eq!(status, 200);
        assert!(list(&server, &format!("/api/events?entity_id={cp_id}"), key).await.is_empty());

        // Naming it in a body is an invalid parameter, not a way in.
        let (status, body) = status_of(server.post("/api/external_accounts", key, &json!({"counterparty_id": cp_id}))).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "counterparty_id", "{who}: {body}");
        let (status, body) =
            status_of(server.post("/api/internal_accounts", key, &account(json!({"counterparty_id": cp_id})))).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "counterparty_id", "{who}: {body}");
        let (status, body) =
            status_of(server.post("/api/internal_accounts", key, &account(json!({"parent_account_id": ia_id})))).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "parent_account_id", "{who}: {body}");
        let theirs = create(&server, "/api/external_accounts", key, json!({"party_name": "Theirs"})).await;
        let (status, body) =
            status_of(server.patch(&format!("/api/external_accounts/{}", id(&theirs)), key, &json!({"counterparty_id": cp_id}))).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "counterparty_id", "{who}: {body}");
    }
    // The owner's objects are untouched.
    assert_eq!(fetch(&server, &format!("/api/counterparties/{cp_id}"), &owner).await, cp);
    assert_eq!(fetch(&server, &format!("/api/external_accounts/{acct_id}"), &owner).await, acct);
    assert_eq!(fetch(&server, &format!("/api/internal_accounts/{ia_id}"), &owner).await, ia);
    assert!(!id_set(&list(&server, "/api/counterparties", &owner).await).contains(&id(&live_cp)), "live objects are not in sandbox lists");
}
}

on_both_stores! {
/// Reads made at the same moment by three tenants (on PostgreSQL they are answered together, in
/// one statement per group): each sees its own counterparty with its own accounts, and every
/// other tenant's id answers 404.
#[tokio::test]
async fn a3_concurrent_reads_of_three_tenants_each_see_only_their_own() {
    let server = TestServer::start().await;
    let keys = [server.key().await, server.key_for("default", Mode::Live).await, server.key_for("org-b", Mode::Sandbox).await];
    let mut owned = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let accounts = if key.secret.starts_with("pr_live_") { json!([]) } else { json!([aba_account(&format!("55500{i}"))]) };
        let cp = create(&server, "/api/counterparties", key, json!({"name": format!("Tenant {i}"), "accounts": accounts})).await;
        owned.push(cp);
    }
    let reads = (0..144).map(|n| {
        let (reader, target) = (n % 3, (n / 3) % 3);
        let server = &server;
        let key = &keys[reader];
        let path = format!("/api/counterparties/{}", id(&owned[target]));
        async move { (reader, target, status_of(server.get(&path, key)).await) }
    });
    for (reader, target, (status, body)) in futures_util::future::join_all(reads).await {
        if reader == target {
            assert_eq!(status, 200, "tenant {reader} reads its own: {body}");
            assert_eq!(body, owned[reader], "tenant {reader} reads exactly its own counterparty and accounts");
        } else {
            assert_error(status, &body, 404, "resource_not_found");
        }
    }
}
}

// ---------------------------------------------------------------------------------------------
// L1: pagination
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn l1_pagination() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(id(&create(&server, "/api/counterparties", &key, json!({"name": format!("Page {i}")})).await));
    }
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();

    let mut collected = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor = String::new();
    for round in 0.. {
        assert!(round < 5, "pagination terminates");
        let path = if cursor.is_empty() {
            "/api/counterparties?per_page=3".to_owned()
        } else {
            format!("/api/counterparties?per_page=3&after_cursor={cursor}")
        };
        let (items, next, per_page) = page(&server, &path, &key).await;
        assert_eq!(per_page, "3", "X-Per-Page");
        sizes.push(items.len());
        collected.extend(ids(&items));
        if next.is_empty() {
            break;
        }
        cursor = next;
    }
    assert_eq!(sizes, vec![3, 3, 1]);
    assert_eq!(collected, newest_first, "newest first, no gaps, no duplicates");

    // A last page that is exactly full has an empty cursor too (never a cursor to an empty page).
    let (items, next, _) = page(&server, "/api/counterparties?per_page=7", &key).await;
    assert_eq!((items.len(), next.as_str()), (7, ""));
    let (first, next, _) = page(&server, "/api/counterparties?per_page=4", &key).await;
    let (second, last, _) = page(&server, &format!("/api/counterparties?per_page=4&after_cursor={next}"), &key).await;
    assert_eq!((first.len(), second.len(), last.as_str()), (4, 3, ""));

    let (items, _, per_page) = page(&server, "/api/counterparties", &key).await;
    assert_eq!((items.len(), per_page.as_str()), (7, "25"), "per_page defaults to 25");
    for big in ["500", "99999999999999999999999"] {
        let (_, _, per_page) = page(&server, &format!("/api/counterparties?per_page={big}"), &key).await;
        assert_eq!(per_page, "100", "per_page is capped at 100, however large: {big}");
    }
    for bad in ["garbage", "djE6LTE", "%%%"] {
        let (status, body) = status_of(server.get(&format!("/api/counterparties?after_cursor={bad}"), &key)).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "after_cursor", "{bad}: {body}");
    }
    for bad in ["0", "000", "ten", "-1", "5.0"] {
        let (status, body) = status_of(server.get(&format!("/api/counterparties?per_page={bad}"), &key)).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], "per_page", "{bad}: {body}");
    }
    // The other lists page the same way.
    for _ in 0..3 {
        create(&server, "/api/internal_accounts", &key, json!({"name": "IA", "currency": "USD"})).await;
    }
    let (items, next, _) = page(&server, "/api/internal_accounts?per_page=2", &key).await;
    let (rest, last, _) = page(&server, &format!("/api/internal_accounts?per_page=2&after_cursor={next}"), &key).await;
    assert_eq!((items.len(), rest.len(), last.as_str()), (2, 1, ""));
    let (events, next, _) = page(&server, "/api/events?per_page=5", &key).await;
    assert_eq!(events.len(), 5);
    assert!(!next.is_empty());
}
}

on_both_stores! {
#[tokio::test]
async fn l1_pagination_under_concurrent_inserts() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for i in 0..9 {
        create(&server, "/api/counterparties", &key, json!({"name": format!("Before {i}")})).await;
    }
    let at_start = ids(&list(&server, "/api/counterparties", &key).await);
    assert_eq!(at_start.len(), 9);

    let mut collected: Vec<String> = Vec::new();
    let mut cursor = String::new();
    let mut inserted = 0;
    for round in 0..20 {
        // Two inserts race each page fetch.
        let mut writers = Vec::new();
        for j in 0..2 {
            let request = server.post("/api/counterparties", &key, &json!({"name": format!("During {round}.{j}")}));
            writers.push(tokio::spawn(async move { request.send().await.expect("insert").status().as_u16() }));
        }
        let path = if cursor.is_empty() {
            "/api/counterparties?per_page=2".to_owned()
        } else {
            format!("/api/counterparties?per_page=2&after_cursor={cursor}")
        };
        let (items, next, _) = page(&server, &path, &key).await;
        for writer in writers {
            assert_eq!(writer.await.unwrap(), 201);
            inserted += 1;
        }
        // And one more between fetches.
        create(&server, "/api/counterparties", &key, json!({"name": format!("Between {round}")})).await;
        inserted += 1;
        collected.extend(ids(&items));
        if next.is_empty() {
            break;
        }
        cursor = next;
    }
    // The first page may include rows inserted while it was fetched (they are the newest);
    // after it, exactly the rows that existed before, in order, once each.
    let before: BTreeSet<&String> = at_start.iter().collect();
    let old_rows: Vec<String> = collected.iter().filter(|id| before.contains(id)).cloned().collect();
    assert_eq!(old_rows, at_start, "every row that existed at the start, newest first, no gaps");
    let unique: BTreeSet<&String> = collected.iter().collect();
    assert_eq!(unique.len(), collected.len(), "no duplicates: {collected:?}");
    let extra: Vec<&String> = collected.iter().filter(|id| !before.contains(id)).collect();
    assert!(extra.len() <= 2, "only rows racing the first page may appear, newer than all: {extra:?}");
    assert!(collected.iter().take(extra.len()).all(|id| !before.contains(id)), "new rows can only lead the first page");
    assert_eq!(list(&server, "/api/counterparties", &key).await.len(), 9 + inserted);
}
}

// ---------------------------------------------------------------------------------------------
// L2: filters
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn l2_metadata_filters() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cp1 = id(&create(
        &server,
        "/api/counterparties",
        &key,
        json!({"name": "Acme Corp", "email": "billing@Acme.example", "metadata": {"team": "a b&c", "tier": "gold", "cost center": "R&D"}}),
    )
    .await);
    let cp2 = id(&create(
        &server,
        "/api/counterparties",
        &key,
        json!({"name": "ACME Widgets", "email": "ap@widgets.example", "metadata": {"team": "a b&c", "tier": "silver"}}),
    )
    .await);
    let cp3 = id(&create(
        &server,
        "/api/counterparties",
        &key,
        json!({"name": "Other Inc", "email": "x@other.example", "metadata": {"team": "other"}}),
    )
    .await);

    let cases: Vec<(&str, Vec<&String>)> = vec![
        ("metadata%5Bteam%5D=a+b%26c", vec![&cp1, &cp2]),
        ("metadata[team]=a%20b%26c", vec![&cp1, &cp2]),
        ("metadata[team]=a+b%26c&metadata[tier]=gold", vec![&cp1]),
        ("metadata[tier]=silver&metadata%5Bteam%5D=a%20b%26c", vec![&cp2]),
        ("metadata[team]=a+b%26c&metadata[tier]=bronze", vec![]),
        ("metadata[cost+center]=R%26D", vec![&cp1]),
        ("metadata%5Bcost%20center%5D=R%26D", vec![&cp1]),
        ("metadata[team]=a", vec![]),
        ("metadata[team]=other&unknown=1&foo%5Bbar%5D=baz&page=7", vec![&cp3]),
        ("no_such_filter=1", vec![&cp1, &cp2, &cp3]),
        ("name=acme", vec![&cp1, &cp2]),
        ("name=ACME+w", vec![&cp2]),
        ("name=corp", vec![&cp1]),
        ("email=ACME.EXAMPLE", vec![&cp1]),
        ("email=example&name=inc", vec![&cp3]),
        ("name=zzz", vec![]),
        ("name=acme&metadata[tier]=silver", vec![&cp2]),
    ];
    for (query, expected) in cases {
        let got = id_set(&list(&server, &format!("/api/counterparties?{query}"), &key).await);
        let want: BTreeSet<String> = expected.into_iter().cloned().collect();
        assert_eq!(got, want, "?{query}");
    }

    // The same filters on accounts.
    let ea =
        id(&create(&server, "/api/external_accounts", &key, json!({"party_name": "Jane Q. Public", "metadata": {"use": "pay roll&more"}}))
            .await);
    create(&server, "/api/external_accounts", &key, json!({"party_name": "Somebody", "metadata": {"use": "other"}})).await;
    assert_eq!(ids(&list(&server, "/api/external_accounts?metadata[use]=pay+roll%26more", &key).await), vec![ea.clone()]);
    assert_eq!(ids(&list(&server, "/api/external_accounts?metadata%5Buse%5D=pay%20roll%26more&x=y", &key).await), vec![ea.clone()]);
    assert_eq!(ids(&list(&server, "/api/external_accounts?party_name=jane+q", &key).await), vec![ea]);
    let ia =
        id(&create(&server, "/api/internal_accounts", &key, json!({"name": "Ops", "currency": "USD", "metadata": {"desk": "fx ops"}}))
            .await);
    create(&server, "/api/internal_accounts", &key, json!({"name": "Other", "currency": "USD"})).await;
    assert_eq!(ids(&list(&server, "/api/internal_accounts?metadata[desk]=fx+ops", &key).await), vec![ia.clone()]);
    assert_eq!(ids(&list(&server, "/api/internal_accounts?metadata[desk]=fx%20ops&currency=USD", &key).await), vec![ia]);
}
}

// ---------------------------------------------------------------------------------------------
// E4: events
// ---------------------------------------------------------------------------------------------

/// The events of one entity, newest first.
async fn events_of(server: &TestServer, key: &Key, entity_id: &str) -> Vec<Value> {
    list(server, &format!("/api/events?entity_id={entity_id}"), key).await
}

fn assert_event(event: &Value, resource: &str, name: &str, entity_id: &str, data: &Value) {
    assert_keys(event, EVENT_KEYS, "event");
    assert_eq!(event["object"], "event");
    assert_eq!(event["resource"], resource, "{event}");
    assert_eq!(event["event_name"], name, "{event}");
    assert_eq!(event["entity_id"], entity_id, "{event}");
    assert_eq!(event["live_mode"], false);
    assert_timestamp(&event["event_time"], "event_time");
    assert_eq!(&event["data"], data, "the event's data is the resource as returned");
}

on_both_stores! {
#[tokio::test]
async fn e4_events_written() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cp =
        create(&server, "/api/counterparties", &key, json!({"name": "Evented", "accounts": [aba_account("1111"), aba_account("2222")]}))
            .await;
    let cp_id = id(&cp);
    let events = events_of(&server, &key, &cp_id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_event(&events[0], "counterparty", "created", &cp_id, &cp);
    assert_eq!(fetch(&server, &format!("/api/events/{}", id(&events[0])), &key).await, events[0], "retrieve an event");

    let acct_ids = ids(cp["accounts"].as_array().unwrap());
    for acct_id in &acct_ids {
        let as_returned = fetch(&server, &format!("/api/external_accounts/{acct_id}"), &key).await;
        let events = events_of(&server, &key, acct_id).await;
        assert_eq!(events.len(), 1, "an inline account's creation is an event of its own");
        assert_event(&events[0], "external_account", "created", acct_id, &as_returned);
    }

    let patched = patch(&server, &format!("/api/counterparties/{cp_id}"), &key, json!({"name": "Evented 2"})).await;
    let events = events_of(&server, &key, &cp_id).await;
    assert_eq!(events.len(), 2);
    assert_event(&events[0], "counterparty", "updated", &cp_id, &patched);

    let acct_path = format!("/api/external_accounts/{}", acct_ids[0]);
    let acct_patched = patch(&server, &acct_path, &key, json!({"party_name": "New Party"})).await;
    assert_event(&events_of(&server, &key, &acct_ids[0]).await[0], "external_account", "updated", &acct_ids[0], &acct_patched);
    let (status, _) = status_of(server.delete(&acct_path, &key)).await;
    assert_eq!(status, 204);
    let acct_events = events_of(&server, &key, &acct_ids[0]).await;
    let names: Vec<&str> = acct_events.iter().map(|e| e["event_name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["deleted", "updated", "created"]);
    assert_event(&acct_events[0], "external_account", "deleted", &acct_ids[0], &acct_patched);

    let ia = create(&server, "/api/internal_accounts", &key, json!({"name": "Evented IA", "currency": "GBP"})).await;
    let ia_id = id(&ia);
    let ia_patched = patch(&server, &format!("/api/internal_accounts/{ia_id}"), &key, json!({"metadata": {"k": "v"}})).await;
    let ia_events = events_of(&server, &key, &ia_id).await;
    assert_eq!(ia_events.len(), 2);
    assert_event(&ia_events[0], "internal_account", "updated", &ia_id, &ia_patched);
    assert_event(&ia_events[1], "internal_account", "created", &ia_id, &ia);

    let last = fetch(&server, &format!("/api/counterparties/{cp_id}"), &key).await;
    assert_eq!(last["accounts"].as_array().unwrap().len(), 1);
    let (status, _) = status_of(server.delete(&format!("/api/counterparties/{cp_id}"), &key)).await;
    assert_eq!(status, 204);
    let events = events_of(&server, &key, &cp_id).await;
    let names: Vec<&str> = events.iter().map(|e| e["event_name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["deleted", "updated", "created"], "newest first");
    assert_event(&events[0], "counterparty", "deleted", &cp_id, &last);

    // Filters.
    let ia_only = list(&server, "/api/events?resource=internal_account", &key).await;
    assert_eq!(ids(&ia_only), ids(&ia_events));
    let deleted = list(&server, "/api/events?event_name=deleted", &key).await;
    assert!(deleted.iter().all(|e| e["event_name"] == "deleted"));
    assert!(deleted.iter().any(|e| e["entity_id"] == cp_id.as_str()));
    let all = list(&server, "/api/events", &key).await;
    for event in &all {
        assert_keys(event, EVENT_KEYS, "listed event");
    }
    // A failed request writes no event.
    let (status, _) = status_of(server.post("/api/counterparties", &key, &json!({"name": ""}))).await;
    assert_eq!(status, 422);
    let (status, _) = status_of(server.patch(&format!("/api/internal_accounts/{ia_id}"), &key, &json!({"status": "closed"}))).await;
    assert_eq!(status, 422);
    assert_eq!(list(&server, "/api/events", &key).await.len(), all.len(), "no event for a failed request");
    let (status, body) = status_of(server.get("/api/events/00000000-0000-4000-8000-000000000000", &key)).await;
    assert_error(status, &body, 404, "resource_not_found");
}
}

on_both_stores! {
#[tokio::test]
async fn e4_cascade_delete_writes_account_events() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cp = create(&server, "/api/counterparties", &key, json!({"name": "Cascade", "accounts": [aba_account("3333")]})).await;
    let acct_id = id(&cp["accounts"][0]);
    let as_returned = fetch(&server, &format!("/api/external_accounts/{acct_id}"), &key).await;
    let (status, _) = status_of(server.delete(&format!("/api/counterparties/{}", id(&cp)), &key)).await;
    assert_eq!(status, 204);
    let (status, _) = status_of(server.get(&format!("/api/external_accounts/{acct_id}"), &key)).await;
    assert_eq!(status, 404, "the account went with its counterparty");
    // The account changed (it is gone): SPEC E4 wants an event for it, as for a direct delete.
    let events = events_of(&server, &key, &acct_id).await;
    let names: Vec<&str> = events.iter().map(|e| e["event_name"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["deleted", "created"], "an external_account `deleted` event for a cascaded delete (SPEC E4)");
    assert_event(&events[0], "external_account", "deleted", &acct_id, &as_returned);
}
}

// ---------------------------------------------------------------------------------------------
// L3, L4: every 422 names its parameter
// ---------------------------------------------------------------------------------------------

on_both_stores! {
#[tokio::test]
async fn l3_every_422_names_its_parameter() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cp_id = id(&create(&server, "/api/counterparties", &key, json!({"name": "Fixture"})).await);
    let ea_id = id(&create(&server, "/api/external_accounts", &key, json!({"party_name": "Fixture"})).await);
    let ia_id = id(&create(&server, "/api/internal_accounts", &key, json!({"name": "Fixture", "currency": "USD"})).await);
    let nobody = "00000000-0000-4000-8000-000000000000";
    let events_before = list(&server, "/api/events", &key).await.len();

    let many: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let long_value = "v".repeat(501);
    let long_key = "k".repeat(101);
    let cp = "/api/counterparties";
    let ea = "/api/external_accounts";
    let ia = "/api/internal_accounts";
    let one = |account: Value| json!({"name": "N", "accounts": [account]});
    let twenty_one: Vec<Value> = (0..21).map(|_| json!({})).collect();

    // (method, path, body, code, parameter)
    let post = "POST";
    let cases: Vec<(&str, String, Value, &str, &str)> = vec![
        // Counterparties.
        (post, cp.into(), json!({}), "parameter_missing", "name"),
        (post, cp.into(), json!({"name": null}), "parameter_missing", "name"),
        (post, cp.into(), json!({"name": ""}), "parameter_invalid", "name"),
        (post, cp.into(), json!({"name": "   "}), "parameter_invalid", "name"),
        (post, cp.into(), json!({"name": "n".repeat(256)}), "parameter_invalid", "name"),
        (post, cp.into(), json!({"name": "a\u{1}b"}), "parameter_invalid", "name"),
        (post, cp.into(), json!({"name": 5}), "parameter_invalid", "name"),
        (post, cp.into(), json!({"name": "N", "email": "not-an-email"}), "parameter_invalid", "email"),
        (post, cp.into(), json!({"name": "N", "email": "a@b"}), "parameter_invalid", "email"),
        (post, cp.into(), json!({"name": "N", "email": "a b@c.com"}), "parameter_invalid", "email"),
        (post, cp.into(), json!({"name": "N", "external_id": ""}), "parameter_invalid", "external_id"),
        (post, cp.into(), json!({"name": "N", "metadata": {"k": 1}}), "parameter_invalid", "metadata.k"),
        (post, cp.into(), json!({"name": "N", "metadata": {"k": null}}), "parameter_invalid", "metadata.k"),
        (post, cp.into(), json!({"name": "N", "metadata": ["a"]}), "parameter_invalid", "metadata"),
        (post, cp.into(), json!({"name": "N", "metadata": many}), "parameter_invalid", "metadata"),
        (post, cp.into(), json!({"name": "N", "metadata": {"k": long_value}}), "parameter_invalid", "metadata.k"),
        (post, cp.into(), json!({"name": "N", "metadata": {long_key.clone(): "v"}}), "parameter_invalid", "metadata"),
        (post, cp.into(), json!({"name": "N", "metadata": {"": "v"}}), "parameter_invalid", "metadata"),
        (post, cp.into(), json!({"name": "N", "send_remittance_advice": "yes"}), "parameter_invalid", "send_remittance_advice"),
        (post, cp.into(), json!({"name": "N", "legal_entity_id": "le_1"}), "parameter_invalid", "legal_entity_id"),
        (post, cp.into(), json!({"name": "N", "legal_entity": {"legal_entity_type": "business"}}), "parameter_invalid", "legal_entity"),
        (post, cp.into(), json!({"name": "N", "verification_status": "bogus"}), "parameter_invalid", "verification_status"),
        (post, cp.into(), json!({"name": "N", "accounts": "none"}), "parameter_invalid", "accounts"),
        (post, cp.into(), json!({"name": "N", "accounts": twenty_one}), "parameter_invalid", "accounts"),
        (post, cp.into(), one(json!({"account_type": "bogus"})), "parameter_invalid", "accounts[0].account_type"),
        (post, cp.into(), one(json!({"party_type": "robot"})), "parameter_invalid", "accounts[0].party_type"),
        (post, cp.into(), one(json!({"party_name": ""})), "parameter_invalid", "accounts[0].party_name"),
        (
            post,
            cp.into(),
            one(json!({"account_details": [{"account_number": "1234 5678"}]})),
            "parameter_invalid",
            "accounts[0].account_details[0].account_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"account_details": [{"account_number": ""}]})),
            "parameter_invalid",
            "accounts[0].account_details[0].account_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"account_details": [{"account_number": "1".repeat(35)}]})),
            "parameter_invalid",
            "accounts[0].account_details[0].account_number",
        ),
        (post, cp.into(), one(json!({"account_details": [{}]})), "parameter_missing", "accounts[0].account_details[0].account_number"),
        (
            post,
            cp.into(),
            one(json!({"account_details": [{"account_number": "GB82WEST12345698765431", "account_number_type": "iban"}]})),
            "parameter_invalid",
            "accounts[0].account_details[0].account_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"account_details": [{"account_number": "123", "account_number_type": "nope"}]})),
            "parameter_invalid",
            "accounts[0].account_details[0].account_number_type",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "121141823", "routing_number_type": "aba"}]})),
            "parameter_invalid",
            "accounts[0].routing_details[0].routing_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "12114182", "routing_number_type": "aba"}]})),
            "parameter_invalid",
            "accounts[0].routing_details[0].routing_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "121141822", "routing_number_type": "abba"}]})),
            "parameter_invalid",
            "accounts[0].routing_details[0].routing_number_type",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "121141822"}]})),
            "parameter_missing",
            "accounts[0].routing_details[0].routing_number_type",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "121141822", "routing_number_type": "aba", "payment_type": "pigeon"}]})),
            "parameter_invalid",
            "accounts[0].routing_details[0].payment_type",
        ),
        (
            post,
            cp.into(),
            one(json!({"routing_details": [{"routing_number": "deutdeff", "routing_number_type": "swift"}]})),
            "parameter_invalid",
            "accounts[0].routing_details[0].routing_number",
        ),
        (
            post,
            cp.into(),
            one(json!({"contact_details": [{"contact_identifier": "nope", "contact_identifier_type": "email"}]})),
            "parameter_invalid",
            "accounts[0].contact_details[0].contact_identifier",
        ),
        (
            post,
            cp.into(),
            one(json!({"contact_details": [{"contact_identifier": "x", "contact_identifier_type": "fax"}]})),
            "parameter_invalid",
            "accounts[0].contact_details[0].contact_identifier_type",
        ),
        (
            post,
            cp.into(),
            one(json!({"party_address": {"line1": "l".repeat(256)}})),
            "parameter_invalid",
            "accounts[0].party_address.line1",
        ),
        (post, cp.into(), one(json!({"metadata": {"k": true}})), "parameter_invalid", "accounts[0].metadata.k"),
        (post, cp.into(), one(json!({"ledger_account": {}})), "parameter_invalid", "accounts[0].ledger_account"),
        (post, cp.into(), one(json!({"plaid_processor_token": "tok"})), "parameter_invalid", "accounts[0].plaid_processor_token"),
        (
            post,
            cp.into(),
            json!({"name": "N", "accounts": [{}, {"account_type": "bogus"}]}),
            "parameter_invalid",
            "accounts[1].account_type",
        ),
        // External accounts.
        (post, ea.into(), json!({"counterparty_id": nobody}), "parameter_invalid", "counterparty_id"),
        (post, ea.into(), json!({"counterparty_id": "not-a-uuid"}), "parameter_invalid", "counterparty_id"),
        (post, ea.into(), json!({"counterparty_id": 7}), "parameter_invalid", "counterparty_id"),
        (post, ea.into(), json!({"account_type": "bogus"}), "parameter_invalid", "account_type"),
        (post, ea.into(), json!({"party_type": "robot"}), "parameter_invalid", "party_type"),
        (
            post,
            ea.into(),
            json!({"account_details": [{"account_number": "12 34"}]}),
            "parameter_invalid",
            "account_details[0].account_number",
        ),
        (
            post,
            ea.into(),
            json!({"account_details": [{"account_number": "12-34"}]}),
            "parameter_invalid",
            "account_details[0].account_number",
        ),
        (
            post,
            ea.into(),
            json!({"account_details": [{"account_number": "DE00123", "account_number_type": "iban"}]}),
            "parameter_invalid",
            "account_details[0].account_number",
        ),
        (
            post,
            ea.into(),
            json!({"routing_details": [{"routing_number": "021000022", "routing_number_type": "aba"}]}),
            "parameter_invalid",
            "routing_details[0].routing_number",
        ),
        (
            post,
            ea.into(),
            json!({"routing_details": [{"routing_number": "12345", "routing_number_type": "gb_sort_code"}]}),
            "parameter_invalid",
            "routing_details[0].routing_number",
        ),
        (
            post,
            ea.into(),
            json!({"routing_details": [{"routing_number_type": "aba"}]}),
            "parameter_missing",
            "routing_details[0].routing_number",
        ),
        (post, ea.into(), json!({"metadata": {"k": 1.5}}), "parameter_invalid", "metadata.k"),
        (post, ea.into(), json!({"name": ""}), "parameter_invalid", "name"),
        (post, ea.into(), json!({"party_address": {"country": 1}}), "parameter_invalid", "party_address.country"),
        // Internal accounts.
        (post, ia.into(), json!({"currency": "USD"}), "parameter_missing", "name"),
        (post, ia.into(), json!({"name": "Ops"}), "parameter_missing", "currency"),
        (post, ia.into(), json!({"name": "Ops", "currency": "XYZ"}), "parameter_invalid", "currency"),
        (post, ia.into(), json!({"name": "Ops", "currency": "US"}), "parameter_invalid", "currency"),
        (post, ia.into(), json!({"name": "Ops", "currency": 840}), "parameter_invalid", "currency"),
        (post, ia.into(), json!({"name": "", "currency": "USD"}), "parameter_invalid", "name"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "legal_entity_id": "le_1"}), "parameter_invalid", "legal_entity_id"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "account_type": "bogus"}), "parameter_invalid", "account_type"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "party_type": "robot"}), "parameter_invalid", "party_type"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "counterparty_id": nobody}), "parameter_invalid", "counterparty_id"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "parent_account_id": nobody}), "parameter_invalid", "parent_account_id"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "connection_id": nobody}), "parameter_invalid", "connection_id"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "debitable": "yes"}), "parameter_invalid", "debitable"),
        (post, ia.into(), json!({"name": "Ops", "currency": "USD", "metadata": {"k": 2}}), "parameter_invalid", "metadata.k"),
        (
            post,
            ia.into(),
            json!({"name": "Ops", "currency": "USD", "account_capabilities": [{"direction": "sideways", "payment_type": "ach"}]}),
            "parameter_invalid",
            "account_capabilities[0].direction",
        ),
        (
            post,
            ia.into(),
            json!({"name": "Ops", "currency": "USD", "account_capabilities": [{"direction": "credit", "payment_type": "pigeon"}]}),
            "parameter_invalid",
            "account_capabilities[0].payment_type",
        ),
        // Updates.
        ("PATCH", format!("{cp}/{cp_id}"), json!({"email": "bad"}), "parameter_invalid", "email"),
        ("PATCH", format!("{cp}/{cp_id}"), json!({"name": ""}), "parameter_invalid", "name"),
        ("PATCH", format!("{cp}/{cp_id}"), json!({"legal_entity_id": "le_1"}), "parameter_invalid", "legal_entity_id"),
        ("PATCH", format!("{cp}/{cp_id}"), json!({"metadata": {"a": 2}}), "parameter_invalid", "metadata.a"),
        ("PATCH", format!("{cp}/{cp_id}"), json!({"send_remittance_advice": "no"}), "parameter_invalid", "send_remittance_advice"),
        ("PATCH", format!("{ea}/{ea_id}"), json!({"counterparty_id": nobody}), "parameter_invalid", "counterparty_id"),
        ("PATCH", format!("{ea}/{ea_id}"), json!({"party_type": "robot"}), "parameter_invalid", "party_type"),
        ("PATCH", format!("{ea}/{ea_id}"), json!({"account_type": "bogus"}), "parameter_invalid", "account_type"),
        ("PATCH", format!("{ea}/{ea_id}"), json!({"party_name": ""}), "parameter_invalid", "party_name"),
        ("PATCH", format!("{ea}/{ea_id}"), json!({"metadata": {"k": long_value}}), "parameter_invalid", "metadata.k"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"status": "active"}), "parameter_invalid", "status"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"ledger_account_id": nobody}), "parameter_invalid", "ledger_account_id"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"parent_account_id": ia_id}), "parameter_invalid", "parent_account_id"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"parent_account_id": nobody}), "parameter_invalid", "parent_account_id"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"counterparty_id": nobody}), "parameter_invalid", "counterparty_id"),
        ("PATCH", format!("{ia}/{ia_id}"), json!({"name": ""}), "parameter_invalid", "name"),
        // List parameters.
        ("GET", format!("{cp}?created_at_lower_bound=yesterday"), Value::Null, "parameter_invalid", "created_at_lower_bound"),
        ("GET", format!("{cp}?created_at_upper_bound=2026-13-45"), Value::Null, "parameter_invalid", "created_at_upper_bound"),
        ("GET", format!("{ia}?status=bogus"), Value::Null, "parameter_invalid", "status"),
        ("GET", format!("{ia}?payment_direction=up"), Value::Null, "parameter_invalid", "payment_direction"),
        ("GET", format!("{ea}?per_page=x"), Value::Null, "parameter_invalid", "per_page"),
        ("GET", "/api/events?after_cursor=nope".into(), Value::Null, "parameter_invalid", "after_cursor"),
    ];
    let mut failures = Vec::new();
    for (method, path, body, code, parameter) in &cases {
        let request = match *method {
            "POST" => server.post(path, &key, body),
            "PATCH" => server.patch(path, &key, body),
            _ => server.get(path, &key),
        };
        let (status, reply, headers) = send(request).await;
        let got_code = reply["errors"]["code"].as_str().unwrap_or("");
        let got_parameter = reply["errors"]["parameter"].as_str().unwrap_or("");
        let message_ok = reply["errors"]["message"].as_str().is_some_and(|m| !m.is_empty());
        let retry = headers.get("x-should-retry").and_then(|v| v.to_str().ok());
        if (status, got_code, got_parameter, message_ok, retry) != (422, *code, *parameter, true, Some("false")) {
            let shown = body.to_string();
            let shown = if shown.len() > 160 { format!("{}...", &shown[..160]) } else { shown };
            failures.push(format!(
                "{method} {path} {shown}\n    expected 422 {code} `{parameter}` (x-should-retry: false), got {status} {reply} (x-should-retry: {retry:?})"
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));

    // None of them changed anything.
    assert_eq!(ids(&list(&server, cp, &key).await), vec![cp_id.clone()]);
    assert_eq!(ids(&list(&server, ea, &key).await), vec![ea_id]);
    assert_eq!(ids(&list(&server, ia, &key).await), vec![ia_id]);
    assert_eq!(list(&server, "/api/events", &key).await.len(), events_before, "no event for a refused request");
    assert_eq!(fetch(&server, &format!("{cp}/{cp_id}"), &key).await["name"], "Fixture");
}
}

on_both_stores! {
#[tokio::test]
async fn l3_body_errors_and_unknown_fields() {
    let server = TestServer::start_with(|c| c.body_limit_bytes = 2048).await;
    let key = server.key().await;
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let mut request = server.req(reqwest::Method::POST, "/api/counterparties", &key).body(body);
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        request
    };
    for (body, case) in [("{\"name\":", "truncated"), ("not json", "text"), ("[{\"name\":\"A\"}]", "an array"), ("\"A\"", "a string")] {
        let (status, reply) = status_of(raw(body, Some("application/json"))).await;
        assert_error(status, &reply, 400, "malformed_json");
        assert!(!reply.to_string().contains("Something went wrong"), "{case}");
        let (status, reply) =
            status_of(raw(body, Some("application/json")).header("Idempotency-Key", format!("mj-{}", case.replace(' ', "-")))).await;
        assert_error(status, &reply, 400, "malformed_json");
    }
    let (status, reply) = status_of(raw("{\"name\":\"A\"}", Some("text/plain"))).await;
    assert_error(status, &reply, 415, "unsupported_media_type");
    let (status, reply) = status_of(raw("name=A", Some("application/x-www-form-urlencoded"))).await;
    assert_error(status, &reply, 415, "unsupported_media_type");
    let (status, reply) = status_of(raw("{\"name\":\"A\"}", None)).await;
    assert_error(status, &reply, 415, "unsupported_media_type");
    let (status, reply) = status_of(raw("{\"name\":\"A\"}", Some("application/json; charset=utf-8"))).await;
    assert_eq!(status, 201, "a charset parameter is fine: {reply}");
    let (status, reply) = status_of(
        server
            .req(reqwest::Method::PATCH, &format!("/api/counterparties/{}", id(&reply)), &key)
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_error(status, &reply, 415, "unsupported_media_type");
    // An empty POST body without a content type is an empty object: the missing field is named.
    let (status, reply) = status_of(server.req(reqwest::Method::POST, "/api/counterparties", &key)).await;
    assert_error(status, &reply, 422, "parameter_missing");
    assert_eq!(reply["errors"]["parameter"], "name");

    // Over the body limit: 413, with or without an idempotency key, and the key stays usable.
    let big = json!({"name": "Big", "metadata": {"blob": "x".repeat(400), "b2": "x".repeat(400), "b3": "x".repeat(400), "b4": "x".repeat(400), "b5": "x".repeat(400), "b6": "x".repeat(400)}});
    assert!(serde_json::to_vec(&big).unwrap().len() > 2048);
    let (status, reply) = status_of(server.post("/api/counterparties", &key, &big)).await;
    assert_error(status, &reply, 413, "request_too_large");
    let (status, reply) = status_of(server.post("/api/counterparties", &key, &big).header("Idempotency-Key", "big")).await;
    assert_error(status, &reply, 413, "request_too_large");
    let (status, reply) = status_of(server.patch("/api/counterparties/00000000-0000-4000-8000-000000000000", &key, &big)).await;
    assert!(status == 413 || status == 404, "PATCH over the limit: {status} {reply}");
    let (status, reply) =
        status_of(server.post("/api/counterparties", &key, &json!({"name": "Small"})).header("Idempotency-Key", "big")).await;
    assert_eq!(status, 201, "a 413 stored nothing under its key (I5): {reply}");

    // Unknown fields are ignored, at every level.
    let created = create(
        &server,
        "/api/counterparties",
        &key,
        json!({"name": "Future", "brand_new_field": {"nested": 1}, "taxpayer_identifier": "x",
               "accounts": [{"party_name": "P", "future_flag": true, "account_details": [{"account_number": "42", "extra": 1}]}]}),
    )
    .await;
    assert_counterparty_shape(&created, "counterparty created with unknown fields");
    assert!(created.get("brand_new_field").is_none());
    let patched =
        patch(&server, &format!("/api/counterparties/{}", id(&created)), &key, json!({"name": "Future 2", "unknown": [1, 2]})).await;
    assert_eq!(patched["name"], "Future 2");
    let ia =
        create(&server, "/api/internal_accounts", &key, json!({"name": "Ops", "currency": "USD", "vendor_attributes": {"a": "b"}})).await;
    assert_internal_account_shape(&ia, "internal account created with unknown fields");

    // No such route, no such method.
    let (status, reply) = status_of(server.get("/api/nothing_here", &key)).await;
    assert_error(status, &reply, 404, "resource_not_found");
    let (status, _) = status_of(server.req(reqwest::Method::PUT, "/api/counterparties", &key).json(&json!({}))).await;
    assert_eq!(status, 405);
}
}

on_both_stores! {
#[tokio::test]
async fn l2_filters_are_literal_and_time_bounded() {
    use payrail::domain::time::Timestamp;
    let server = TestServer::start().await;
    let key = server.key().await;
    // LIKE wildcards in a partial filter are literal characters.
    let pct = id(&create(&server, "/api/counterparties", &key, json!({"name": "100% Pure"})).await);
    let plain = id(&create(&server, "/api/counterparties", &key, json!({"name": "1000 Pure"})).await);
    let under = id(&create(&server, "/api/counterparties", &key, json!({"name": "a_b Ltd", "email": "x_y@z.example"})).await);
    let axb = id(&create(&server, "/api/counterparties", &key, json!({"name": "axb Ltd", "email": "xay@z.example"})).await);
    let ecole = id(&create(&server, "/api/counterparties", &key, json!({"name": "ÉCOLE Normale"})).await);
    for (query, expected) in [
        ("name=100%25", vec![&pct]),
        ("name=100", vec![&pct, &plain]),
        ("name=a_b", vec![&under]),
        ("name=%25", vec![&pct]),
        ("email=x_y", vec![&under]),
        ("name=ltd", vec![&under, &axb]),
        ("name=%C3%A9cole", vec![&ecole]),
        ("name=", vec![&pct, &plain, &under, &axb, &ecole]),
    ] {
        let got = id_set(&list(&server, &format!("/api/counterparties?{query}"), &key).await);
        let want: BTreeSet<String> = expected.into_iter().cloned().collect();
        assert_eq!(got, want, "?{query}");
    }

    // created_at bounds: RFC 3339 (Z, or an offset sent as %2B), a date, or no offset (UTC).
    let server = TestServer::start().await;
    let key = server.key().await;
    let old = create(&server, "/api/counterparties", &key, json!({"name": "Old"})).await;
    server.clock.advance_secs(3 * 24 * 3600);
    let new = create(&server, "/api/counterparties", &key, json!({"name": "New"})).await;
    let (old_id, new_id) = (id(&old), id(&new));
    let old_at = old["created_at"].as_str().unwrap().to_owned();
    let new_at = new["created_at"].as_str().unwrap().to_owned();
    let middle = Timestamp::parse_rfc3339(&old_at).unwrap().plus_secs(36 * 3600).to_string();
    let middle_day = &middle[..10];
    let new_offset = format!("{}%2B00:00", new_at.trim_end_matches('Z'));
    let new_naive = new_at.trim_end_matches('Z').to_owned();
    for (query, expected) in [
        (format!("created_at_lower_bound={new_at}"), vec![&new_id]),
        (format!("created_at_upper_bound={old_at}"), vec![&old_id]),
        (format!("created_at_lower_bound={middle_day}"), vec![&new_id]),
        (format!("created_at_upper_bound={middle_day}"), vec![&old_id]),
        (format!("created_at_lower_bound={new_offset}"), vec![&new_id]),
        (format!("created_at_lower_bound={new_naive}"), vec![&new_id]),
        (format!("created_at_lower_bound={old_at}&created_at_upper_bound={new_at}"), vec![&old_id, &new_id]),
        (format!("created_at_lower_bound={middle}&created_at_upper_bound={middle}"), vec![]),
    ] {
        let got = id_set(&list(&server, &format!("/api/counterparties?{query}"), &key).await);
        let want: BTreeSet<String> = expected.into_iter().cloned().collect();
        assert_eq!(got, want, "?{query}");
    }
}
}

on_both_stores! {
#[tokio::test]
async fn l3_limits_accept_their_boundaries() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let fifty: serde_json::Map<String, Value> = (0..50).map(|i| (format!("k{i}"), json!("v"))).collect();
    let created = create(
        &server,
        "/api/counterparties",
        &key,
        json!({"name": "n".repeat(255), "metadata": fifty, "accounts": [{"account_details": [{"account_number": "1".repeat(34)}]}]}),
    )
    .await;
    assert_eq!(created["name"].as_str().unwrap().len(), 255);
    assert_eq!(created["metadata"].as_object().unwrap().len(), 50);
    let edge =
        create(&server, "/api/counterparties", &key, json!({"name": "Edge", "metadata": {"k".repeat(100): "v".repeat(500), "empty": ""}}))
            .await;
    assert_eq!(edge["metadata"]["empty"], "", "an empty metadata value is allowed");
    let twenty: Vec<Value> = (0..20).map(|_| json!({})).collect();
    let many = create(&server, "/api/counterparties", &key, json!({"name": "Twenty", "accounts": twenty})).await;
    assert_eq!(many["accounts"].as_array().unwrap().len(), 20);
    for currency in ["USD", "EUR", "JPY", "USDC"] {
        create(&server, "/api/internal_accounts", &key, json!({"name": "C", "currency": currency})).await;
    }
}
}

on_both_stores! {
#[tokio::test]
async fn e_concurrent_patches_all_apply() {
    let server = TestServer::start().await;
    let key = server.key().await;
    let cp = create(&server, "/api/counterparties", &key, json!({"name": "Busy"})).await;
    let path = format!("/api/counterparties/{}", id(&cp));
    let mut tasks = Vec::new();
    for i in 0..24 {
        let request = server.patch(&path, &key, &json!({"name": format!("Busy {i}")}));
        tasks.push(tokio::spawn(async move { json(request.send().await.expect("patch")).await }));
    }
    let mut names = BTreeSet::new();
    for task in tasks {
        let (status, body) = task.await.unwrap();
        assert_eq!(status, 200, "a concurrent PATCH succeeds: {body}");
        names.insert(body["name"].as_str().unwrap().to_owned());
    }
    assert_eq!(names.len(), 24);
    let last = fetch(&server, &path, &key).await;
    assert!(names.contains(last["name"].as_str().unwrap()));
    let events = list(&server, &format!("/api/events?entity_id={}&event_name=updated", id(&cp)), &key).await;
    assert_eq!(events.len(), 24, "one event per applied update");
    assert_eq!(events[0]["data"], last, "the newest event is the final state");
}
}

on_both_stores! {
#[tokio::test]
async fn e_patch_metadata_merges_like_modern_treasury() {
    // SDK `*_update_params.py`: "Pairs can be removed by passing an empty string or `null` as
    // the value": an update merges metadata; keys it does not name are kept.
    let server = TestServer::start().await;
    let key = server.key().await;
    let start = json!({"a": "1", "b": "2", "c": "3"});
    let cp = create(&server, "/api/counterparties", &key, json!({"name": "Meta", "metadata": start})).await;
    let ea = create(&server, "/api/external_accounts", &key, json!({"party_name": "Meta", "metadata": start})).await;
    let ia = create(&server, "/api/internal_accounts", &key, json!({"name": "Meta", "currency": "USD", "metadata": start})).await;
    for (path, object) in [("/api/counterparties", &cp), ("/api/external_accounts", &ea), ("/api/internal_accounts", &ia)] {
        let url = format!("{path}/{}", id(object));
        let (status, patched) = status_of(server.patch(&url, &key, &json!({"metadata": {"b": "", "c": null, "d": "4"}}))).await;
        assert_eq!(status, 200, "PATCH {path} metadata with \"\" and null values: {patched}");
        assert_eq!(patched["metadata"], json!({"a": "1", "d": "4"}), "PATCH {path}: merged, \"\" and null remove");
        assert_eq!(fetch(&server, &url, &key).await["metadata"], json!({"a": "1", "d": "4"}));
    }
}
}

on_both_stores! {
/// SPEC E4: a PATCH that changes nothing answers the resource as it is, with no `updated`
/// event and the same `updated_at`: a counterparty, an external account, an internal account
/// and a payment order. L2: a filter of Modern Treasury's Payrail does not serve, or a value
/// outside its list, is a 422 naming it rather than an unfiltered page.
#[tokio::test]
async fn e4_a_patch_that_changes_nothing_writes_no_event_and_l2_known_filters_are_served_or_refused() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await;
    let key = server.key().await;
    let counterparty = create(&server, "/api/counterparties", &key, json!({"name": "Acme", "accounts": [aba_account("123456789")]})).await;
    let external = counterparty["accounts"][0]["id"].as_str().unwrap().to_owned();
    let internal = create(&server, "/api/internal_accounts", &key, json!({"name": "Ops", "currency": "USD"})).await;
    let order = json!({"type": "ach", "amount": 100, "direction": "credit", "originating_account_id": internal["id"], "receiving_account_id": external,
        "metadata": {"k": "v"}});
    let order = create(&server, "/api/payment_orders", &key, order).await;
    let cases = [
        (format!("/api/counterparties/{}", id(&counterparty)), json!({})),
        (format!("/api/counterparties/{}", id(&counterparty)), json!({"name": "Acme"})),
        (format!("/api/external_accounts/{external}"), json!({"party_name": counterparty["accounts"][0]["party_name"]})),
        (format!("/api/internal_accounts/{}", id(&internal)), json!({"name": "Ops"})),
        (format!("/api/payment_orders/{}", id(&order)), json!({"metadata": {"k": "v"}, "status": "approved"})),
    ];
    for (path, body) in cases {
        let before = fetch(&server, &path, &key).await;
        let entity = path.rsplit('/').next().unwrap().to_owned();
        let events = list(&server, &format!("/api/events?entity_id={entity}"), &key).await.len();
        let after = patch(&server, &path, &key, body.clone()).await;
        assert_eq!(after, before, "{path} {body}");
        assert_eq!(list(&server, &format!("/api/events?entity_id={entity}"), &key).await.len(), events, "{path} {body}: no event");
    }
    for (path, parameter) in [
        ("/api/counterparties?legal_entity_id=x", "legal_entity_id"),
        ("/api/internal_accounts?legal_entity_id=x", "legal_entity_id"),
        ("/api/internal_accounts?payment_type=bogus", "payment_type"),
        ("/api/connections?vendor_customer_id=x", "vendor_customer_id"),
    ] {
        let (status, body) = status_of(server.get(path, &key)).await;
        assert_error(status, &body, 422, "parameter_invalid");
        assert_eq!(body["errors"]["parameter"], parameter, "{path}: {body}");
    }
}
}

on_both_stores! {
/// Found by the PostgreSQL audit: a NUL (which PostgreSQL's text refuses) in a path id, in an
/// id a body names, or in a counterparty's email was a 500 on PostgreSQL; SQLite answered 404,
/// 422, and stored the email. Both stores now answer alike, in the contract's error shape.
#[tokio::test]
async fn l3_a_nul_in_an_id_or_an_email_is_a_clear_4xx_on_every_store() {
    let server = TestServer::start().await;
    let key = server.key().await;
    for path in ["/api/counterparties/a%00b", "/api/payment_orders/a%00b", "/api/ledger_transactions/a%00b", "/api/webhook_endpoints/a%00b/deliveries"] {
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert_error(status, &body, 404, "resource_not_found");
    }
    let (status, body) = json(server.delete("/api/ledger_account_categories/a%00b/ledger_accounts/c", &key).send().await.unwrap()).await;
    assert_error(status, &body, 404, "resource_not_found");
    // A list filter naming a NUL is refused, or matches nothing (no stored value holds one).
    for path in ["/api/payment_orders?counterparty_id=a%00b", "/api/counterparties?metadata%5Bk%00%5D=v", "/api/counterparties?id%5B%5D=a%00b"] {
        let (status, body) = json(server.get(path, &key).send().await.unwrap()).await;
        assert!(status == 422 && body["errors"]["parameter"].is_string() || (status, &body) == (200, &json!([])), "{path}: {status} {body}");
    }
    let order = json!({"type": "ach", "amount": 100, "direction": "credit", "originating_account_id": "a\u{0}b", "receiving_account_id": "c\u{0}d"});
    let (status, body) = json(server.post("/api/payment_orders", &key, &order).send().await.unwrap()).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = json(server.post("/api/counterparties", &key, &json!({"name": "EM", "email": "a@b.co\u{0}x"})).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "email", "{body}");
    let body = json!({"name": "Acct", "counterparty_id": "a\u{0}b", "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "021000021", "routing_number_type": "aba"}]});
    let (status, body) = json(server.post("/api/external_accounts", &key, &body).send().await.unwrap()).await;
    assert_error(status, &body, 422, "parameter_invalid");
    assert_eq!(body["errors"]["parameter"], "counterparty_id", "{body}");
    let (_, listed) = json(server.get("/api/counterparties", &key).send().await.unwrap()).await;
    assert_eq!(listed, json!([]), "nothing was written");
}
}
