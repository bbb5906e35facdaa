//! The agent's one writer: a thread that owns the open `Store` and runs every database job of
//! every connection. Jobs that arrive while a commit is in progress form the next batch, which
//! runs in one transaction (each job in its own savepoint, so one failing job does not undo the
//! others) and commits once: group commit, one fsync for many callers. Each caller gets its
//! result only after that commit. After each commit the actions whose journal rows it added are
//! published on the `Hub` (nobody polls), and the head goes to `anchors.jsonl` every
//! `ANCHOR_EVERY` rows.
//!
//! Durability per job: `run` answers after the commit is on disk (`synchronous = FULL`: the WAL
//! is fsynced). `run_unsynced` (an action's outcome, a person's decision) answers once the commit
//! is in the WAL in the OS page cache, which a crash of the agent does not lose; the disk gets it
//! with the next synced commit (one fsync covers every earlier frame of the WAL) or after
//! `FLUSH_AFTER` without one, whichever comes first. A batch is synced when any of its jobs asks
//! for it. So an auto-approved call costs one fsync (its intent row, which must be on disk before
//! its first byte is sent), and a power loss before the flush can only leave an action
//! `dispatched` (recorded as `indeterminate` by the next agent: the target may have acted) or
//! `pending` (reaped as `withdrawn`): never a request without its intent.
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

/// How long unsynced commits may wait for a synced one before the writer fsyncs the WAL itself.
const FLUSH_AFTER: std::time::Duration = std::time::Duration::from_millis(20);

type Output = Box<dyn Any + Send>;
type JobFn = Box<dyn FnOnce(&mut Store) -> Output + Send>;

