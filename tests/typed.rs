//! Issue 17 point 3 ("parse, don't validate"): the domain now carries payment types,
//! directions, priorities, statuses, amounts, currencies and ids as types, parsed once where the
//! request is read. That refactor must change nothing a client sees: these tests pin the exact
//! error bodies (code, message, parameter) of invalid input (SPEC E2, E3, L3) and the wire form
//! of the documents the typed fields serialise into (E2, E4), on both stores.

#[macro_use]
mod common;

use std::time::Duration;

use common::{Key, TestServer, json};
use serde_json::{Value, json};

async fn frozen_bank() -> TestServer {
    TestServer::start_with(|c| c.sandbox_step_ms = 3_600_000).await
}

async fn created(server: &TestServer, key: &Key, path: &str, body: Value) -> Value {
    let (status, reply) = json(server.post(path, key, &body).send().await.unwrap()).await;
    assert_eq!(status, 201, "{path}: {reply}");
    reply
}

/// An internal account in `currency` and a counterparty's external account: (internal, external).
async fn accounts(server: &TestServer, key: &Key, currency: &str) -> (String, String) {
    let internal = created(server, key, "/api/internal_accounts", json!({"name": "Operating", "currency": currency})).await;
    let counterparty = json!({"name": "Vendor", "accounts": [{
        "account_details": [{"account_number": "123456789"}],
        "routing_details": [{"routing_number": "121141822", "routing_number_type": "aba"}]
    }]});
    let counterparty = created(server, key, "/api/counterparties", counterparty).await;
    (internal["id"].as_str().unwrap().to_owned(), counterparty["accounts"][0]["id"].as_str().unwrap().to_owned())
}

fn order(originating: &str, receiving: &str) -> Value {
    json!({"type": "ach", "amount": 12500, "direction": "credit", "originating_account_id": originating, "receiving_account_id": receiving})
}

/// `base` with `changes` merged in (a `null` change removes the field).
fn with(base: &Value, changes: Value) -> Value {
    let mut out = base.clone();
    for (k, v) in changes.as_object().unwrap() {
        if v.is_null() {
            out.as_object_mut().unwrap().shift_remove(k);
        } else {
            out[k] = v.clone();
        }
    }
    out
}

/// Asserts the exact 422 body: `{"errors":{"code","message","parameter"}}` (a missing field's
/// code is `parameter_missing`, any other's `parameter_invalid`).
fn assert_422(case: &str, status: u16, body: &Value, parameter: &str, message: &str) {
    assert_eq!(status, 422, "{case}: {body}");
    let code = if message.ends_with(" is required") { "parameter_missing" } else { "parameter_invalid" };
    let expected = json!({"errors": {"code": code, "message": message, "parameter": parameter}});
    assert_eq!(body, &expected, "{case}");
}

const TYPES_SHOWN: &str =
    "type must be one of ach, au_becs, bacs, book, card, chats, check, cross_border, dk_nets, eft, gb_fps, masav, ...";
const AMOUNT_RANGE: &str = "must be a whole number of minor units from 1 to 9007199254740991";

