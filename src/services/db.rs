//! The agent's one writer: a thread that owns the open `Store` and runs every database job of
//! every connection. Jobs that arrive while a commit is in progress form the next batch, which
//! runs in one transaction (each job in its own savepoint, so one failing job does not undo the
//! others) and commits once: group commit, one fsync for many callers. Each caller gets its
//! result only after that commit. After each commit the actions whose journal rows it added are
//! published on the `Hub` (nobody polls), and the head goes to `anchors.jsonl` every
//! `ANCHOR_EVERY` rows.
use super::hub::Hub;
use crate::approvals;
use crate::paths::VaultPaths;
use crate::store::{Store, StoreError};
use std::any::Any;
use std::sync::mpsc;
use std::sync::Arc;
use tokio::sync::oneshot;

/// Most jobs in one transaction.
const MAX_BATCH: usize = 512;

type Output = Box<dyn Any + Send>;
type JobFn = Box<dyn FnOnce(&mut Store) -> Output + Send>;

struct Job {
    run: JobFn,
    done: oneshot::Sender<Result<Output, String>>,
}

/// Why a job produced no result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    #[error("the vault agent is stopping")]
    Stopped,
    #[error("the vault database could not commit: {0}")]
    Commit(String),
}

/// A handle to the writer thread.
#[derive(Clone)]
pub(crate) struct Db {
    jobs: mpsc::Sender<Job>,
}

impl Db {
    /// Starts the writer thread on `store`; it ends when every `Db` handle is dropped, closing the
    /// database.
    pub(crate) fn start(
        store: Store,
        hub: Arc<Hub>,
        paths: VaultPaths,
    ) -> (Self, std::thread::JoinHandle<()>) {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("vault-db".into())
            .spawn(move || writer(store, rx, &hub, &paths))
            .expect("the database thread starts");
        (Self { jobs }, thread)
    }

    /// Runs `f` on the store in the next batch and returns its result once the batch committed.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> Result<T, DbError> {
        let (done, rx) = oneshot::channel();
        let job = Job {
            run: Box::new(move |s| Box::new(f(s)) as Output),
            done,
        };
        self.jobs.send(job).map_err(|_| DbError::Stopped)?;
        let out = rx.await.map_err(|_| DbError::Stopped)?;
        let out = out.map_err(DbError::Commit)?;
        Ok(*out.downcast::<T>().expect("a job returns its own type"))
    }
}

fn head_seq(store: &Store) -> i64 {
    store
        .conn()
        .query_row("SELECT coalesce(max(seq), 0) FROM audit", [], |r| r.get(0))
        .unwrap_or(0)
}

fn writer(mut store: Store, rx: mpsc::Receiver<Job>, hub: &Hub, paths: &VaultPaths) {
    let mut head = head_seq(&store);
    let mut anchored = crate::audit::last_anchored_seq(paths).unwrap_or(0);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        if let Err(e) = store.begin_batch() {
            let msg = e.to_string();
            for job in batch {
                let _ = job.done.send(Err(msg.clone()));
            }
            continue;
        }
        let mut results = Vec::with_capacity(batch.len());
        for job in batch {
            let run = job.run;
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&mut store)))
                .map_err(|_| "a database job panicked".to_owned());
            results.push((job.done, out));
        }
        match store.commit_batch() {
            Ok(()) => {
                let new_head = head_seq(&store);
                if new_head != head {
                    publish(&store, hub, head, new_head);
                    head = new_head;
                }
                if head - anchored >= crate::audit::ANCHOR_EVERY {
                    match crate::audit::maybe_anchor(paths, store.conn()) {
                        Ok(_) => anchored = head,
                        Err(e) => tracing::warn!("could not write the anchor: {e}"),
                    }
                }
                for (done, out) in results {
                    let _ = done.send(out);
                }
            }
            Err(e) => {
                let msg = StoreError::to_string(&e);
                tracing::error!("a batch failed to commit: {msg}");
                for (done, _) in results {
                    let _ = done.send(Err(msg.clone()));
                }
            }
        }
    }
}

/// Publishes the actions whose journal rows landed in `(from, to]`, and the new head.
fn publish(store: &Store, hub: &Hub, from: i64, to: i64) {
    let ids: Vec<String> = store
        .conn()
        .prepare_cached(
            "SELECT DISTINCT action_id FROM audit WHERE seq > ?1 AND seq <= ?2 AND action_id IS NOT NULL",
        )
        .and_then(|mut s| {
            s.query_map([from, to], |r| r.get(0))?
                .collect::<Result<Vec<String>, _>>()
        })
        .unwrap_or_default();
    let actions: Vec<approvals::Action> = ids
        .iter()
        .filter_map(|id| approvals::find(store, id).ok())
        .collect();
    hub.publish(actions, to);
}
