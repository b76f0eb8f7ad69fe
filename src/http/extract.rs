//! Request extractors that fail in the contract's words: JSON bodies (400 malformed, 413 too
//! large, 415 wrong type, 422 naming the bad field), form-decoded query strings, path ids.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::header;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::app::AppState;
use crate::error::Error;

/// A JSON request body, deserialised into `T`. Unknown fields are ignored (newer SDKs send
/// fields this server does not know yet).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = Error;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let content_type = request.headers().get(header::CONTENT_TYPE).cloned();
        if let Some(coding) = request.headers().get(header::CONTENT_ENCODING).filter(|v| !is_identity(v.as_bytes())) {
            // Read as JSON, an encoded body would be a confusing 400; HTTP's answer is 415.
            return Err(Error::UnsupportedMediaType {
                message: format!(
                    "Request bodies are read as sent: Content-Encoding {} is not supported; send the body unencoded.",
                    String::from_utf8_lossy(coding.as_bytes()).trim()
                ),
            });
        }
        let bytes = read_body(request.into_body(), state.config.body_limit_bytes).await?;
        if bytes.is_empty() && content_type.is_none() {
            return parse_json::<T>(b"{}").map(JsonBody);
        }
        if !content_type.as_ref().and_then(|v| v.to_str().ok()).is_some_and(is_json) {
            return Err(Error::UnsupportedMediaType {
                message: "Request bodies must be JSON: send Content-Type: application/json.".into(),
            });
        }
        parse_json::<T>(&bytes).map(JsonBody)
    }
}

fn is_identity(coding: &[u8]) -> bool {
    let coding = coding.trim_ascii();
    coding.is_empty() || coding.eq_ignore_ascii_case(b"identity")
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A whole request body, at most `limit_bytes` of it (413 past that, naming the limit).
pub async fn read_body(body: Body, limit_bytes: usize) -> Result<Bytes, Error> {
    axum::body::to_bytes(body, limit_bytes).await.map_err(|err| {
        let too_large = std::error::Error::source(&err).is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
        if too_large {
            Error::PayloadTooLarge { limit_bytes }
        } else {
            Error::bad_request("invalid_request", "The request body could not be read.", None)
        }
    })
}

/// Deepest nesting of arrays and objects a body may have; real requests need 4 or 5.
pub const JSON_DEPTH_MAX: usize = 32;

/// Whether the JSON text nests deeper than `limit` (strings are skipped, escapes honoured).
pub fn nests_deeper_than(bytes: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// Parses JSON text: 400 if it is not JSON, 422 naming the field if it does not fit `T`.
/// Deserialises straight into `T` (no intermediate tree); serde tells syntax from data errors.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, Error> {
    if nests_deeper_than(bytes, JSON_DEPTH_MAX) {
        return Err(Error::bad_request("malformed_json", format!("The request body nests deeper than {JSON_DEPTH_MAX} levels."), None));
    }
    let text: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) { b"{}" } else { bytes };
    if text.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Error::bad_request("malformed_json", "The request body must be a JSON object.", None));
    }
    let malformed =
        |err: serde_json::Error| Error::bad_request("malformed_json", format!("The request body is not valid JSON: {err}."), None);
    let mut deserializer = serde_json::Deserializer::from_slice(text);
    let parsed = serde_path_to_error::deserialize(&mut deserializer);
    if parsed.is_ok() {
        deserializer.end().map_err(malformed)?;
        // Typed fields refuse a repeated key; the parts read as free JSON (metadata, balance
        // conditions, an inline ledger transaction) would keep its last value in silence, which
        // can loosen a guard the client wrote first. So every object is checked, at any depth.
        let mut deserializer = serde_json::Deserializer::from_slice(text);
        serde_path_to_error::deserialize::<_, UniqueKeys>(&mut deserializer).map_err(|err| field_error(err, malformed))?;
    }
    parsed.map_err(|err| field_error(err, malformed))
}

