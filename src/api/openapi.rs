//! The OpenAPI 3.1 document of the API, generated from the code: every operation from the
//! `#[utoipa::path]` on its handler, every schema from the `#[derive(ToSchema)]` on the type
//! the handler serialises or deserialises. Nothing here lists fields or operations by hand.
//!
//! On top of what the annotations say, [`document`] applies the contract's rules that hold for
//! every operation, so they cannot be forgotten on one:
//! - HTTP basic authentication (SPEC A1) on every operation;
//! - the error responses (SPEC L3) each kind of operation can give, with the error body;
//! - `Idempotency-Key` on every POST (SPEC I1), `Idempotent-Replayed` on its success (I4);
//! - `X-After-Cursor` and `X-Per-Page` on every list (SPEC L1);
//! - every field of every response object is `required` (always emitted, `null` when empty),
//!   as the official SDK's strict validation expects.
//!
//! Served on the admin listener at `/openapi.json` and printed by `payrail openapi`.

use std::collections::{BTreeSet, VecDeque};

use serde_json::{Map, Value, json};
use utoipa::OpenApi;

use super::{
    api_keys, balance_reports, connections, counterparties, events, expected_payments, external_accounts, incoming_payment_details,
    internal_accounts, ledger_account_balance_monitors, ledger_account_categories, ledger_account_settlements, ledger_account_statements,
    ledger_accounts, ledger_entries, ledger_transactions, ledgers, payment_orders, ping, returns, transactions, webhook_endpoints,
};
use crate::http::error::Body as ErrorBody;
use crate::http::idempotency::KEY_LEN_MAX;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Payrail",
        description = "A self-hostable payments API server speaking the Modern Treasury wire format. \
                       Authenticate with HTTP basic: user name `x-api-key`, password the API key.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        ping::ping,
        api_keys::current,
        counterparties::list,
        counterparties::create,
        counterparties::retrieve,
        counterparties::update,
        counterparties::delete,
        external_accounts::list,
        external_accounts::create,
        external_accounts::retrieve,
        external_accounts::update,
        external_accounts::delete,
        internal_accounts::list,
        internal_accounts::create,
        internal_accounts::retrieve,
        internal_accounts::update,
        balance_reports::list,
        balance_reports::retrieve,
        connections::list,
        payment_orders::list,
        payment_orders::create,
        payment_orders::retrieve,
        payment_orders::update,
        transactions::list,
        transactions::retrieve,
        transactions::update,
        transactions::line_items_of,
        transactions::list_line_items,
        transactions::retrieve_line_item,
        returns::list,
        returns::retrieve,
        expected_payments::list,
        expected_payments::create,
        expected_payments::retrieve,
        expected_payments::update,
        expected_payments::delete,
        incoming_payment_details::list,
        incoming_payment_details::retrieve,
        incoming_payment_details::update,
        incoming_payment_details::simulate,
        ledgers::list,
        ledgers::create,
        ledgers::retrieve,
        ledgers::update,
        ledgers::delete,
        ledger_accounts::list,
        ledger_accounts::create,
        ledger_accounts::retrieve,
        ledger_accounts::update,
        ledger_accounts::delete,
        ledger_account_balance_monitors::list,
        ledger_account_balance_monitors::create,
        ledger_account_balance_monitors::retrieve,
        ledger_account_balance_monitors::update,
        ledger_account_balance_monitors::delete,
        ledger_account_settlements::list,
        ledger_account_settlements::create,
        ledger_account_settlements::retrieve,
        ledger_account_settlements::update,
        ledger_account_settlements::add_entries,
        ledger_account_settlements::remove_entries,
        ledger_account_categories::list,
        ledger_account_categories::create,
        ledger_account_categories::retrieve,
        ledger_account_categories::update,
        ledger_account_categories::delete,
        ledger_account_categories::add_account,
        ledger_account_categories::remove_account,
        ledger_account_categories::nest,
        ledger_account_categories::unnest,
        ledger_account_statements::create,
        ledger_account_statements::retrieve,
        ledger_transactions::list,
        ledger_transactions::create,
        ledger_transactions::retrieve,
        ledger_transactions::update,
        ledger_transactions::reversal,
        ledger_transactions::versions_of,
        ledger_transactions::versions,
        ledger_entries::list,
        ledger_entries::retrieve,
        ledger_entries::update,
        events::list,
        events::retrieve,
        webhook_endpoints::list,
        webhook_endpoints::create,
        webhook_endpoints::retrieve,
        webhook_endpoints::delete,
        webhook_endpoints::deliveries,
        webhook_endpoints::delivery,
        webhook_endpoints::resend,
    ),
    components(schemas(ErrorBody))
)]
struct ApiDoc;