on_both_stores! {
/// E2, L3: each invalid field of a create keeps its exact 422 (parameter, code, message).
#[tokio::test]
async fn e2_create_refusals_keep_their_exact_bodies() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let (originating, receiving) = accounts(&server, &key, "USD").await;
    let base = order(&originating, &receiving);
    let missing = "00000000-0000-7000-8000-000000000000";
    let cases: Vec<(Value, &str, String)> = vec![
        (with(&base, json!({"type": null})), "type", "type is required".into()),
        (with(&base, json!({"type": "swift"})), "type", TYPES_SHOWN.into()),
        (with(&base, json!({"amount": 0})), "amount", format!("amount {AMOUNT_RANGE}")),
        (with(&base, json!({"amount": 9_007_199_254_740_992i64})), "amount", format!("amount {AMOUNT_RANGE}")),
        (with(&base, json!({"direction": "up"})), "direction", "direction must be one of credit, debit".into()),
        (with(&base, json!({"direction": null})), "direction", "direction is required".into()),
        (with(&base, json!({"originating_account_id": "nope"})), "originating_account_id", "originating_account_id does not name an existing resource".into()),
        (
            with(&base, json!({"originating_account_id": missing})),
            "originating_account_id",
            "originating_account_id does not name an existing internal account".into(),
        ),
        (with(&base, json!({"receiving_account_id": "nope"})), "receiving_account_id", "receiving_account_id does not name an existing account".into()),
        (with(&base, json!({"counterparty_id": missing})), "counterparty_id", "counterparty_id does not name an existing counterparty".into()),
        (
            with(&base, json!({"currency": "EUR"})),
            "currency",
            "currency must be the originating account's (USD): cross-currency payments are not supported".into(),
        ),
        (with(&base, json!({"currency": "usd"})), "currency", "currency must be an ISO 4217 currency code such as USD (got \"usd\")".into()),
        (with(&base, json!({"priority": "urgent"})), "priority", "priority must be one of high, normal".into()),
        (with(&base, json!({"line_items": [{"amount": 0}]})), "line_items[0].amount", format!("line_items[0].amount {AMOUNT_RANGE}")),
        (
            with(&base, json!({"line_items": [{"amount": 100}, {"amount": 200}]})),
            "line_items",
            "line item amounts add up to 300, not the order's amount 12500".into(),
        ),
        (with(&base, json!({"statement_descriptor": "elevenchars"})), "statement_descriptor", "statement_descriptor must be at most 10 characters".into()),
        (with(&base, json!({"type": "ach", "amount": 0, "direction": "up"})), "amount", format!("amount {AMOUNT_RANGE}")),
    ];
    for (body, parameter, message) in cases {
        let (status, reply) = json(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
        assert_422(&body.to_string(), status, &reply, parameter, &message);
    }
}

/// E2, L3: a body whose field has the wrong JSON type keeps today's 422 from the JSON reader.
#[tokio::test]
async fn e2_wrongly_typed_fields_keep_their_exact_bodies() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let (originating, receiving) = accounts(&server, &key, "USD").await;
    let base = order(&originating, &receiving);
    let cases = [
        (json!({"amount": "12500"}), "amount", "amount is invalid: invalid type: string \"12500\", expected an integer"),
        (json!({"type": 5}), "type", "type is invalid: invalid type: integer `5`, expected a string"),
        (json!({"direction": true}), "direction", "direction is invalid: invalid type: boolean `true`, expected a string"),
    ];
    for (change, parameter, message) in cases {
        let body = with(&base, change);
        let (status, reply) = json(server.post("/api/payment_orders", &key, &body).send().await.unwrap()).await;
        assert_422(&body.to_string(), status, &reply, parameter, message);
    }
}

/// E2, E3, L3: PATCH refusals keep their exact bodies (status names the whole list).
#[tokio::test]
async fn e3_update_refusals_keep_their_exact_bodies() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let (originating, receiving) = accounts(&server, &key, "USD").await;
    let id = created(&server, &key, "/api/payment_orders", order(&originating, &receiving)).await["id"].as_str().unwrap().to_owned();
    let all = "approved, cancelled, completed, denied, failed, held, needs_approval, pending, processing, returned, reversed, sent, stopped";
    let cases: Vec<(Value, &str, String)> = vec![
        (json!({"status": "bogus"}), "status", format!("status must be one of {all}")),
        (
            json!({"status": "processing"}),
            "status",
            "a payment order cannot move from approved to processing: from approved you may ask for needs_approval, cancelled".into(),
        ),
        (json!({"amount": -1}), "amount", format!("amount {AMOUNT_RANGE}")),
        (json!({"priority": "urgent"}), "priority", "priority must be one of high, normal".into()),
        (
            json!({"direction": "debit"}),
            "direction",
            "direction cannot change after creation: cancel this payment order and create another".into(),
        ),
        (json!({"type": "wire"}), "type", "type cannot change after creation: cancel this payment order and create another".into()),
    ];
    for (body, parameter, message) in cases {
        let (status, reply) = json(server.patch(&format!("/api/payment_orders/{id}"), &key, &body).send().await.unwrap()).await;
        assert_422(&body.to_string(), status, &reply, parameter, &message);
    }
    let order = json(server.get(&format!("/api/payment_orders/{id}"), &key).send().await.unwrap()).await.1;
    assert_eq!((order["status"].as_str(), order["amount"].as_i64(), order["priority"].as_str()), (Some("approved"), Some(12500), Some("normal")));
}

