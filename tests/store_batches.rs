//! The storage contract under concurrency, on whichever store the suite runs (SPEC I3, I8, S3):
//! batches committed at once share transactions (SQLite's group commit, PostgreSQL's grouped
//! creates), yet each one commits or fails on its own, and only while its claim is held.

#[macro_use]
mod common;

use std::sync::Arc;

use common::test_database_url;
use payrail::domain::api_key::Scope;
use payrail::domain::time::Timestamp;
use payrail::error::Error;
use payrail::store::postgres::PostgresStore;
use payrail::store::{Claim, ClaimToken, ListQuery, ObjectRecord, Store, StoredReply, Term, Write, WriteBatch};

async fn store(dir: &std::path::Path) -> Arc<dyn Store> {
    match test_database_url(dir).await {
        Some(url) => {
            let secrets = payrail::base::secret_box::SecretBox::from_keys(&[payrail::base::secret_box::generate_key()]);
            Arc::new(PostgresStore::open(&url, 16, &secrets).await.expect("open PostgreSQL"))
        }
        None => {
            let config = payrail::config::Config { data_dir: dir.to_owned(), ..Default::default() };
            payrail::open_store(&config).expect("open SQLite")
        }
    }
}

fn scope() -> Scope {
    Scope { organization_id: "org_batches".into(), live_mode: false }
}