/// The name of the security scheme every operation requires.
pub const SECURITY_SCHEME: &str = "basic_auth";

/// The document, as JSON.
pub fn document() -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    unraw_schema_names(&mut doc);
    add_security(&mut doc);
    add_shared_responses(&mut doc);
    for (path, method, operation) in operations(&mut doc) {
        add_operation_rules(&path, &method, operation);
    }
    add_links(&mut doc);
    require_every_response_field(&mut doc);
    doc
}

/// The document as pretty-printed JSON text, with a final newline.
pub fn json() -> String {
    let mut text = serde_json::to_string_pretty(&document()).expect("the OpenAPI document serialises");
    text.push('\n');
    text
}

/// Schemas named after a Rust keyword are declared `as = r#return`: publish them as `return`.
fn unraw_schema_names(doc: &mut Value) {
    const RAW: &str = "r#";
    const PREFIX: &str = "#/components/schemas/";
    if let Some(schemas) = doc["components"]["schemas"].as_object_mut() {
        let raw: Vec<String> = schemas.keys().filter(|k| k.starts_with(RAW)).cloned().collect();
        for name in raw {
            if let Some(schema) = schemas.remove(&name) {
                schemas.insert(name[RAW.len()..].to_owned(), schema);
            }
        }
    }
    fn fix_refs(value: &mut Value) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(target)) = map.get_mut("$ref")
                    && let Some(name) = target.strip_prefix(PREFIX).and_then(|n| n.strip_prefix(RAW))
                {
                    *target = format!("{PREFIX}{name}");
                }
                map.values_mut().for_each(fix_refs);
            }
            Value::Array(items) => items.iter_mut().for_each(fix_refs),
            _ => {}
        }
    }
    fix_refs(doc);
}

fn add_security(doc: &mut Value) {
    doc["components"]["securitySchemes"] = json!({
        SECURITY_SCHEME: {
            "type": "http",
            "scheme": "basic",
            "description": "User name `x-api-key` (or the key's organization id), password the API key."
        }
    });
    doc["security"] = json!([{ SECURITY_SCHEME: [] }]);
}

/// An error response: the contract's body, and the headers it may carry.
fn error_response(description: &str, headers: Value) -> Value {
    let mut response = json!({
        "description": description,
        "content": { "application/json": { "schema": { "$ref": "#/components/schemas/error_message" } } },
    });
    if headers.as_object().is_some_and(|h| !h.is_empty()) {
        response["headers"] = headers;
    }
    response
}

fn header(description: &str, schema: Value) -> Value {
    json!({ "description": description, "schema": schema })
}

fn add_shared_responses(doc: &mut Value) {
    let retry_after = || header("Seconds to wait before retrying.", json!({ "type": "integer", "minimum": 0 }));
    let should_retry =
        || header("`false` when retrying the same request cannot succeed (SPEC L4).", json!({ "type": "string", "enum": ["false"] }));
    doc["components"]["responses"] = json!({
        "bad_request": error_response("Malformed JSON, or a malformed header such as `Idempotency-Key`.", json!({})),
        "unauthorized": error_response(
            "Missing, malformed, unknown, revoked or expired credentials (`invalid_key`, `expired_key`).",
            json!({ "WWW-Authenticate": header("Always `Basic realm=\"payrail\"`.", json!({ "type": "string" })) }),
        ),
        "not_found": error_response("No such resource in this organization and mode.", json!({})),
        "conflict": error_response(
            "A request with the same `Idempotency-Key` is in flight (with `Retry-After`), or a concurrent change won.",
            json!({ "Retry-After": retry_after(), "x-should-retry": should_retry() }),
        ),
        "payload_too_large": error_response("The request body is larger than the server's limit.", json!({})),
        "unsupported_media_type": error_response("The request body is not `application/json`.", json!({})),
        "unprocessable_entity": error_response(
            "A parameter is missing or invalid; `parameter` names it.",
            json!({ "x-should-retry": should_retry() }),
        ),
        "too_many_requests": error_response("This API key's rate limit is exceeded.", json!({ "Retry-After": retry_after() })),
        "internal_server_error": error_response("The request failed on the server's side and was not carried out.", json!({})),
        "service_unavailable": error_response(
            "The request timed out or the store is unreachable; it was not carried out.",
            json!({ "Retry-After": retry_after() }),
        ),
    });
}