/// L2, L3: list filters refuse unknown enum values with today's bodies, in today's order (the
/// time bounds first, then type, priority, status, direction, then the dates).
#[tokio::test]
async fn l3_list_filter_refusals_keep_their_exact_bodies() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let statuses = "status must be one of approved, cancelled, completed, denied, failed, held, needs_approval, pending, processing, returned, reversed, sent, ...";
    let cases: Vec<(&str, &str, &str)> = vec![
        ("type=swift", "type", TYPES_SHOWN),
        ("priority=urgent", "priority", "priority must be one of high, normal"),
        ("status=bogus", "status", statuses),
        ("direction=up", "direction", "direction must be one of credit, debit"),
        ("direction=up&type=swift", "type", TYPES_SHOWN),
        ("status=bogus&priority=urgent", "priority", "priority must be one of high, normal"),
        ("direction=up&effective_date_start=x", "direction", "direction must be one of credit, debit"),
        ("effective_date_start=2026-02-30", "effective_date_start", "effective_date_start must be a date written YYYY-MM-DD"),
    ];
    for (query, parameter, message) in cases {
        let (status, reply) = json(server.get(&format!("/api/payment_orders?{query}"), &key).send().await.unwrap()).await;
        assert_422(query, status, &reply, parameter, message);
    }
    let (status, reply) = json(server.get("/api/payment_orders?type=swift&created_at_start=bad", &key).send().await.unwrap()).await;
    assert_eq!((status, reply["errors"]["parameter"].as_str()), (422, Some("created_at_start")), "{reply}");
    let (status, reply) = json(server.get("/api/internal_accounts?payment_direction=up", &key).send().await.unwrap()).await;
    assert_422("payment_direction", status, &reply, "payment_direction", "payment_direction must be one of credit, debit");
    for query in ["type=wire&direction=debit&priority=high&status=pending", "counterparty_id=nope&originating_account_id=nope"] {
        let (status, reply) = json(server.get(&format!("/api/payment_orders?{query}"), &key).send().await.unwrap()).await;
        assert_eq!((status, reply), (200, json!([])), "{query}");
    }
}

/// E2, L3: internal and external account fields that are now typed keep their refusals.
#[tokio::test]
async fn e2_account_refusals_keep_their_exact_bodies() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let capability = |direction: &str, payment_type: &str| {
        json!({"name": "Ops", "currency": "USD", "account_capabilities": [{"direction": direction, "payment_type": payment_type}]})
    };
    let cases: Vec<(&str, Value, &str, String)> = vec![
        ("/api/internal_accounts", json!({"name": "Ops"}), "currency", "currency is required".into()),
        (
            "/api/internal_accounts",
            json!({"name": "Ops", "currency": "XYZ"}),
            "currency",
            "currency must be an ISO 4217 currency code such as USD (got \"XYZ\")".into(),
        ),
        (
            "/api/internal_accounts",
            capability("up", "ach"),
            "account_capabilities[0].direction",
            "account_capabilities[0].direction must be one of credit, debit".into(),
        ),
        (
            "/api/internal_accounts",
            capability("credit", "swift"),
            "account_capabilities[0].payment_type",
            format!("account_capabilities[0].payment_{TYPES_SHOWN}"),
        ),
        (
            "/api/external_accounts",
            json!({"routing_details": [{"routing_number": "121141822", "routing_number_type": "aba", "payment_type": "swift"}]}),
            "routing_details[0].payment_type",
            format!("routing_details[0].payment_{TYPES_SHOWN}"),
        ),
        (
            "/api/external_accounts",
            json!({"routing_details": [{"routing_number": "121141823", "routing_number_type": "aba"}]}),
            "routing_details[0].routing_number",
            "routing_details[0].routing_number must be 9 digits with a valid ABA checksum".into(),
        ),
        (
            "/api/external_accounts",
            json!({"account_details": [{"account_number": "DE89370400440532013001", "account_number_type": "iban"}]}),
            "account_details[0].account_number",
            "account_details[0].account_number is not a valid IBAN (the string does not follow the base IBAN rules)".into(),
        ),
        (
            "/api/external_accounts",
            json!({"routing_details": [{"routing_number": "deutdeff", "routing_number_type": "swift"}]}),
            "routing_details[0].routing_number",
            "routing_details[0].routing_number must be a SWIFT/BIC code of 8 or 11 characters".into(),
        ),
    ];
    for (path, body, parameter, message) in cases {
        let (status, reply) = json(server.post(path, &key, &body).send().await.unwrap()).await;
        assert_422(&body.to_string(), status, &reply, parameter, &message);
    }
}