/// A serde error in the contract's words: 400 when the text is not JSON, else 422 naming the
/// field at fault (a missing or repeated one by its own name).
fn field_error(err: serde_path_to_error::Error<serde_json::Error>, malformed: impl Fn(serde_json::Error) -> Error) -> Error {
    let path = err.path().to_string();
    let inner = err.into_inner();
    if matches!(inner.classify(), serde_json::error::Category::Syntax | serde_json::error::Category::Eof | serde_json::error::Category::Io)
    {
        return malformed(inner);
    }
    let message = inner.to_string();
    let inner = strip_position(&message);
    // serde reports a missing field at the parent's path; name the field itself.
    let field_of = |prefix: &str| inner.strip_prefix(prefix).and_then(|rest| rest.split('`').next());
    let under = |field: &str| if path == "." { field.to_owned() } else { format!("{path}.{field}") };
    if let Some(field) = field_of("missing field `") {
        return Error::missing(under(field));
    }
    if let Some(field) = field_of("duplicate field `") {
        // A repeated key may be reported at the object's path or, once its key is read, at its own.
        let parameter = if path == field || path.ends_with(&format!(".{field}")) { path.clone() } else { under(field) };
        return Error::invalid(parameter.clone(), format!("{parameter} is given twice; give it once"));
    }
    let parameter = if path == "." { "body".to_owned() } else { path };
    Error::invalid(parameter.clone(), format!("{parameter} is invalid: {}", in_json_words(inner)))
}

/// Any JSON value whose objects, at every depth, name each key once.
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(UniqueKeysVisitor)
    }
}

struct UniqueKeysVisitor;

impl<'de> serde::de::Visitor<'de> for UniqueKeysVisitor {
    type Value = UniqueKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }
    fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
        Ok(UniqueKeys)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
        while seq.next_element::<UniqueKeys>()?.is_some() {}
        Ok(UniqueKeys)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate field `{key}`")));
            }
            map.next_value::<UniqueKeys>()?;
        }
        Ok(UniqueKeys)
    }
}

/// serde names what it expected in Rust's words (`struct EntryInput`, `i64`, `a sequence`);
/// a client thinks in JSON's, and Payrail's type names are nobody's business.
fn in_json_words(message: &str) -> String {
    let message =
        message.replacen("invalid type: map", "invalid type: object", 1).replacen("invalid type: sequence", "invalid type: array", 1);
    let Some((head, expected)) = message.rsplit_once("expected ") else { return message };
    let json = match expected.trim() {
        e if e.starts_with("struct ") || e == "a map" => "an object",
        "a sequence" => "an array",
        "i8" | "i16" | "i32" | "i64" | "i128" | "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a borrowed string" | "a string" => "a string",
        "a boolean" => "true or false",
        _ => return message,
    };
    format!("{head}expected {json}")
}

/// serde_json appends " at line L column C" to data errors; the parameter already says where.
fn strip_position(message: &str) -> &str {
    message.rsplit_once(" at line ").map_or(message, |(head, _)| head)
}

/// A query string, form-decoded (`+` is a space, SPEC L2). Unknown parameters are ignored.
#[derive(Debug, Default, Clone)]
pub struct QueryParams(pub Vec<(String, String)>);

impl QueryParams {
    pub fn parse(query: Option<&str>) -> Self {
        QueryParams(form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned().collect())
    }

    /// The last value given for `name`, if any (a later value overrides an earlier one).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// Every value of `name` given as `name[]=v` or `name=v` (the SDKs send lists both ways).
    pub fn all(&self, name: &str) -> Vec<String> {
        let listed = format!("{name}[]");
        self.0.iter().filter(|(k, _)| *k == listed || k == name).map(|(_, v)| v.clone()).collect()
    }