fn insert(id: &str) -> Write {
    Write::Insert(ObjectRecord {
        id: id.into(),
        kind: "counterparty",
        scope: scope(),
        parent_id: None,
        created_at: Timestamp::from_micros(1),
        doc: format!(r#"{{"id":"{id}"}}"#),
        terms: vec![Term::new("name", id), Term::new("metadata.k", "v")],
    })
}

fn reply(key: &str) -> Write {
    Write::SaveReply(StoredReply {
        api_key_id: "key_batches".into(),
        key: key.into(),
        status: 201,
        content_type: "application/json".into(),
        body: bytes::Bytes::from(format!(r#"{{"key":"{key}"}}"#)),
        fingerprint: [0; 32],
        created_at: Timestamp::from_micros(1),
        expires_at: Timestamp::from_micros(i64::MAX / 2),
    })
}

on_both_stores! {
#[tokio::test]
async fn s3_concurrent_batches_commit_or_fail_each_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let mut anchor = WriteBatch::new();
    anchor.push(insert("cp_anchor"));
    store.commit(anchor).await.unwrap();

    let now = Timestamp::from_micros(10);
    let mut attempts = Vec::new();
    for i in 0..60 {
        let key = format!("idem-{i}");
        let token = match store.claim("key_batches", &key, now, 60_000).await.unwrap() {
            Claim::Acquired(token) => token,
            other => panic!("a fresh key is acquired, got {other:?}"),
        };
        let mut batch = WriteBatch::new();
        batch.push(insert(&format!("cp_{i}"))).push(reply(&key));
        // Every fifth batch needs an object that does not exist; every seventh holds a claim
        // that is not the key's (as if it had been lost): both must fail, alone.
        let require = if i % 5 == 0 { "cp_missing" } else { "cp_anchor" };
        batch.push(Write::Require { kind: "counterparty", scope: scope(), id: require.into(), parameter: "counterparty_id".into() });
        // The last two collide on an id: whichever commits first wins; the group they share
        // must still commit everyone else's.
        if i >= 58 {
            batch.push(insert("cp_dup"));
        }
        batch.claim = Some(if i % 7 == 0 { ClaimToken { nonce: token.nonce.wrapping_add(1), ..token } } else { token });
        attempts.push(batch);
    }
    let outcomes = futures_util::future::join_all(attempts.into_iter().map(|batch| store.commit(batch))).await;

    let mut expected = vec!["cp_anchor".to_owned(), "cp_dup".to_owned()];
    let colliding: Vec<&Result<(), Error>> = outcomes[58..].iter().collect();
    assert_eq!(colliding.iter().filter(|o| o.is_ok()).count(), 1, "one of two colliding batches commits: {colliding:?}");
    for (i, outcome) in outcomes.iter().enumerate().take(58) {
        match (i % 7 == 0, i % 5 == 0, outcome) {
            (true, _, Err(Error::Conflict { parameter, .. })) => assert_eq!(parameter.as_deref(), Some("Idempotency-Key")),
            (false, true, Err(Error::Invalid { parameter, .. })) => assert_eq!(parameter, "counterparty_id"),
            (false, false, Ok(())) => expected.push(format!("cp_{i}")),
            (lost, missing, outcome) => panic!("batch {i} (claim lost: {lost}, precondition missing: {missing}) answered {outcome:?}"),
        }
    }
    let page = store.list(&ListQuery { kind: "counterparty", scope: scope(), filters: vec![], after_seq: None, limit: 100 }).await.unwrap();
    let mut stored: Vec<String> = page.items.iter().map(|o| o.id.clone()).collect();
    let winner = if outcomes[58].is_ok() { 58 } else { 59 };
    expected.push(format!("cp_{winner}"));
    stored.sort();
    expected.sort();
    assert_eq!(stored, expected, "exactly the batches that succeeded are stored, each whole");

    // A committed batch released its claim with its reply: the key now replays. A failed one
    // stored nothing: its key is still claimed (or free once released), never replayed.
    for i in [1, 2, 3] {
        assert!(matches!(store.claim("key_batches", &format!("idem-{i}"), now, 60_000).await.unwrap(), Claim::Replay(_)));
    }
    for i in [5, 14] {
        assert!(!matches!(store.claim("key_batches", &format!("idem-{i}"), now, 60_000).await.unwrap(), Claim::Replay(_)));
    }
}
}

/// How many term rows the store holds, read with plain SQL (the store has no query for it).
async fn term_rows(dir: &std::path::Path) -> i64 {
    match test_database_url(dir).await {
        Some(url) => {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("reach PostgreSQL");
            tokio::spawn(connection);
            client.query_one("SELECT count(*) FROM object_terms", &[]).await.expect("count terms").get(0)
        }
        None => rusqlite::Connection::open(dir.join("payrail.db"))
            .and_then(|c| c.query_row("SELECT count(*) FROM object_terms", [], |row| row.get(0)))
            .expect("count terms"),
    }
}

on_both_stores! {
/// Terms are written once per (name, value) and deleted with their objects: on PostgreSQL by
/// the delete statement itself, since migration 0007 dropped the cascading foreign key.
#[tokio::test]
async fn s3_deleting_objects_deletes_their_terms() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let mut batch = WriteBatch::new();
    let Write::Insert(mut parent) = insert("cp_parent") else { unreachable!() };
    // A repeated term is stored once.
    parent.terms.push(Term::new("name", "cp_parent"));
    batch.push(Write::Insert(parent));
    for i in 0..3 {
        let Write::Insert(mut child) = insert(&format!("ea_{i}")) else { unreachable!() };
        child.kind = "external_account";
        child.parent_id = Some("cp_parent".into());
        batch.push(Write::Insert(child));
    }
    batch.push(insert("cp_kept"));
    store.commit(batch).await.unwrap();
    assert_eq!(term_rows(dir.path()).await, 5 * 2);

    let mut children = WriteBatch::new();
    children.push(Write::DeleteChildren { kind: "external_account", scope: scope(), parent_id: "cp_parent".into() });
    store.commit(children).await.unwrap();
    assert_eq!(term_rows(dir.path()).await, 2 * 2, "the children's terms went with them");

    let mut parent = WriteBatch::new();
    parent.push(Write::Delete { kind: "counterparty", scope: scope(), id: "cp_parent".into() });
    store.commit(parent).await.unwrap();
    assert_eq!(term_rows(dir.path()).await, 2, "only the kept counterparty's terms remain");
    let mut again = WriteBatch::new();
    again.push(Write::Delete { kind: "counterparty", scope: scope(), id: "cp_parent".into() });
    assert!(matches!(store.commit(again).await, Err(Error::NotFound { .. })), "a second delete finds nothing");
}
}

fn line(entry: &str, account: &str, debit: bool, amount: i64) -> payrail::store::ledger::LedgerLine {
    payrail::store::ledger::LedgerLine {
        entry_id: entry.into(),
        account_id: account.into(),
        effective_at: Timestamp::from_micros(5),
        debit,
        amount,
        pending: false,
    }
}

on_both_stores! {
/// Postings committed together (PostgreSQL groups them on one lock of the accounts) still each
/// pass or fail on their own checks, judged in commit order: of 60 spends of 10 from 200 with
/// `available >= 0`, exactly 20 land, every refused one changes nothing, and a duplicate unique
/// key loses to the first taker only (SPEC G4, G6).
#[tokio::test]
async fn g6_grouped_postings_are_checked_one_by_one() {
    use payrail::base::ledger::{BalanceCondition, BalanceKind, Comparison};
    use payrail::store::ledger::AccountGuard;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let mut open = WriteBatch::new();
    open.push(Write::LedgerOpen { account_id: "la_hot".into(), credit_normal: true });
    open.push(Write::LedgerOpen { account_id: "la_src".into(), credit_normal: false });
    store.commit(open).await.unwrap();
    let mut fund = WriteBatch::new();
    fund.push(Write::LedgerPost { lines: vec![line("e_fund_c", "la_hot", false, 200), line("e_fund_d", "la_src", true, 200)], guards: vec![] });
    store.commit(fund).await.unwrap();
    let mut attempts = Vec::new();
    for i in 0..60 {
        let store = store.clone();
        attempts.push(tokio::spawn(async move {
            let guard = AccountGuard {
                account_id: "la_hot".into(),
                lock_version: None,
                conditions: vec![BalanceCondition { kind: BalanceKind::Available, comparison: Comparison::Gte, value: 0, parameter: "p".into() }],
            };
            let mut batch = WriteBatch::new();
            batch.push(Write::Unique { key: format!("k-{}", i % 30), parameter: "external_id".into(), message: "taken".into() });
            batch.push(Write::LedgerPost {
                lines: vec![line(&format!("e_{i}_d"), "la_hot", true, 10), line(&format!("e_{i}_c"), "la_src", false, 10)],
                guards: vec![guard],
            });
            store.commit(batch).await
        }));
    }
    let mut landed = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(()) => landed += 1,
            Err(Error::Invalid { parameter, .. }) => assert!(parameter == "p" || parameter == "external_id", "{parameter}"),
            Err(other) => panic!("only 422s may refuse a posting here: {other:?}"),
        }
    }
    assert_eq!(landed, 20);
    let states = store.ledger_accounts(&["la_hot".into(), "la_src".into()]).await.unwrap();
    let hot = states.iter().find(|(id, _)| id == "la_hot").unwrap().1;
    assert_eq!((hot.totals.posted_credits, hot.totals.posted_debits, hot.lock_version), (200, 200, 21));
    let versions = store.ledger_entry_versions(&(0..60).map(|i| format!("e_{i}_d")).collect::<Vec<_>>()).await.unwrap();
    let mut seen: Vec<i64> = versions.iter().map(|(_, v)| *v).collect();
    seen.sort();
    assert_eq!(seen, (2..=21).collect::<Vec<_>>(), "the landed entries hold the versions 2 to 21, once each");
}

