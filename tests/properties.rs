//! Issue 8: properties of the parsers and of the payment order state machine, checked with
//! proptest over generated inputs (256 cases each by default; `PROPTEST_CASES` raises it).
//!
//! - Authorization (SPEC A1, A2): `Basic base64(user:password)` round-trips; other schemes,
//!   oversized and garbage values are refused, never a panic.
//! - Idempotency-Key (I1): accepted exactly when 1 to 255 visible ASCII characters.
//! - Query strings (L2): form-decoding inverts form-encoding (`+` is a space); the last value
//!   of a name wins; `metadata[key]=value` pairs come out in order.
//! - Money and dates (E2): amounts from 1 to 2^53-1 only; dates exactly the real YYYY-MM-DD days.
//! - Metadata: accepted exactly within the documented limits; PATCH merges set, remove, keep.
//! - JSON depth: the pre-parse check agrees with the depth of the parsed value, strings included.
//! - Payment order status (E3): no sequence of client and bank requests leaves the table, final
//!   states stay final, `cancelled` only before processing.

use std::collections::BTreeMap;

use axum::http::{HeaderMap, HeaderValue, header};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use payrail::domain::payment_order::AMOUNT_MAX;
use payrail::domain::payment_order::ops;
use payrail::domain::payment_order::status::{self, Actor, Status};
use payrail::domain::validate::{self, METADATA_KEY_LEN_MAX, METADATA_PAIRS_MAX, METADATA_VALUE_LEN_MAX, Metadata, MetadataPatch};
use payrail::error::Error;
use payrail::http::auth::basic_credentials;
use payrail::http::extract::{JSON_DEPTH_MAX, QueryParams, nests_deeper_than, parse_json};
use payrail::http::idempotency::{KEY_LEN_MAX, parse_key};
use proptest::prelude::*;
use serde_json::Value;

fn authorization(value: &[u8]) -> Option<HeaderMap> {
    let value = HeaderValue::from_bytes(value).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(header::AUTHORIZATION, value);
    Some(headers)
}

fn scheme() -> impl Strategy<Value = String> {
    prop_oneof![Just("Basic".to_owned()), Just("basic".to_owned()), Just("BASIC".to_owned()), Just("bAsIc".to_owned())]
}