/// E2, E4: the typed fields serialise to the wire strings and numbers they always had, in the
/// reply, on read, in lists and in the event's data.
#[tokio::test]
async fn e2_typed_fields_keep_their_wire_form() {
    let server = frozen_bank().await;
    let key = server.key().await;
    let internal = created(&server, &key, "/api/internal_accounts", json!({
        "name": "Yen", "currency": "JPY", "account_capabilities": [{"direction": "debit", "payment_type": "zengin"}]
    })).await;
    assert_eq!((internal["currency"].as_str(), internal["account_capabilities"][0]["direction"].as_str()), (Some("JPY"), Some("debit")));
    assert_eq!(internal["account_capabilities"][0]["payment_type"], "zengin");
    assert_eq!((internal["routing_details"][0]["routing_number_type"].as_str(), internal["routing_details"][0]["payment_type"].as_null()), (Some("aba"), Some(())));
    let originating = internal["id"].as_str().unwrap();
    let external = created(&server, &key, "/api/external_accounts", json!({
        "routing_details": [{"routing_number": "DEUTDEFF", "routing_number_type": "swift", "payment_type": "cross_border"}],
        "account_details": [{"account_number": "DE89370400440532013000", "account_number_type": "iban"}]
    })).await;
    assert_eq!(external["routing_details"][0]["payment_type"], "cross_border");
    let receiving = external["id"].as_str().unwrap();
    let body = json!({"type": "cross_border", "amount": 500, "direction": "debit", "priority": "high", "currency": "JPY",
        "originating_account_id": originating, "receiving_account_id": receiving});
    let order = created(&server, &key, "/api/payment_orders", body).await;
    let id = order["id"].as_str().unwrap();
    let expected = json!({"type": "cross_border", "amount": 500, "currency": "JPY", "direction": "debit", "status": "approved",
        "priority": "high", "originating_account_id": originating, "receiving_account_id": receiving, "counterparty_id": null});
    for (field, value) in expected.as_object().unwrap() {
        assert_eq!(&order[field], value, "{field}");
    }
    let read = json(server.get(&format!("/api/payment_orders/{id}"), &key).send().await.unwrap()).await.1;
    assert_eq!(read.to_string(), order.to_string(), "read back byte for byte");
    let listed = json(server.get("/api/payment_orders?type=cross_border&direction=debit&priority=high&status=approved", &key).send().await.unwrap()).await.1;
    assert_eq!(listed, json!([order.clone()]));
    let events = json(server.get(&format!("/api/events?entity_id={id}"), &key).send().await.unwrap()).await.1;
    assert_eq!(events[0]["data"], order);
}

/// E3: the sandbox bank's return carries the order's amount and currency as before.
#[tokio::test]
async fn e3_sandbox_return_keeps_amount_and_currency() {
    let server = TestServer::start_with(|c| c.sandbox_step_ms = 0).await;
    let key = server.key().await;
    let (originating, _) = accounts(&server, &key, "EUR").await;
    // SEPA carries an IBAN and a BIC (SPEC B3).
    let iban = json!({"name": "Lieferant", "accounts": [{
        "account_details": [{"account_number": "DE89370400440532013000", "account_number_type": "iban"}],
        "routing_details": [{"routing_number": "COBADEFFXXX", "routing_number_type": "swift"}]
    }]});
    let receiving = created(&server, &key, "/api/counterparties", iban).await["accounts"][0]["id"].as_str().unwrap().to_owned();
    let order = created(&server, &key, "/api/payment_orders", with(&order(&originating, &receiving), json!({"amount": 4040, "type": "sepa"}))).await;
    let id = order["id"].as_str().unwrap();
    let mut returned = Value::Null;
    for _ in 0..200 {
        returned = json(server.get(&format!("/api/payment_orders/{id}"), &key).send().await.unwrap()).await.1;
        if returned["status"] == "returned" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(returned["status"], "returned", "{returned}");
    let ret = &returned["current_return"];
    assert_eq!((ret["amount"].as_i64(), ret["currency"].as_str(), ret["type"].as_str()), (Some(4040), Some("EUR"), Some("sepa")));
    assert_eq!((ret["internal_account_id"].as_str(), ret["returnable_id"].as_str()), (Some(originating.as_str()), Some(id)));
}
}