/// `Write::Lease` (the bank cut-off's one-runner-at-a-time): one holder at a time among racing
/// batches, renewed by its holder, taken over once it ran out, given back by `Unlease`; a batch
/// fenced by a lease another holds fails whole.
#[tokio::test]
async fn s3_a_lease_has_one_holder_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let lease = |holder: &str, now: i64| Write::Lease { name: "job".into(), holder: holder.into(), now: Timestamp::from_micros(now), until: Timestamp::from_micros(now + 100) };
    let commit = |writes: Vec<Write>| {
        let store = store.clone();
        async move { store.commit(WriteBatch { writes, ..WriteBatch::default() }).await }
    };
    let mut racing = Vec::new();
    for i in 0..8 {
        racing.push(tokio::spawn(commit(vec![lease(&format!("h{i}"), 1_000)])));
    }
    let mut granted = 0;
    for attempt in racing {
        match attempt.await.unwrap() {
            Ok(()) => granted += 1,
            Err(Error::Conflict { parameter: Some(p), .. }) => assert_eq!(p, "lease"),
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(granted, 1, "one of eight racing holders");
    // Only the holder renews (to 1_150); a batch fenced by the lease of another fails whole.
    let mut renewed = 0;
    for i in 0..8 {
        renewed += usize::from(commit(vec![lease(&format!("h{i}"), 1_050)]).await.is_ok());
    }
    assert_eq!(renewed, 1, "only the holder renews");
    assert!(commit(vec![lease("intruder", 1_060), insert("cp_fenced")]).await.is_err());
    let found = store.get("counterparty", &scope(), "cp_fenced").await.unwrap();
    assert!(found.is_none(), "the fenced batch wrote nothing");
    // Past `until` (the last renewal ran to 1_150), anyone may take it; then give it back.
    commit(vec![lease("late", 1_151)]).await.expect("an expired lease is taken over");
    assert!(commit(vec![lease("other", 1_160)]).await.is_err());
    commit(vec![Write::Unlease { name: "job".into(), holder: "late".into() }]).await.unwrap();
    commit(vec![lease("other", 1_161)]).await.expect("a lease given back is free");
}
}

