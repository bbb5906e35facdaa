//! The requests of a connection that are answered by a task of their own, or with a look at the
//! whole agent: the approval queue (sent now and at every change), the status, journal rows
//! (waiting for the next commit when there are none yet), and `verify`/`export` on a store
//! connection of their own.
use super::writer::Writer;
use crate::agent::protocol::{AgentFrame, AgentStatus, ErrorCode, Event, Reply, Request};
use crate::agent::shared::Agent;
use crate::services::ops;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Sends the approval queue now and after every change, until the connection goes: before each
/// queue, a `left` event for every action that left it since the last (so the approver hears
/// why a card went); and the pause switch, now if it is pulled and whenever it moves.
pub(super) async fn watch_pending(agent: Arc<Agent>, writer: Arc<Writer>, id: u64) {
    let mut queue = agent.env.hub.watch_queue();
    let mut pause = agent.env.hub.watch_pause();
    let mut stop = agent.stop.subscribe();
    writer.reply(id, Reply::Ok).await;
    let send = |event| {
        let writer = writer.clone();
        async move { writer.frame(&AgentFrame::Event { id, event }).await }
    };
    if let Ok(Ok(Some(reason))) = agent
        .env
        .db
        .run(|s| crate::approvals::paused(s.conn()))
        .await
    {
        send(Event::Paused { reason }).await;
    }
    let mut shown: Vec<String> = Vec::new();
    loop {
        let trust = agent.env.trust.clone();
        let views = agent.env.db.run(move |s| ops::pending(s, &trust)).await;
        let Ok(Ok(actions)) = views else { return };
        let gone: Vec<String> = shown
            .iter()
            .filter(|id| !actions.iter().any(|v| &v.action.id == *id))
            .cloned()
            .collect();
        let left = match gone.is_empty() {
            // Most changes of the queue only add to it: no job for the writer then.
            true => Vec::new(),
            false => agent
                .env
                .db
                .run(move |s| {
                    gone.iter()
                        .filter_map(|id| crate::approvals::find(s, id).ok())
                        .collect::<Vec<_>>()
                })
                .await
                .unwrap_or_default(),
        };
        for left in left {
            send(Event::Left {
                action_id: left.id,
                state: left.state,
                reason: left.reason,
            })
            .await;
        }
        shown = actions.iter().map(|v| v.action.id.clone()).collect();
        send(Event::Queue { actions }).await;
        loop {
            tokio::select! {
                changed = queue.changed() => if changed.is_err() { return } else { break },
                changed = pause.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let event = match pause.borrow_and_update().clone() {
                        Some(reason) => Event::Paused { reason },
                        None => Event::Resumed,
                    };
                    send(event).await;
                }
                _ = stop.changed() => return,
            }
        }
    }
}

/// The agent's status, with the store as it sees it now.
pub(super) async fn status(agent: &Arc<Agent>) -> AgentStatus {
    let mut status = agent
        .status
        .lock()
        .map(|s| s.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    status.connections = agent.admission.open();
    status.store = agent
        .env
        .db
        .run(|s| ops::store_status(s).ok())
        .await
        .ok()
        .flatten();
    status
}

/// Journal rows after `after`; with none yet, waits up to `wait_ms` for the next commit.
pub(super) async fn journal(
    agent: Arc<Agent>,
    writer: Arc<Writer>,
    id: u64,
    after: i64,
    limit: u32,
    wait_ms: u64,
) {
    let mut head = agent.env.hub.watch_head();
    let deadline = Instant::now() + Duration::from_millis(wait_ms.min(600_000));
    loop {
        let rows = agent
            .env
            .db
            .run(move |s| ops::journal_rows(s, after, limit))
            .await;
        let reply = match rows {
            Ok(Ok(r)) if r.is_empty() && Instant::now() < deadline => {
                tokio::select! {
                    _ = head.changed() => continue,
                    _ = tokio::time::sleep_until(deadline) => Reply::Rows(r),
                }
            }
            Ok(Ok(r)) => Reply::Rows(r),
            _ => ops::error(ErrorCode::Internal, "the journal cannot be read".into()),
        };
        writer.reply(id, reply).await;
        return;
    }
}

/// `verify` and `export` read a consistent snapshot on a connection of their own, off the
/// writer thread, so a long verification never holds up the journal.
pub(super) async fn on_fresh_connection(
    agent: Arc<Agent>,
    writer: Arc<Writer>,
    id: u64,
    long: Request,
) {
    let a2 = agent.clone();
    let reply = tokio::task::spawn_blocking(move || {
        let env = &a2.env;
        match Store::open(&env.paths.db(), &a2.master) {
            Ok(mut s) => ops::handle(&mut s, &env.trust, &env.paths, long),
            Err(e) => ops::error(ErrorCode::Internal, e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| ops::error(ErrorCode::Internal, e.to_string()));
    writer.reply(id, reply).await;
}

/// Team mode: the journal's head as OpenBao holds it, read off the connection's thread (a
/// network call).
pub(super) async fn openbao_head(agent: Arc<Agent>, writer: Arc<Writer>, id: u64) {
    let (remote, vault_id) = (agent.env.openbao.clone(), agent.env.trust.vault_id.clone());
    let reply = tokio::task::spawn_blocking(move || remote.head_view(&vault_id))
        .await
        .map(Reply::RemoteHead)
        .unwrap_or_else(|e| ops::error(ErrorCode::Internal, e.to_string()));
    writer.reply(id, reply).await;
}