struct Job {
    run: JobFn,
    done: oneshot::Sender<Result<Output, String>>,
    /// Whether its caller must hear back only once the commit is on disk.
    synced: bool,
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
        on_anchor: OnAnchor,
    ) -> (Self, std::thread::JoinHandle<()>) {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("vault-db".into())
            .spawn(move || writer(store, rx, &hub, &paths, &on_anchor))
            .expect("the database thread starts");
        (Self { jobs }, thread)
    }

    /// Runs `f` on the store in the next batch and returns its result once the batch committed
    /// and is on disk.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> Result<T, DbError> {
        self.submit(f, true).await
    }

    /// Like `run`, but answers once the commit is in the WAL (safe from a crash of the agent, not
    /// yet from a power loss): the next synced commit, or the writer within `FLUSH_AFTER`, puts it
    /// on disk. Only for rows whose loss in a power cut the vault already reads correctly: an
    /// action's outcome (a `dispatched` action with no outcome is reaped as `indeterminate`) and a
    /// person's decision (nothing runs on it before the claim's synced commit; a `pending` action
    /// whose decision was lost is reaped as `withdrawn`).
    pub(crate) async fn run_unsynced<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> Result<T, DbError> {
        self.submit(f, false).await
    }

    async fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> T + Send + 'static,
        synced: bool,
    ) -> Result<T, DbError> {
        let (done, rx) = oneshot::channel();
        let job = Job {
            run: Box::new(move |s| Box::new(f(s)) as Output),
            done,
            synced,
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
        .prepare_cached("SELECT coalesce(max(seq), 0) FROM audit")
        .and_then(|mut s| s.query_row([], |r| r.get(0)))
        .unwrap_or(0)
}

/// Told of every anchor the writer writes (team mode sends it on to OpenBao); must not block.
pub(crate) type OnAnchor = Box<dyn Fn(i64, [u8; 32]) + Send>;

fn writer(
    mut store: Store,
    rx: mpsc::Receiver<Job>,
    hub: &Hub,
    paths: &VaultPaths,
    on_anchor: &OnAnchor,
) {
    let mut head = head_seq(&store);
    let mut anchored = crate::audit::last_anchored_seq(paths).unwrap_or(0);
    let mut sync = Sync::new(&store);
    loop {
        let first = if sync.behind {
            match rx.recv_timeout(FLUSH_AFTER) {
                Ok(j) => j,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    sync.flush();
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match rx.recv() {
                Ok(j) => j,
                Err(_) => break,
            }
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        let synced = batch.iter().any(|j| j.synced);
        let begun = sync
            .set(&mut store, synced)
            .and_then(|()| store.begin_batch());
        if let Err(e) = begun {
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
                    sync.committed(synced);
                }
                // An anchor names only rows on disk: it waits for a synced commit or a flush.
                if head - anchored >= crate::audit::ANCHOR_EVERY && !sync.behind {
                    match crate::audit::maybe_anchor(paths, store.conn()) {
                        Ok(a) => {
                            anchored = head;
                            if let Some(a) = a {
                                on_anchor(a.seq, a.hash);
                            }
                        }
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
    if sync.behind {
        sync.flush();
    }
}

/// The connection's `synchronous` setting and whether commits since the last fsync of the WAL
/// are still only in the page cache.
struct Sync {
    full: bool,
    behind: bool,
    wal: std::path::PathBuf,
}

impl Sync {
    fn new(store: &Store) -> Self {
        let mut wal = store.path().as_os_str().to_owned();
        wal.push("-wal");
        Self {
            full: true,
            behind: false,
            wal: wal.into(),
        }
    }

    /// `synchronous = FULL` for a batch a caller waits on the disk for, `NORMAL` otherwise (the
    /// setting cannot change inside a transaction, so it is set before `BEGIN`).
    fn set(&mut self, store: &mut Store, full: bool) -> Result<(), StoreError> {
        if self.full != full {
            store.set_synchronous(full)?;
            self.full = full;
        }
        Ok(())
    }

    /// A commit that wrote rows: a synced one put every earlier frame on disk too.
    fn committed(&mut self, synced: bool) {
        self.behind = !synced;
    }

    /// fsyncs the WAL file (its inode: any descriptor flushes it), putting every unsynced commit
    /// on disk. On failure (logged once) the next synced commit still does.
    fn flush(&mut self) {
        if let Err(e) = std::fs::File::open(&self.wal).and_then(|f| f.sync_data()) {
            tracing::warn!("could not flush {}: {e}", self.wal.display());
        }
        self.behind = false;
    }
}

/// Publishes the actions whose journal rows landed in `(from, to]`, the pause switch if one of
/// them pulled or lifted it, and the new head.
fn publish(store: &Store, hub: &Hub, from: i64, to: i64) {
    // `kind IN (…)` spelled as the partial index `audit_pause` has it; the seq range keeps it to
    // the rows of this commit.
    let switch: Option<(String, String)> = store
        .conn()
        .prepare_cached(&format!(
            "SELECT kind, body FROM audit WHERE {} AND seq > ?1 AND seq <= ?2 ORDER BY seq DESC LIMIT 1",
            approvals::PAUSE_ROWS
        ))
        .and_then(|mut s| {
            use rusqlite::OptionalExtension;
            s.query_row([from, to], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .unwrap_or_default();
    if let Some((kind, body)) = switch {
        let paused = (kind == crate::wire::journal::Kind::VaultPause.as_str()).then(|| {
            serde_json::from_str::<crate::wire::journal::VaultPause>(&body)
                .map_or_else(|_| "(reason not readable)".to_owned(), |p| p.reason)
        });
        hub.switched(paused);
    }
    let rows: Vec<(String, String)> = store
        .conn()
        .prepare_cached(
            "SELECT DISTINCT action_id, kind FROM audit WHERE seq > ?1 AND seq <= ?2 AND action_id IS NOT NULL",
        )
        .and_then(|mut s| {
            s.query_map([from, to], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<Vec<(String, String)>, _>>()
        })
        .unwrap_or_default();
    let queue = rows.iter().any(|(_, kind)| moves_the_queue(kind));
    let ids: std::collections::BTreeSet<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    let actions: Vec<approvals::Action> = ids
        .into_iter()
        .filter_map(|id| approvals::find(store, id).ok())
        .collect();
    hub.publish(actions, to, queue);
}

/// Whether a journal row of `kind` that names an action can change the approval queue: a move
/// into or out of `pending` (`State::moves_the_queue`). Any other row naming an action (a wrong
/// PIN, a certificate) counts, and so does a kind this build cannot read.
fn moves_the_queue(kind: &str) -> bool {
    match crate::wire::journal::Kind::parse(kind) {
        Some(crate::wire::journal::Kind::Action(state)) => state.moves_the_queue(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::moves_the_queue;
    use crate::approvals::State;
    use crate::wire::journal::Kind;

    #[test]
    fn only_a_move_into_or_out_of_pending_moves_the_queue() {
        let moving: Vec<State> = State::ALL
            .into_iter()
            .filter(|s| moves_the_queue(Kind::Action(*s).as_str()))
            .collect();
        use State::*;
        assert_eq!(moving, [Pending, Approved, Denied, Expired, Withdrawn]);
        // Every way out of pending is among them, read from the table.
        for s in State::ALL {
            if Pending.can_go(s) {
                assert!(moving.contains(&s), "{s}");
            }
        }
        // Rows naming an action that are not moves, and kinds not known here, count.
        for kind in [
            Kind::PinWrong.as_str(),
            Kind::OpenBaoCert.as_str(),
            "action.later",
        ] {
            assert!(moves_the_queue(kind), "{kind}");
        }
    }
}
