//! Waiting for a decision, and dispatch: a call polls cheaply until its action is decided, sends
//! `notifications/progress` when asked, withdraws on cancellation, and runs an approved (or
//! policy-allowed) action on its executor once `approvals::claim` authorizes it.
use super::ctx::Ctx;
use super::errors::approval_error;
use crate::approvals::{self, Action};
use crate::exec::{Cancel, Outcome};
use crate::policy::ValidatedRequest;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How often a waiting call checks `PRAGMA data_version` (a counter SQLite bumps when another
/// connection commits; reading it touches no table), re-reading the action only when it moved.
const POLL: Duration = Duration::from_millis(10);

/// Re-read regardless at least this often (expiry needs no other writer).
const REREAD: Duration = Duration::from_secs(1);

/// How often a waiting call sends `notifications/progress` (when the client gave a token).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// Sends `notifications/progress` for one call, when the client asked for it.
pub struct Progress {
    pub token: Option<Value>,
    pub out: mpsc::Sender<String>,
}

impl Progress {
    pub(super) async fn send(&self, n: u64, message: &str) {
        if let Some(token) = &self.token {
            let line = crate::mcp::jsonrpc::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": n, "message": message}),
            );
            let _ = self.out.send(line).await;
        }
    }
}

/// Claims an approved (or policy-allowed) action and runs it on its executor; returns the action
/// in its new state (dispatched → completed / failed_before_send / indeterminate, or refused).
/// `cancel` (the call's cancellation) reaches the executor, which stops the action it runs.
pub(super) async fn dispatch(ctx: Arc<Ctx>, action: Action, cancel: Cancel) -> Action {
    let fallback = action.clone();
    tokio::task::spawn_blocking(move || {
        let claimed = ctx.with_vault(|v| {
            approvals::claim(&mut v.store, &action.id).map_err(|e| approval_error(&e))
        });
        let authorized = match claimed {
            Ok(approvals::Claim::Go(a)) => a,
            Ok(approvals::Claim::Refused(a) | approvals::Claim::NotReady(a)) => return a,
            Err(_) => return action,
        };
        let outcome = match authorized.request() {
            ValidatedRequest::Http(_) => ctx.http.execute(&authorized, &cancel),
            ValidatedRequest::Ssh(_) => match &ctx.ssh {
                Some(e) => e.execute(&authorized, &cancel),
                None => Outcome {
                    state: approvals::State::FailedBeforeSend,
                    result: json!({}),
                    reason: Some("the SSH executor could not start (see the log of `vault mcp`); nothing was sent".into()),
                },
            },
        };
        drop(authorized);
        ctx.with_vault(|v| {
            let done = approvals::finish(&mut v.store, &action.id, &outcome)
                .map_err(|e| approval_error(&e))?;
            if let Err(e) = crate::audit::maybe_anchor(&v.paths, v.store.conn()) {
                tracing::warn!("could not write the anchor: {e}");
            }
            Ok(done)
        })
        .unwrap_or(action)
    })
    .await
    .unwrap_or(fallback)
}

/// Waits up to `wait` for the action to leave its waiting states. On client cancellation,
/// withdraws it when `withdraw_on_cancel` and returns `None`.
pub(super) async fn wait_for(
    ctx: Arc<Ctx>,
    mut action: Action,
    wait: Duration,
    progress: &Progress,
    mut cancel: watch::Receiver<bool>,
    withdraw_on_cancel: bool,
) -> Option<Action> {
    let start = Instant::now();
    let mut next_progress = start;
    let mut tick = 0u64;
    let mut seen_version: Option<i64> = None;
    let mut last_read = Instant::now();
    loop {
        if matches!(
            action.state,
            approvals::State::Approved | approvals::State::Received
        ) {
            action = dispatch(ctx.clone(), action, Cancel::new(cancel.clone())).await;
            if !matches!(
                action.state,
                approvals::State::Approved | approvals::State::Received
            ) {
                continue;
            }
        }
        if action.state.is_terminal() || start.elapsed() >= wait {
            break;
        }
        if Instant::now() >= next_progress {
            tick += 1;
            let msg = format!(
                "{}: waiting for approval in `vault approve` ({})",
                action.id, action.state
            );
            progress.send(tick, &msg).await;
            next_progress += PROGRESS_EVERY;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() {
                    if withdraw_on_cancel {
                        let (ctx2, id) = (ctx.clone(), action.id.clone());
                        let _ = tokio::task::spawn_blocking(move || ctx2.with_vault(|v| {
                            let _ = approvals::withdraw(&mut v.store, &ctx2.profile, &id, "the client cancelled the request");
                            Ok(())
                        })).await;
                    }
                    return None;
                }
            }
        }
        let (ctx2, id) = (ctx.clone(), action.id.clone());
        let force = last_read.elapsed() >= REREAD;
        let fresh = tokio::task::spawn_blocking(move || {
            ctx2.with_vault(|v| {
                let dv: Option<i64> = v
                    .store
                    .conn()
                    .query_row("PRAGMA data_version", [], |r| r.get(0))
                    .ok();
                if !force && dv.is_some() && dv == seen_version {
                    return Ok((dv, None));
                }
                let _ = approvals::expire_due(&mut v.store);
                let a =
                    approvals::get(&v.store, &ctx2.profile, &id).map_err(|e| approval_error(&e))?;
                Ok((dv, Some(a)))
            })
        })
        .await;
        if let Ok(Ok((dv, read))) = fresh {
            seen_version = dv;
            if let Some(a) = read {
                action = a;
                last_read = Instant::now();
            }
        }
    }
    Some(action)
}
