//! SQL helpers both stores use: nothing here knows which database runs the statement.

/// A kind as people read it: `external_account` -> `external account`.
pub fn kind_str(kind: &str) -> String {
    kind.replace('_', " ")
}

/// `text` with LIKE's wildcards (`%`, `_`) and the escape character made literal; both stores
/// write `LIKE ... ESCAPE '\\'`.
pub fn escape_like(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