/// Every operation of the document: its path, its method and the operation object.
fn operations(doc: &mut Value) -> Vec<(String, String, &mut Map<String, Value>)> {
    let mut out = Vec::new();
    if let Some(paths) = doc["paths"].as_object_mut() {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else { continue };
            for (method, operation) in item.iter_mut() {
                if let Some(operation) = operation.as_object_mut() {
                    out.push((path.clone(), method.clone(), operation));
                }
            }
        }
    }
    out
}

/// Whether the operation's success answers a JSON array: a list (SPEC L1).
fn is_list(operation: &Map<String, Value>) -> bool {
    operation.get("responses").is_some_and(|r| r["200"]["content"]["application/json"]["schema"]["type"] == "array")
}

/// The shared error responses by status (see [`add_shared_responses`]).
const SHARED_ERRORS: &[(&str, &str)] = &[
    ("400", "bad_request"),
    ("401", "unauthorized"),
    ("404", "not_found"),
    ("409", "conflict"),
    ("413", "payload_too_large"),
    ("415", "unsupported_media_type"),
    ("422", "unprocessable_entity"),
    ("429", "too_many_requests"),
    ("500", "internal_server_error"),
    ("503", "service_unavailable"),
];

fn add_operation_rules(path: &str, method: &str, operation: &mut Map<String, Value>) {
    let list = is_list(operation);
    let mut statuses: Vec<&str> = vec!["401", "429", "500", "503"];
    if path.contains('{') {
        statuses.push("404");
    }
    match method {
        "post" | "patch" => statuses.extend(["400", "409", "413", "415", "422"]),
        "delete" => statuses.push("409"),
        "get" if list => statuses.push("422"),
        _ => {}
    }
    let responses = operation.entry("responses").or_insert_with(|| json!({}));
    for &(status, name) in SHARED_ERRORS {
        // An error a handler declares beyond its kind's (a refusal its `#[utoipa::path]` lists)
        // is published as the shared response of that status too, with the error body.
        if statuses.contains(&status) || responses.get(status).is_some() {
            responses[status] = json!({ "$ref": format!("#/components/responses/{name}") });
        }
    }
    if method == "post" {
        add_idempotency(operation);
    }
    if list {
        operation["responses"]["200"]["headers"] = json!({
            "X-After-Cursor": header(
                "Pass as `after_cursor` for the next page; empty on the last page.",
                json!({ "type": "string" }),
            ),
            "X-Per-Page": header("The page size in force.", json!({ "type": "integer", "minimum": 1 })),
        });
    }
}

/// `Idempotency-Key` on a POST (SPEC I1), and `Idempotent-Replayed` on its replayed success.
fn add_idempotency(operation: &mut Map<String, Value>) {
    let parameter = json!({
        "name": "Idempotency-Key",
        "in": "header",
        "required": false,
        "description": "Makes the POST safe to retry: a success is stored for 24 hours and replayed, \
                        byte for byte, to any later POST with the same key and API key (SPEC I).",
        "schema": { "type": "string", "minLength": 1, "maxLength": KEY_LEN_MAX, "pattern": "^[\\x21-\\x7e]+$" },
    });
    let parameters = operation.entry("parameters").or_insert_with(|| json!([]));
    if let Some(list) = parameters.as_array_mut() {
        list.push(parameter);
    }
    let Some(responses) = operation.get_mut("responses").and_then(Value::as_object_mut) else { return };
    for (status, response) in responses.iter_mut() {
        if status.starts_with('2') {
            response["headers"]["Idempotent-Replayed"] = header(
                "`true` when this is the stored reply to an earlier request with the same key.",
                json!({ "type": "string", "enum": ["true"] }),
            );
        }
    }
}