    /// Every value of `name` given as [`all`](Self::all) reads it or as `name[KEY]=v`: MT's
    /// deep-object form (`id[0]=a&id[1]=b`), which the SDKs send for a map of ids.
    pub fn all_keyed(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| {
                k == name || k.strip_prefix(name).and_then(|rest| rest.strip_prefix('[')).is_some_and(|rest| rest.ends_with(']'))
            })
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Every `metadata[key]=value` pair, in order.
    pub fn metadata(&self) -> Vec<(String, String)> {
        self.0
            .iter()
            .filter_map(|(k, v)| {
                let key = k.strip_prefix("metadata[")?.strip_suffix(']')?;
                Some((key.to_owned(), v.clone()))
            })
            .collect()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let query = QueryParams::parse(parts.uri.query());
        // A NUL can match nothing stored, and PostgreSQL refuses it in text: 422, on every store.
        if let Some((name, _)) = query.0.iter().find(|(k, v)| k.contains('\0') || v.contains('\0')) {
            let name = name.replace('\0', "");
            return Err(Error::invalid(name.clone(), format!("{name} must not contain NUL characters")));
        }
        Ok(query)
    }
}

/// The operators of the range filters lists take as `name[op]=value` (MT's deep-object
/// parameters).
const RANGE_OPERATORS: &[&str] = &["gt", "gte", "lt", "lte", "eq"];

/// Refuses a range filter of `filters` (the ones the list takes) with an operator it does not
/// have (`effective_at[gtee]`): the filter is known, so ignoring the typo would answer a page it
/// did not narrow. 422 naming it. On a list that takes no such filter, `name[...]` is an unknown
/// parameter, ignored whatever its operator (SPEC L2).
pub fn unknown_operator(query: &QueryParams, filters: &[&str]) -> Result<(), Error> {
    for (key, _) in &query.0 {
        let Some((base, rest)) = key.split_once('[') else { continue };
        if !filters.contains(&base) {
            continue;
        }
        let op = rest.strip_suffix(']').unwrap_or(rest);
        if !RANGE_OPERATORS.contains(&op) {
            return Err(Error::invalid(key.clone(), format!("{key}: {base} takes the operators gt, gte, lt, lte and eq")));
        }
    }
    Ok(())
}

/// The `{id}` segment of a path. An id that cannot name anything is simply not found.
#[derive(Debug)]
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(id) = Path::<String>::from_request_parts(parts, state).await.map_err(|_| path_not_found())?;
        Ok(PathId(path_id(id)?))
    }
}

/// What a path that names nothing answers.
pub fn path_not_found() -> Error {
    Error::NotFound { message: "resource not found".into() }
}