on_both_stores! {
/// S3: a `Keys` filter finds the objects a list of keys names, newest first and a page at a
/// time, as an `AnyOf` of the same values does, with the other filters and the scope applied.
#[tokio::test]
async fn s3_a_keys_filter_lists_what_any_of_lists() {
    use payrail::store::Filter;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let mut batch = WriteBatch::new();
    for i in 0..30 {
        let mut write = insert(&format!("k{i:02}"));
        if let Write::Insert(record) = &mut write {
            record.terms.push(Term::new("reference_number", format!("ref{}", i % 10)));
        }
        batch.push(write);
    }
    let other = Scope { organization_id: "org_other".into(), live_mode: false };
    batch.push(Write::Insert(ObjectRecord {
        id: "elsewhere".into(),
        kind: "counterparty",
        scope: other,
        parent_id: None,
        created_at: Timestamp::from_micros(1),
        doc: "{}".into(),
        terms: vec![Term::new("reference_number", "ref1")],
    }));
    store.commit(batch).await.unwrap();
    let values: Vec<String> = ["ref1", "ref3", "nothing"].map(String::from).to_vec();
    let ids = |filter: Filter| {
        let filters = vec![filter, Filter::Contains { name: "name".into(), needle: "k".into() }];
        list_ids(store.clone(), filters, 2)
    };
    let keys = ids(Filter::Keys { name: "reference_number".into(), values: values.clone() }).await;
    assert_eq!(keys, ["k23", "k21", "k13", "k11", "k03", "k01"], "newest first, in pages of 2, this scope only");
    assert_eq!(keys, ids(Filter::AnyOf { name: "reference_number".into(), values }).await);
    assert!(ids(Filter::Keys { name: "reference_number".into(), values: vec![] }).await.is_empty(), "no keys, nothing");
}
}

on_both_stores! {
/// S3: a large batch of inserts and replaces (PostgreSQL writes it in a few set-based
/// statements) commits whole, in order, with each replace's terms moved; one stale replace in
/// it (409) or one replace of a missing object (404) fails it whole, writing nothing.
#[tokio::test]
async fn s3_a_large_batch_of_inserts_and_replaces_is_one_write_or_none() {
    use payrail::store::Filter;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let mut seed = WriteBatch::new();
    for i in 0..100 {
        seed.push(insert(&format!("old{i:03}")));
    }
    store.commit(seed).await.unwrap();
    let versions = |store: Arc<dyn Store>| async move {
        let page = store.list(&ListQuery { kind: "counterparty", scope: scope(), filters: vec![], after_seq: None, limit: 1000 }).await.unwrap();
        page.items.into_iter().map(|o| (o.id, o.version)).collect::<std::collections::BTreeMap<_, _>>()
    };
    let moved = |id: &str, version: i64| {
        let mut record = match insert(id) {
            Write::Insert(record) => record,
            _ => unreachable!(),
        };
        record.doc = format!(r#"{{"id":"{id}","moved":true}}"#);
        record.terms = vec![Term::new("name", id), Term::new("status", "moved")];
        Write::Replace { record, expected_version: version }
    };
    let batch_with = |last: Write| {
        let mut batch = WriteBatch::new();
        for i in 0..100 {
            batch.push(moved(&format!("old{i:03}"), 1)).push(insert(&format!("new{i:03}")));
        }
        batch.push(last);
        batch
    };
    let before = versions(store.clone()).await;
    let stale = store.commit(batch_with(moved("old000", 0))).await;
    assert!(matches!(stale, Err(Error::Conflict { .. })), "a stale replace is a conflict: {stale:?}");
    let gone = store.commit(batch_with(moved("never", 1))).await;
    assert!(matches!(gone, Err(Error::NotFound { .. })), "a replace of a missing object is not found: {gone:?}");
    assert_eq!(versions(store.clone()).await, before, "a failed batch writes nothing");

    store.commit(batch_with(insert("last"))).await.unwrap();
    let after = versions(store.clone()).await;
    assert_eq!(after.len(), 201);
    assert!((0..100).all(|i| after[&format!("old{i:03}")] == 2 && after[&format!("new{i:03}")] == 1));
    let listed = |filter: Filter| list_ids(store.clone(), vec![filter], 1000);
    let moved_ids = listed(Filter::Eq { name: "status".into(), value: "moved".into() }).await;
    assert_eq!(moved_ids.len(), 100, "the new terms are found");
    assert_eq!(listed(Filter::Eq { name: "metadata.k".into(), value: "v".into() }).await.len(), 101, "the old terms of replaced objects are gone");
    let newest: Vec<String> = listed(Filter::Contains { name: "name".into(), needle: "new".into() }).await;
    assert_eq!(newest.first().map(String::as_str), Some("new099"), "inserts keep the batch's order");
    assert_eq!(newest.last().map(String::as_str), Some("new000"));
}
}

/// The ids `filters` list, newest first, read `per_page` at a time.
async fn list_ids(store: Arc<dyn Store>, filters: Vec<payrail::store::Filter>, per_page: usize) -> Vec<String> {
    let (mut out, mut after_seq) = (Vec::new(), None);
    loop {
        let query = ListQuery { kind: "counterparty", scope: scope(), filters: filters.clone(), after_seq, limit: per_page };
        let page = store.list(&query).await.unwrap();
        out.extend(page.items.into_iter().map(|o| o.id));
        match page.next_seq {
            Some(seq) => after_seq = Some(seq),
            None => return out,
        }
    }
}
