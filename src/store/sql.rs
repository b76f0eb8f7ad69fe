//! SQL helpers both stores use: nothing here knows which database runs the statement.

use super::PostingFilter;

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

/// The condition of [`Filter::Posting`](super::Filter::Posting) on `p` (the posting of `o`,
/// the listed entry, or of one of `o`'s entries when `of_parent`) and the values it binds in
/// order; `slot(i)` writes the placeholder of the `i`-th value. The status codes are this
/// release's constants, written into the SQL as numbers.
pub fn posting_condition(filter: &PostingFilter, of_parent: bool, mut slot: impl FnMut(usize) -> String) -> (String, Vec<PostingValue>) {
    let mut sql = String::from(if of_parent {
        " AND EXISTS (SELECT 1 FROM objects e JOIN ledger_postings p ON p.entry_id = e.id WHERE e.parent_id = o.id"
    } else {
        " AND EXISTS (SELECT 1 FROM ledger_postings p WHERE p.entry_id = o.id"
    });
    let mut values = Vec::new();
    let mut bind = |sql: &mut String, clause: &str, value: PostingValue| {
        values.push(value);
        sql.push_str(clause);
        sql.push_str(&slot(values.len()));
    };
    if let Some(account) = &filter.account_id {
        bind(&mut sql, " AND p.account_id = ", PostingValue::Text(account.clone()));
    }
    if let Some(debit) = filter.debit {
        bind(&mut sql, " AND p.debit = ", PostingValue::Bool(debit));
    }
    if let Some(from) = filter.effective_from {
        bind(&mut sql, " AND p.effective_at >= ", PostingValue::Int(from));
    }
    if let Some(to) = filter.effective_to {
        bind(&mut sql, " AND p.effective_at <= ", PostingValue::Int(to));
    }
    if let Some(version) = filter.version_max {
        bind(&mut sql, " AND p.version <= ", PostingValue::Int(version));
    }
    if let Some(statuses) = &filter.statuses {
        let codes: Vec<String> = statuses.iter().map(i16::to_string).collect();
        sql.push_str(&format!(" AND p.status IN ({})", if codes.is_empty() { "NULL".into() } else { codes.join(", ") }));
    }
    sql.push(')');
    (sql, values)
}

/// A value [`posting_condition`] binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostingValue {
    Text(String),
    Bool(bool),
    Int(i64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_posting_condition_binds_what_it_asks_in_order_and_an_empty_status_list_matches_nothing() {
        let filter = PostingFilter {
            account_id: Some("a".into()),
            debit: Some(true),
            statuses: Some(vec![]),
            effective_from: None,
            effective_to: Some(9),
            version_max: Some(4),
        };
        let (sql, values) = posting_condition(&filter, false, |i| format!("${}", i + 3));
        assert_eq!(
            sql,
            " AND EXISTS (SELECT 1 FROM ledger_postings p WHERE p.entry_id = o.id AND p.account_id = $4 AND p.debit = $5 AND p.effective_at <= $6 AND p.version <= $7 AND p.status IN (NULL))"
        );
        assert_eq!(values, [PostingValue::Text("a".into()), PostingValue::Bool(true), PostingValue::Int(9), PostingValue::Int(4)]);
        let statuses = PostingFilter { statuses: Some(vec![0, 2]), ..PostingFilter::default() };
        let (sql, values) = posting_condition(&statuses, true, |_| "?".into());
        assert!(sql.contains("WHERE e.parent_id = o.id AND p.status IN (0, 2))"), "{sql}");
        assert!(values.is_empty());
    }
}