proptest! {
    /// A1: what a client encodes is what the server reads, whatever the password holds.
    #[test]
    fn a1_basic_credentials_round_trip(user in "[^:\r\n]{0,24}", password in "\\PC{0,64}", scheme in scheme(), pad in " {0,3}") {
        let encoded = STANDARD.encode(format!("{user}:{password}"));
        let headers = authorization(format!("{pad}{scheme} {encoded}{pad}").as_bytes());
        prop_assume!(headers.is_some());
        prop_assert_eq!(basic_credentials(&headers.unwrap()), Some((user, password)));
    }

    /// A2: any other scheme is refused, whatever follows it.
    #[test]
    fn a2_other_schemes_are_refused(scheme in "[A-Za-z]{1,10}", rest in "[ -~]{0,64}") {
        prop_assume!(!scheme.eq_ignore_ascii_case("basic"));
        if let Some(headers) = authorization(format!("{scheme} {rest}").as_bytes()) {
            prop_assert_eq!(basic_credentials(&headers), None);
        }
    }

    /// A2: garbage never panics, and whatever is accepted really was `Basic` credentials.
    #[test]
    fn a2_garbage_never_panics(value in proptest::collection::vec(any::<u8>(), 0..1500)) {
        if let Some(headers) = authorization(&value)
            && let Some((user, password)) = basic_credentials(&headers) {
                prop_assert!(value.len() <= 1024);
                let text = String::from_utf8(value).expect("accepted headers are UTF-8");
                let (scheme, encoded) = text.trim().split_once(' ').expect("scheme and credentials");
                prop_assert!(scheme.eq_ignore_ascii_case("basic"));
                let decoded = STANDARD.decode(encoded.trim()).expect("valid base64");
                prop_assert_eq!(decoded, format!("{user}:{password}").into_bytes());
            }
    }

    /// A2: an oversized header is refused before it is decoded.
    #[test]
    fn a2_oversized_headers_are_refused(password_len in 800usize..2000) {
        let encoded = STANDARD.encode(format!("x-api-key:{}", "k".repeat(password_len)));
        let value = format!("Basic {encoded}");
        let headers = authorization(value.as_bytes()).expect("a valid header value");
        prop_assert_eq!(basic_credentials(&headers).is_some(), value.len() <= 1024);
    }

    /// I1: accepted exactly when 1 to 255 visible ASCII characters, and read unchanged.
    #[test]
    fn i1_idempotency_key_rule(bytes in prop_oneof![
        proptest::collection::vec(0x21u8..=0x7e, 0..300),
        proptest::collection::vec(any::<u8>(), 0..300),
    ]) {
        let Ok(value) = HeaderValue::from_bytes(&bytes) else { return Ok(()) };
        let visible = bytes.iter().all(|b| (0x21..=0x7e).contains(b));
        let valid = !bytes.is_empty() && bytes.len() <= KEY_LEN_MAX && visible;
        match parse_key(&value) {
            Ok(key) => {
                prop_assert!(valid);
                prop_assert_eq!(key.as_bytes(), &bytes[..]);
            }
            Err(Error::BadRequest { parameter, .. }) => {
                prop_assert!(!valid);
                prop_assert_eq!(parameter.as_deref(), Some("Idempotency-Key"));
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    /// L2: form-decoding inverts form-encoding (spaces travel as `+`), for any names and values.
    #[test]
    fn l2_query_strings_round_trip(pairs in proptest::collection::vec(("\\PC{0,12}", "\\PC{0,24}"), 0..12)) {
        let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs.iter()).finish();
        let parsed = QueryParams::parse(Some(&query));
        prop_assert_eq!(&parsed.0, &pairs);
        for (name, _) in &pairs {
            let last = pairs.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
            prop_assert_eq!(parsed.get(name), last);
        }
    }

    /// L2: `metadata[key]=value` pairs, and only they, come out of `metadata()`, in order.
    #[test]
    fn l2_metadata_filters(pairs in proptest::collection::vec((any::<bool>(), "[^\\]]{0,10}", "\\PC{0,12}"), 0..10)) {
        let raw: Vec<(String, String)> = pairs
            .iter()
            .map(|(is_meta, key, value)| (if *is_meta { format!("metadata[{key}]") } else { format!("x{key}") }, value.clone()))
            .collect();
        let query = form_urlencoded::Serializer::new(String::new()).extend_pairs(raw.iter()).finish();
        let expected: Vec<(String, String)> =
            pairs.iter().filter(|(is_meta, _, _)| *is_meta).map(|(_, k, v)| (k.clone(), v.clone())).collect();
        prop_assert_eq!(QueryParams::parse(Some(&query)).metadata(), expected);
    }

    /// Arbitrary query text never panics.
    #[test]
    fn l2_any_query_text_parses(text in "\\PC{0,200}") {
        let parsed = QueryParams::parse(Some(&text));
        let _ = parsed.metadata();
        let _ = parsed.get("per_page");
    }

    /// E2: an amount is accepted exactly from 1 to 2^53 - 1, and kept as given.
    #[test]
    fn e2_amount_bounds(value in prop_oneof![any::<i64>(), -5i64..5, (AMOUNT_MAX - 5)..=(AMOUNT_MAX + 5)]) {
        match ops::amount("amount", value) {
            Ok(kept) => {
                prop_assert!((1..=AMOUNT_MAX).contains(&value));
                prop_assert_eq!(kept, value);
            }
            Err(Error::Invalid { parameter, .. }) => {
                prop_assert!(!(1..=AMOUNT_MAX).contains(&value));
                prop_assert_eq!(parameter, "amount");
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    /// E2: every real calendar day written YYYY-MM-DD is a date, and comes back unchanged.
    #[test]
    fn e2_real_days_are_dates(year in 1i32..=9999, ordinal in 1u16..=366) {
        let Ok(day) = time::Date::from_ordinal_date(year, ordinal) else { return Ok(()) };
        let text = format!("{:04}-{:02}-{:02}", day.year(), u8::from(day.month()), day.day());
        prop_assert_eq!(ops::date("effective_date", &text).ok(), Some(text));
    }

    /// E2: whatever is accepted as a date is exactly a real day in YYYY-MM-DD form.
    #[test]
    fn e2_only_real_days_are_dates(text in prop_oneof![
        "\\PC{0,12}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "[0-9]{1,5}-[0-9]{1,2}-[0-9]{1,3}",
    ]) {
        if let Ok(kept) = ops::date("effective_date", &text) {
            prop_assert_eq!(&kept, &text);
            let b = text.as_bytes();
            prop_assert!(b.len() == 10 && b[4] == b'-' && b[7] == b'-');
            let (y, m, d) = (text[..4].parse::<i32>().unwrap(), text[5..7].parse::<u8>().unwrap(), text[8..].parse::<u8>().unwrap());
            let month = time::Month::try_from(m).expect("a real month");
            prop_assert!(time::Date::from_calendar_date(y, month, d).is_ok());
        }
    }

    /// Metadata is accepted exactly within its limits (pairs, key and value lengths).
    #[test]
    fn metadata_limits(map in proptest::collection::btree_map("(\\PC|\u{0}){0,104}", "(\\PC|\u{0}){0,504}", 0..(METADATA_PAIRS_MAX + 4))) {
        let within = map.len() <= METADATA_PAIRS_MAX
            && map.iter().all(|(k, v)| {
                (1..=METADATA_KEY_LEN_MAX).contains(&k.chars().count())
                    && v.chars().count() <= METADATA_VALUE_LEN_MAX
                    && !k.contains('\0')
                    && !v.contains('\0')
            });
        match validate::metadata("metadata", Some(&map)) {
            Ok(kept) => {
                prop_assert!(within);
                prop_assert_eq!(kept, map);
            }
            Err(Error::Invalid { parameter, .. }) => {
                prop_assert!(!within);
                prop_assert!(parameter.starts_with("metadata"));
            }
            Err(other) => prop_assert!(false, "unexpected error {other:?}"),
        }
    }

    /// A PATCH's metadata sets keys given a value, removes keys given null or "", keeps the rest.
    #[test]
    fn metadata_patch_merges(
        current in proptest::collection::btree_map("[a-e]{1,2}", "[a-z]{0,3}", 0..8),
        patch in proptest::collection::btree_map("[a-e]{1,2}", proptest::option::of("[a-z]{0,3}"), 0..8),
    ) {
        let current: Metadata = current;
        let patch: MetadataPatch = patch;
        let merged = validate::merge_metadata("metadata", &current, &patch).expect("small maps are valid");
        let mut expected: BTreeMap<String, String> = current.clone();
        for (key, value) in &patch {
            match value.as_deref() {
                None | Some("") => expected.remove(key),
                Some(v) => expected.insert(key.clone(), v.to_owned()),
            };
        }
        prop_assert_eq!(merged, expected);
    }

    /// The depth check agrees with the depth of the value the text parses to, however strings
    /// full of brackets, quotes and escapes are mixed in.
    #[test]
    fn json_depth_check_matches_the_parsed_depth(value in json_value(), limit in 0usize..12) {
        let text = serde_json::to_string(&value).unwrap();
        prop_assert_eq!(nests_deeper_than(text.as_bytes(), limit), depth(&value) > limit);
    }

    /// Bodies nested deeper than the limit are refused (400) before parsing; others are not.
    #[test]
    fn json_depth_limit_is_enforced(levels in (JSON_DEPTH_MAX - 3)..(JSON_DEPTH_MAX + 4), filler in "[\\[\\]{}\"a]{0,6}") {
        // `{"a": [[...[ "filler" ]...]]}`: the object is one level, the arrays the others.
        let arrays = levels - 1;
        let text = format!("{{\"a\":{}{}{}}}", "[".repeat(arrays), serde_json::to_string(&filler).unwrap(), "]".repeat(arrays));
        let parsed = parse_json::<Value>(text.as_bytes());
        if levels > JSON_DEPTH_MAX {
            prop_assert!(matches!(parsed, Err(Error::BadRequest { .. })), "{levels} levels are refused");
        } else {
            prop_assert!(parsed.is_ok(), "{levels} levels are accepted");
        }
    }
}

/// JSON values with strings that look like structure.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(Value::from),
        "[\\[\\]{}\"\\\\a-z ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(10, 64, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec(("[\\[\\]{}\"a-z]{0,4}", inner), 0..4).prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// Nesting depth of arrays and objects (a scalar is 0).
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

// ---- the payment order state machine (SPEC E3) ------------------------------------------------

/// The table of `status.rs`'s documentation, written out again as the oracle.
fn table_allows(from: Status, to: Status, actor: Actor) -> bool {
    use Status::*;
    let allowed: &[Status] = match (from, actor) {
        (Pending, Actor::Client) => &[Approved, NeedsApproval, Cancelled],
        (Pending, Actor::Bank) => &[Approved],
        (NeedsApproval, Actor::Client) => &[Approved, Cancelled],
        (NeedsApproval, Actor::Bank) => &[Denied],
        (Approved, Actor::Client) => &[NeedsApproval, Cancelled],
        (Approved, Actor::Bank) => &[Processing, Held],
        (Held, Actor::Client) => &[Cancelled],
        (Held, Actor::Bank) => &[Approved, Stopped],
        (Processing, Actor::Bank) => &[Sent, Failed],
        (Sent, Actor::Bank) => &[Completed, Failed, Returned],
        (Completed, Actor::Bank) => &[Returned, Reversed],
        _ => &[],
    };
    allowed.contains(&to)
}

fn is_final(s: Status) -> bool {
    matches!(s, Status::Cancelled | Status::Denied | Status::Failed | Status::Returned | Status::Reversed | Status::Stopped)
}

/// Processing has started: the money is moving or has moved.
fn has_started_processing(s: Status) -> bool {
    matches!(s, Status::Processing | Status::Sent | Status::Completed | Status::Failed | Status::Returned | Status::Reversed)
}

fn request() -> impl Strategy<Value = (Actor, Status)> {
    (prop_oneof![Just(Actor::Client), Just(Actor::Bank)], proptest::sample::select(status::ALL.to_vec()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    /// E3: from the statuses an order is created in, no sequence of requests by clients and the
    /// bank moves it anywhere the table forbids; a refused move changes nothing and names
    /// `status`; a final status takes no move; `cancelled` is reached only before processing.
    #[test]
    fn e3_no_sequence_leaves_the_table(
        start in prop_oneof![Just(Status::Pending), Just(Status::Approved)],
        requests in proptest::collection::vec(request(), 0..40),
    ) {
        let mut current = start;
        let mut started = has_started_processing(current);
        for (actor, to) in requests {
            let before = current;
            match current.transition(to, actor) {
                Ok(next) => {
                    prop_assert_eq!(next, to);
                    prop_assert!(table_allows(before, to, actor), "{before} -> {to} by {actor:?} is not in the table");
                    prop_assert!(!is_final(before), "{before} is final, yet moved to {to}");
                    if to == Status::Cancelled {
                        prop_assert_eq!(actor, Actor::Client);
                        prop_assert!(!started, "cancelled after processing started");
                        prop_assert!(before.is_editable() || before == Status::Held);
                    }
                    current = next;
                }
                Err(Error::Invalid { parameter, .. }) => {
                    prop_assert!(!table_allows(before, to, actor), "{before} -> {to} by {actor:?} is in the table, yet refused");
                    prop_assert_eq!(parameter, "status");
                }
                Err(other) => prop_assert!(false, "unexpected error {other:?}"),
            }
            started |= has_started_processing(current);
            if is_final(before) {
                prop_assert_eq!(current, before, "final states stay final");
            }
        }
    }

    /// E3: clients only ever ask for approval states and cancellation; everything else is the
    /// bank's, and once processing has started a client can move nothing.
    #[test]
    fn e3_clients_cannot_drive_processing(from in proptest::sample::select(status::ALL.to_vec()), to in proptest::sample::select(status::ALL.to_vec())) {
        if from.transition(to, Actor::Client).is_ok() {
            prop_assert!(matches!(to, Status::Approved | Status::NeedsApproval | Status::Cancelled));
            prop_assert!(!has_started_processing(from));
        }
    }
}