/// A path's id, or not found when it holds a control character, which no id does (and
/// PostgreSQL's text refuses a NUL outright).
pub fn path_id(id: String) -> Result<String, Error> {
    if id.chars().any(char::is_control) { Err(path_not_found()) } else { Ok(id) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l3_a_body_that_does_not_fit_is_refused_in_json_s_words_not_rust_s() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct EntryInput {
            amount: i64,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct Body {
            ledger_entries: Vec<EntryInput>,
            flag: Option<bool>,
        }
        let message = |body: &str| match parse_json::<Body>(body.as_bytes()) {
            Err(Error::Invalid { parameter, message, .. }) => format!("{parameter}: {message}"),
            other => panic!("{body}: {other:?}"),
        };
        let said = message(r#"{"ledger_entries": [1]}"#);
        assert_eq!(said, "ledger_entries[0]: ledger_entries[0] is invalid: invalid type: integer `1`, expected an object");
        let said = message(r#"{"ledger_entries": [{"amount": "5"}]}"#);
        assert_eq!(said, "ledger_entries[0].amount: ledger_entries[0].amount is invalid: invalid type: string \"5\", expected an integer");
        assert!(message(r#"{"ledger_entries": {}}"#).ends_with("invalid type: object, expected an array"));
        assert!(message(r#"{"ledger_entries": [{"amount": [1]}]}"#).ends_with("invalid type: array, expected an integer"));
        assert!(message(r#"{"ledger_entries": [], "flag": "yes"}"#).ends_with("expected true or false"));
        assert!(!message(r#"{"ledger_entries": [{"amount": 1.5}]}"#).contains("i64"));
    }

    #[test]
    fn l2_a_known_range_filter_with_an_unknown_operator_is_refused_naming_it() {
        let all = ["created_at", "updated_at", "effective_at", "effective_date", "version"];
        let refused = |q: &str| match unknown_operator(&QueryParams::parse(Some(q)), &all) {
            Err(Error::Invalid { parameter, .. }) => Some(parameter),
            _ => None,
        };
        assert_eq!(refused("effective_at%5Bgtee%5D=2024-01-01T00:00:00Z"), Some("effective_at[gtee]".into()));
        assert_eq!(refused("created_at[bogus]=x&per_page=2"), Some("created_at[bogus]".into()));
        assert_eq!(refused("version[]=3"), Some("version[]".into()));
        for fine in [
            "effective_at[gte]=x&created_at[lt]=y&version[eq]=1",
            "metadata[gtee]=x",
            "balances[effective_at]=x",
            "order_by[created_at]=desc",
            "nope[x]=1",
        ] {
            assert_eq!(refused(fine), None, "{fine}");
        }
        let ignored = unknown_operator(&QueryParams::parse(Some("created_at[gtee]=x&version[]=1")), &["effective_at"]);
        assert!(ignored.is_ok(), "filters a list does not take are unknown parameters, ignored");
    }

    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Input {
        name: String,
        amount: Option<i64>,
    }

    #[test]
    fn l3_malformed_json_is_400_and_bad_field_is_422_naming_it() {
        assert!(matches!(parse_json::<Input>(b"{"), Err(Error::BadRequest { .. })));
        assert!(matches!(parse_json::<Input>(b"[1]"), Err(Error::BadRequest { .. })));
        match parse_json::<Input>(br#"{"name":"a","amount":"ten"}"#) {
            Err(Error::Invalid { parameter, .. }) => assert_eq!(parameter, "amount"),
            other => panic!("{other:?}"),
        }
        match parse_json::<Input>(br#"{"amount":1}"#) {
            Err(Error::Invalid { parameter, code, .. }) => assert_eq!((parameter.as_str(), code), ("name", "parameter_missing")),
            other => panic!("{other:?}"),
        }
        assert!(parse_json::<Input>(br#"{"name":"a","unknown":true}"#).is_ok());
        match parse_json::<Input>(br#"{"name":"a","name":"b"}"#) {
            Err(Error::Invalid { parameter, .. }) => assert_eq!(parameter, "name", "a repeated field is named"),
            other => panic!("{other:?}"),
        }
        // Found by the re-audit: in the parts read as free JSON, a repeated key kept its last
        // value (a balance condition `{"gte":0,"gte":-100}` lost its guard).
        let nested = [
            (r#"{"name":"a","metadata":{"k":"1","k":"2"}}"#, "metadata.k"),
            (r#"{"name":"a","entries":[{"cond":{"gte":0,"gte":-100}}]}"#, "entries[0].cond.gte"),
            (r#"{"name":"a","extra":1,"extra":2}"#, "extra"),
        ];
        for (body, named) in nested {
            match parse_json::<Input>(body.as_bytes()) {
                Err(Error::Invalid { parameter, .. }) => assert_eq!(parameter, named, "{body}"),
                other => panic!("{body}: {other:?}"),
            }
        }
        assert!(parse_json::<Input>(br#"{"name":"a","metadata":{"k":"1","l":"1"},"list":[{"k":1},{"k":2}]}"#).is_ok());
    }

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let deep = format!("{}{}", "[".repeat(JSON_DEPTH_MAX + 1), "]".repeat(JSON_DEPTH_MAX + 1));
        assert!(nests_deeper_than(deep.as_bytes(), JSON_DEPTH_MAX));
        assert!(!nests_deeper_than(br#"{"a":"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"[["}"#, 2));
        assert!(matches!(parse_json::<serde_json::Value>(deep.as_bytes()), Err(Error::BadRequest { .. })));
    }

    #[test]
    fn l2_query_is_form_decoded() {
        let q = QueryParams::parse(Some("metadata%5Bteam%5D=a+b&metadata[x]=c%20d&name=z&name=y"));
        assert_eq!(q.metadata(), vec![("team".into(), "a b".into()), ("x".into(), "c d".into())]);
        assert_eq!(q.get("name"), Some("y"));
        assert_eq!(q.get("missing"), None);
    }

    #[test]
    fn l3_content_types() {
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(is_identity(b"identity") && is_identity(b" Identity ") && !is_identity(b"gzip"));
    }
}