/// Links from each create (a POST answering 201) to the operations on what it made: every
/// operation under `<collection>/{id}` whose only path parameter is `id` takes the created
/// object's `id`. Clients and tools (schemathesis' stateful phase) follow them.
fn add_links(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object() else { return };
    let mut links: Vec<(String, String, String)> = Vec::new();
    for (collection, item) in paths {
        if item["post"]["responses"]["201"].is_null() {
            continue;
        }
        let prefix = format!("{collection}/{{id}}");
        for (path, target) in paths {
            let only_id = path.matches('{').count() == 1;
            if !(path == &prefix || (path.starts_with(&format!("{prefix}/")) && only_id)) {
                continue;
            }
            for operation in target.as_object().into_iter().flat_map(|o| o.values()) {
                if let Some(id) = operation["operationId"].as_str() {
                    links.push((collection.clone(), path.clone(), id.to_owned()));
                }
            }
        }
    }
    for (collection, _path, operation_id) in links {
        doc["paths"][&collection]["post"]["responses"]["201"]["links"][&operation_id] = json!({
            "operationId": operation_id,
            "parameters": { "id": "$response.body#/id" },
        });
    }
}

/// Marks every property of every object reachable from a response as required: Payrail always
/// emits every field, with `null`, `[]` or `{}` when it has no value.
fn require_every_response_field(doc: &mut Value) {
    let mut queue: VecDeque<String> = VecDeque::new();
    let mut roots = Vec::new();
    if let Some(paths) = doc["paths"].as_object() {
        for item in paths.values() {
            for operation in item.as_object().into_iter().flat_map(|o| o.values()) {
                for response in operation["responses"].as_object().into_iter().flat_map(|r| r.values()) {
                    roots.push(response["content"]["application/json"]["schema"].clone());
                }
            }
        }
    }
    for root in &roots {
        collect_refs(root, &mut queue);
    }
    let mut seen = BTreeSet::new();
    while let Some(name) = queue.pop_front() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let Some(schema) = doc["components"]["schemas"].get_mut(&name) else { continue };
        require_all(schema);
        let schema = schema.clone();
        collect_refs(&schema, &mut queue);
    }
}

/// Queues the component names `$ref`erenced anywhere inside `schema`.
fn collect_refs(schema: &Value, queue: &mut VecDeque<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(name) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/components/schemas/")) {
                queue.push_back(name.to_owned());
            }
            map.values().for_each(|v| collect_refs(v, queue));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, queue)),
        _ => {}
    }
}

