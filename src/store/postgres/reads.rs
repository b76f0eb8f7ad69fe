//! Reads by id and by parent on PostgreSQL, many concurrent ones answered by one statement each.
//!
//! These are the commonest statements Payrail sends: every GET reads an object by id (and a
//! counterparty its accounts by parent), and every create reads the objects it refers to. On a
//! small machine PostgreSQL's cost is per statement, not per row, so these reads wait here and a
//! few reader tasks each take whatever is waiting and answer it with at most two statements
//! (one for the ids, one for the parents), pipelined on one connection. A lone read goes
//! out at once (a free reader takes it); under load the groups grow while the readers are busy,
//! as the claims and the group commit do. Each read still gets exactly what it would have got
//! alone: the statements run after it was queued, so they see every write acknowledged before
//! it, and the kind, organization and mode are checked per read (another tenant's object reads
//! as missing).

use std::collections::HashMap;

use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::{Db, db_err, queue, stored_object, within};
use crate::error::{Error, Result};
use crate::store::{Scope, StoredObject};

/// Reads in one group at most.
const GROUP_MAX: usize = 64;
/// Reader tasks: while one group is in the database, the next is being gathered.
const READERS: usize = 4;

// Both statements walk their input and look each entry up by index, whatever the planner
// believes of the table's size: a prepared statement keeps its generic plan, and one made while
// `objects` was small (a fresh database) chose a hash join over a scan of the whole table, which
// stayed chosen as the table grew (GETs at 400/s instead of 19,000). `OFFSET 0` keeps each
// lookup a subquery, so the join cannot be turned around. The input arrays are read through
// a sub-select (the store's note on plans) so that the plan is made once, not at each read.
const BY_IDS: &str = "SELECT o.id, o.parent_id, o.version, o.doc, o.kind, o.org_id, o.live_mode
     FROM unnest((SELECT $1::text[])) AS r(id)
     CROSS JOIN LATERAL (SELECT * FROM objects x WHERE x.id = r.id OFFSET 0) o";
const BY_PARENTS: &str = "SELECT o.id, o.parent_id, o.version, o.doc, o.kind, o.org_id, o.live_mode
     FROM unnest((SELECT $1::text[]), (SELECT $2::text[])) AS r(parent, kind)
     CROSS JOIN LATERAL (SELECT * FROM objects x WHERE x.parent_id = r.parent AND x.kind = r.kind OFFSET 0) o
     ORDER BY o.seq";

/// One read, in the organization and mode of the caller.
pub struct Read {
    kind: &'static str,
    organization_id: String,
    live_mode: bool,
    target: Target,
}

enum Target {
    /// The object with this id.
    Id(String),
    /// The objects whose parent is one of these, oldest first.
    Parents(Vec<String>),
}

impl Read {
    pub fn by_id(kind: &'static str, scope: &Scope, id: &str) -> Self {
        Read::new(kind, scope, Target::Id(id.to_owned()))
    }

    pub fn children(kind: &'static str, scope: &Scope, parent_ids: &[String]) -> Self {
        Read::new(kind, scope, Target::Parents(parent_ids.to_vec()))
    }

    fn new(kind: &'static str, scope: &Scope, target: Target) -> Self {
        Read { kind, organization_id: scope.organization_id.clone(), live_mode: scope.live_mode, target }
    }

    /// Whether `row` is in this read's kind, organization and mode.
    fn sees(&self, row: &Row) -> bool {
        row.get::<_, &str>(4) == self.kind && row.get::<_, &str>(5) == self.organization_id && row.get::<_, bool>(6) == self.live_mode
    }
}

pub type Queue = queue::Queue<Read, Vec<StoredObject>>;
type Job = queue::Job<Read, Vec<StoredObject>>;

/// Starts the readers; they stop when the queue's last sender is dropped.
pub fn start(db: Db) -> Queue {
    queue::serve(READERS, GROUP_MAX, move |group| {
        let db = db.clone();
        async move { answer(&db, group).await }
    })
}

pub async fn submit(queue: &Queue, read: Read) -> Result<Vec<StoredObject>> {
    queue::submit(queue, read, "reader").await
}

async fn answer(db: &Db, group: Vec<Job>) {
    let mut ids: Vec<&str> = Vec::new();
    let mut parents: Vec<(&str, &str)> = Vec::new();
    for job in &group {
        match &job.item.target {
            Target::Id(id) => ids.push(id),
            Target::Parents(of) => parents.extend(of.iter().map(|parent| (parent.as_str(), job.item.kind))),
        }
    }
    let found = match look_up(db, distinct(ids), distinct(parents)).await {
        Ok(found) => found,
        Err(err) => {
            for job in group {
                let _ = job.done.send(Err(each(&err)));
            }
            return;
        }
    };
    let answers: Vec<Vec<StoredObject>> = group.iter().map(|job| found.answer(&job.item)).collect();
    for (job, answer) in group.into_iter().zip(answers) {
        let _ = job.done.send(Ok(answer));
    }
}

fn distinct<T: Ord>(mut values: Vec<T>) -> Vec<T> {
    values.sort_unstable();
    values.dedup();
    values
}

/// The rows a group's statements returned.
struct Found {
    by_id: HashMap<String, Row>,
    /// Oldest first.
    children: Vec<Row>,
}

impl Found {
    fn answer(&self, read: &Read) -> Vec<StoredObject> {
        match &read.target {
            Target::Id(id) => self.by_id.get(id).filter(|row| read.sees(row)).map(stored_object).into_iter().collect(),
            Target::Parents(of) => self
                .children
                .iter()
                .filter(|row| read.sees(row) && row.get::<_, Option<&str>>(1).is_some_and(|parent| of.iter().any(|p| p == parent)))
                .map(stored_object)
                .collect(),
        }
    }
}

/// `parents` are (parent id, kind) pairs, each once.
async fn look_up(db: &Db, ids: Vec<&str>, parents: Vec<(&str, &str)>) -> Result<Found> {
    let client = db.get().await?;
    let (of, kinds): (Vec<&str>, Vec<&str>) = parents.iter().copied().unzip();
    let outcome = within(db.deadline, async {
        // Both on the one connection, pipelined: one round trip, not two.
        let (by_ids, by_parents): ([&(dyn ToSql + Sync); 1], [&(dyn ToSql + Sync); 2]) = ([&ids], [&of, &kinds]);
        let (by_id, children) = tokio::try_join!(
            query_unless(ids.is_empty(), &client, BY_IDS, &by_ids),
            query_unless(parents.is_empty(), &client, BY_PARENTS, &by_parents)
        )?;
        let by_id = by_id.into_iter().map(|row| (row.get::<_, String>(0), row)).collect();
        Ok(Found { by_id, children })
    })
    .await;
    db.settle(client, outcome)
}

/// The rows of `sql` (prepared once a connection) for `params`, or none without asking when
/// `nothing_asked`: a group sends only the statements its reads need.
pub(super) async fn query_unless(
    nothing_asked: bool,
    client: &deadpool_postgres::Object,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<Vec<Row>> {
    if nothing_asked {
        return Ok(Vec::new());
    }
    let statement = client.prepare_cached(sql).await.map_err(db_err)?;
    client.query(&statement, params).await.map_err(db_err)
}

/// The group's failure, for each of its reads: a database out of reach is 503 for all.
pub(super) fn each(err: &Error) -> Error {
    match err {
        Error::Unavailable { message, retry_after_s } => Error::Unavailable { message: message.clone(), retry_after_s: *retry_after_s },
        other => Error::internal(crate::error::chain(other)),
    }
}
