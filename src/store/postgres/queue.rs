//! Requests that a few worker tasks take in groups, each worker taking whatever waits when it
//! is free, up to a cap: how the claimers and the group committers gather concurrent requests
//! so that PostgreSQL sees one statement per group instead of one per request.

use std::sync::Arc;

use tokio::sync::{Mutex, mpsc, oneshot};

use crate::error::{Error, Result};

/// Requests waiting before callers wait to enqueue.
const QUEUE_MAX: usize = 4096;

pub struct Job<T, R> {
    pub item: T,
    pub done: oneshot::Sender<Result<R>>,
}

pub type Queue<T, R> = mpsc::Sender<Job<T, R>>;
/// The receiving end, shared by the workers.
pub type Jobs<T, R> = Arc<Mutex<mpsc::Receiver<Job<T, R>>>>;

pub fn channel<T, R>() -> (Queue<T, R>, Jobs<T, R>) {
    let (tx, rx) = mpsc::channel(QUEUE_MAX);
    (tx, Arc::new(Mutex::new(rx)))
}

/// Starts `workers` tasks that each take whatever jobs wait (up to `max`, see [`gather`]) and
/// hand them to `answer`; they stop when the queue's last sender is dropped.
pub fn serve<T, R, A, F>(workers: usize, max: usize, answer: A) -> Queue<T, R>
where
    T: Send + 'static,
    R: Send + 'static,
    A: Fn(Vec<Job<T, R>>) -> F + Clone + Send + 'static,
    F: Future<Output = ()> + Send,
{
    let (tx, jobs) = channel();
    for _ in 0..workers {
        let (jobs, answer) = (jobs.clone(), answer.clone());
        tokio::spawn(async move {
            loop {
                let mut group = Vec::new();
                if !gather(&jobs, &mut group, max).await {
                    return;
                }
                answer(group).await;
            }
        });
    }
    tx
}

/// Queues `item` and waits for its worker's answer (`worker` names it in errors).
pub async fn submit<T, R>(queue: &Queue<T, R>, item: T, worker: &str) -> Result<R> {
    let (done, outcome) = oneshot::channel();
    queue.send(Job { item, done }).await.map_err(|_| Error::internal(format!("the {worker} stopped")))?;
    outcome.await.map_err(|_| Error::internal(format!("the {worker} dropped a request")))?
}

/// Adds jobs to `group`, up to `max`: waits for one if `group` is empty, then takes those
/// already waiting. False once every sender is gone and nothing was added.
pub async fn gather<T, R>(jobs: &Jobs<T, R>, group: &mut Vec<Job<T, R>>, max: usize) -> bool {
    if group.is_empty() {
        let mut rx = jobs.lock().await;
        match rx.recv().await {
            Some(job) => group.push(job),
            None => return false,
        }
        take_waiting(&mut rx, group, max);
    } else if let Ok(mut rx) = jobs.try_lock() {
        // Not `lock`: another worker may hold the queue while it waits for new jobs, and the
        // jobs already in hand must not wait for those.
        take_waiting(&mut rx, group, max);
    }
    true
}

fn take_waiting<T, R>(rx: &mut mpsc::Receiver<Job<T, R>>, group: &mut Vec<Job<T, R>>, max: usize) {
    while group.len() < max {
        match rx.try_recv() {
            Ok(job) => group.push(job),
            Err(_) => break,
        }
    }
}