/// Sets `required` to every property, in this object schema and every schema nested inline.
fn require_all(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else { return };
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
        map.insert("required".into(), Value::Array(names));
    }
    for key in ["properties"] {
        if let Some(children) = map.get_mut(key).and_then(Value::as_object_mut) {
            children.values_mut().for_each(require_all);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            require_all(child);
        }
    }
    for key in ["allOf", "oneOf", "anyOf"] {
        if let Some(children) = map.get_mut(key).and_then(Value::as_array_mut) {
            children.iter_mut().for_each(require_all);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_with_its_errors() {
        let doc = document();
        assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")));
        let paths = doc["paths"].as_object().expect("paths");
        for path in [
            "/api/ping",
            "/api/api_keys/current",
            "/api/counterparties",
            "/api/counterparties/{id}",
            "/api/external_accounts/{id}",
            "/api/internal_accounts/{id}",
            "/api/payment_orders/{id}",
            "/api/events/{id}",
            "/api/webhook_endpoints/{id}/deliveries/{delivery_id}/resend",
            "/api/connections",
            "/api/transactions/{id}/line_items",
            "/api/transaction_line_items/{id}",
            "/api/returns/{id}",
            "/api/expected_payments/{id}",
            "/api/incoming_payment_details/{id}",
            "/api/simulations/incoming_payment_details/create_async",
            "/api/internal_accounts/{id}/balance_reports/{report_id}",
            "/api/ledgers/{id}",
            "/api/ledger_accounts/{id}",
            "/api/ledger_account_balance_monitors/{id}",
            "/api/ledger_account_settlements/{id}",
            "/api/ledger_account_settlements/{id}/ledger_entries",
            "/api/ledger_account_categories/{id}",
            "/api/ledger_account_categories/{id}/ledger_accounts/{ledger_account_id}",
            "/api/ledger_account_categories/{id}/ledger_account_categories/{sub_category_id}",
            "/api/ledger_account_statements/{id}",
            "/api/ledger_transactions/{id}",
            "/api/ledger_transactions/{id}/reversal",
            "/api/ledger_transactions/{id}/versions",
            "/api/ledger_transaction_versions",
            "/api/ledger_entries",
            "/api/ledger_entries/{id}",
        ] {
            assert!(paths.contains_key(path), "{path} is documented");
        }
        let create = &doc["paths"]["/api/payment_orders"]["post"];
        assert_eq!(create["responses"]["422"]["$ref"], "#/components/responses/unprocessable_entity");
        assert!(create["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "Idempotency-Key"));
        let list = &doc["paths"]["/api/payment_orders"]["get"];
        assert!(list["responses"]["200"]["headers"]["X-After-Cursor"].is_object());
        assert_eq!(doc["components"]["securitySchemes"][SECURITY_SCHEME]["scheme"], "basic");
        let archive = &doc["paths"]["/api/expected_payments/{id}"]["delete"]["responses"];
        assert_eq!(archive["422"]["$ref"], "#/components/responses/unprocessable_entity", "a declared error is the shared one");
    }

    /// Every ledger route of `api::routes` (SPEC G1) is documented, with the filters its handler reads.
    #[test]
    fn g1_ledger_routes_are_documented_as_served() {
        let doc = document();
        let paths = doc["paths"].as_object().expect("paths");
        let ledger_operations: usize =
            paths.iter().filter(|(p, _)| p.starts_with("/api/ledger")).map(|(_, item)| item.as_object().unwrap().len()).sum();
        assert_eq!(ledger_operations, 42, "every ledger route and method");
        let names = |path: &str, method: &str| -> Vec<String> {
            doc["paths"][path][method]["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
        };
        let accounts = names("/api/ledger_accounts", "get");
        for name in ["id[]", "name[]", "ledger_id", "created_at", "metadata", "balances", "ledger_account_category_id"] {
            assert!(accounts.contains(&name.to_owned()), "ledger accounts are listed by {name}");
        }
        let balances =
            doc["paths"]["/api/ledger_accounts"]["get"]["parameters"].as_array().unwrap().iter().find(|p| p["name"] == "balances");
        assert_eq!(balances.unwrap()["style"], "deepObject");
        let entries = names("/api/ledger_entries", "get");
        for name in ["effective_at", "effective_date", "status[]", "show_balances", "ledger_account_statement_id", "order_by"] {
            assert!(entries.contains(&name.to_owned()), "ledger entries are listed by {name}");
        }
        assert!(!entries.contains(&"as_of_lock_version".to_owned()), "a filter Payrail refuses is not documented");
        let versions = names("/api/ledger_transaction_versions", "get");
        assert!(versions.contains(&"version".to_owned()) && versions.contains(&"ledger_transaction_id".to_owned()));
        let put = &doc["paths"]["/api/ledger_account_categories/{id}/ledger_accounts/{ledger_account_id}"]["put"];
        assert!(put["responses"]["200"]["content"].is_null(), "a membership change answers 200 without a body");
        assert_eq!(put["responses"]["422"]["$ref"], "#/components/responses/unprocessable_entity");
        let reversal = &doc["paths"]["/api/ledger_transactions/{id}/reversal"]["post"];
        assert!(reversal["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "Idempotency-Key"));
        let schemas = &doc["components"]["schemas"];
        for name in
            ["ledger_account", "ledger_transaction", "ledger_transaction_version", "ledger_transaction_create_request", "ledger_balances"]
        {
            assert!(schemas[name].is_object(), "{name} is published under MT's name");
        }
        let fields = |name: &str| schemas[name]["properties"].as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(fields("ledger_account_category_update_request"), fields("ledger_account_update_request"), "one PATCH, two names");
        assert!(
            schemas["ledger_transaction_update_request"]["properties"].get("ledger_entries").is_none(),
            "refused fields are not offered"
        );
    }

    #[test]
    fn response_fields_are_all_required_and_request_fields_are_not() {
        let doc = document();
        let order = &doc["components"]["schemas"]["payment_order"];
        let properties = order["properties"].as_object().unwrap();
        assert_eq!(order["required"].as_array().unwrap().len(), properties.len());
        assert!(properties.contains_key("type") && properties.contains_key("current_return"));
        let create = &doc["components"]["schemas"]["payment_order_create_request"];
        let required: Vec<&str> = create["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for field in ["type", "amount", "direction", "originating_account_id"] {
            assert!(required.contains(&field), "{field} is required");
        }
        assert!(!required.contains(&"description"));
        let accounts = &doc["components"]["schemas"]["counterparty"]["properties"]["accounts"]["items"]["properties"];
        assert!(accounts.get("counterparty_id").is_none() && accounts.get("party_name").is_some());
    }
}
