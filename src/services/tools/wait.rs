//! Waiting for a decision, and dispatch. A call subscribes to its action on the agent's hub (the
//! writer publishes every committed change: no polling), sends progress while it waits, withdraws
//! on cancellation, and runs an approved (or policy-allowed) action once `approvals::claim`
//! authorizes it. The run itself is a task of its own: a client that goes away mid-dispatch does
//! not stop the executor from finishing and recording what it observed.
use super::{Env, EventSink, Session};
use crate::approvals::{self, Action, State};
use crate::exec::{Cancel, Outcome};
use crate::policy::ValidatedRequest;
use crate::wire::protocol::Event;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often a waiting call sends progress (the client gave a token).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

fn runnable(s: State) -> bool {
    matches!(s, State::Approved | State::Received)
}

/// Claims an approved (or policy-allowed) action and runs it; returns the action in its new state
/// (dispatched → completed / failed_before_send / indeterminate, or refused).
async fn dispatch(
    env: &Arc<Env>,
    action: Action,
    events: &Arc<dyn EventSink>,
    cancel: Cancel,
) -> Action {
    let (trust, id) = (env.trust.clone(), action.id.clone());
    match env.db.run(move |s| approvals::claim(s, &trust, &id)).await {
        Ok(Ok(claim)) => run_claimed(env, action, claim, events, cancel).await,
        _ => action,
    }
}

/// Runs what a claim authorized (a refused or not-ready claim is returned as it is). `cancel`
/// (the call's cancellation) reaches the executor, which stops what it can.
pub(super) async fn run_claimed(
    env: &Arc<Env>,
    action: Action,
    claim: approvals::Claim,
    events: &Arc<dyn EventSink>,
    cancel: Cancel,
) -> Action {
    let authorized = match claim {
        approvals::Claim::Go(a) => a,
        approvals::Claim::Refused(a)
        | approvals::Claim::NotReady(a)
        | approvals::Claim::Tunnel(a) => return a,
    };
    // The intent row is committed; tell the client before the first byte goes out.
    tracing::debug!(action_id = %action.id, tool = %action.tool, "dispatching");
    events
        .send(Event::State {
            action_id: action.id.clone(),
            state: State::Dispatched,
        })
        .await;
    let (env2, fallback) = (env.clone(), action.clone());
    let run = tokio::spawn(async move {
        let exec = match authorized.request() {
            ValidatedRequest::Http(_) => env2.http.clone(),
            ValidatedRequest::Ssh(_) => env2.ssh.clone(),
        };
        let mut authorized = authorized;
        // Team mode: the secret (the KV value at the version the hash covers, or an ephemeral
        // key and its certificate) got only now, with the intent row committed and before the
        // first byte; a fault ends the action failed before sending.
        let mut refused = None;
        if let Some(what) = authorized.from_openbao().cloned() {
            let remote = env2.openbao.clone();
            let got = tokio::task::spawn_blocking(move || remote.fetch(&what)).await;
            match got {
                Ok(Ok(fetched)) => {
                    if let Some(cert) = fetched.cert {
                        let (id, session) = (action.id.clone(), action.session_id.clone());
                        let _ = env2
                            .db
                            .run_unsynced(move |s| {
                                crate::services::openbao::journal_cert(s, &session, &id, cert)
                            })
                            .await;
                    }
                    authorized.supply_secret(fetched.secret);
                }
                Ok(Err(e)) => {
                    tracing::warn!(action_id = %action.id, error = %e, "OpenBao could not give the secret; nothing was sent");
                    refused = Some(format!("{}: {e}", e.kind()));
                }
                Err(_) => refused = Some("openbao_error: the OpenBao request failed".into()),
            }
        }
        let outcome = match refused {
            Some(reason) => Outcome {
                state: State::FailedBeforeSend,
                result: json!({}),
                reason: Some(reason),
            },
            None => tokio::task::spawn_blocking(move || exec.execute(&authorized, &cancel))
                .await
                .unwrap_or_else(|_| Outcome {
                    state: State::Indeterminate,
                    result: json!({}),
                    reason: Some(
                        "the executor failed while running; the target may have acted".into(),
                    ),
                }),
        };
        tracing::debug!(action_id = %action.id, state = %outcome.state, reason = ?outcome.reason, "executor finished");
        tracing::trace!(action_id = %action.id, result = %outcome.result, "scrubbed result");
        let id = action.id.clone();
        env2.db
            .run_unsynced(move |s| approvals::finish(s, &id, &outcome).unwrap_or(action))
            .await
    });
    match run.await {
        Ok(Ok(done)) => done,
        _ => {
            let id = fallback.id.clone();
            env.db
                .run(move |s| approvals::find(s, &id))
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or(fallback)
        }
    }
}

/// How a wait ended.
pub(crate) enum Waited {
    /// Final, or still waiting when `wait_s` passed: answered with the action as it is.
    Done(Action),
    /// The client cancelled the call: MCP sends no response.
    Cancelled,
    /// The agent is stopping (`vault lock`, SIGTERM, end of its lifetime, idle): a pending action
    /// was withdrawn, and the call is answered with why, so the client never waits on it.
    Stopped(Action, &'static str),
}

/// Waits up to `wait` for the action to leave its waiting states. On client cancellation,
/// withdraws it when `withdraw_on_cancel`; when the agent stops, withdraws it in any case (the
/// session ends with the agent) and says so.
pub(crate) async fn wait_for(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    action: Action,
    wait: Duration,
    events: Arc<dyn EventSink>,
    mut cancel: watch::Receiver<bool>,
    withdraw_on_cancel: bool,
) -> Waited {
    if action.state.is_terminal() {
        return Waited::Done(action);
    }
    let mut rx = env.hub.watch_action(&action);
    // Re-read after subscribing, so a decision committed in between is not missed.
    let (sid, id) = (ses.id.clone(), action.id.clone());
    let mut action = env
        .db
        .run(move |s| approvals::get(s, &sid, &id))
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or(action);
    let counted = action.state == State::Pending;
    if counted {
        ses.waiting.fetch_add(1, Ordering::SeqCst);
    }
    let result = wait_loop(
        env,
        ses,
        &mut action,
        &mut rx,
        wait,
        &events,
        &mut cancel,
        withdraw_on_cancel,
    )
    .await;
    if counted {
        ses.waiting.fetch_sub(1, Ordering::SeqCst);
    }
    match result {
        Ended::Done => Waited::Done(action),
        Ended::Cancelled => Waited::Cancelled,
        Ended::Stopped(why) => Waited::Stopped(action, why),
    }
}

enum Ended {
    Done,
    Cancelled,
    Stopped(&'static str),
}

#[allow(clippy::too_many_arguments)]
async fn wait_loop(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    action: &mut Action,
    rx: &mut watch::Receiver<Action>,
    wait: Duration,
    events: &Arc<dyn EventSink>,
    cancel: &mut watch::Receiver<bool>,
    withdraw_on_cancel: bool,
) -> Ended {
    let deadline = Instant::now() + wait;
    let mut next_progress = Instant::now();
    let mut tick = 0u64;
    let mut last_state: Option<State> = None;
    loop {
        if runnable(action.state) {
            *action = dispatch(env, action.clone(), events, Cancel::new(cancel.clone())).await;
            if !runnable(action.state) {
                continue;
            }
        }
        if last_state != Some(action.state) {
            last_state = Some(action.state);
            events
                .send(Event::State {
                    action_id: action.id.clone(),
                    state: action.state,
                })
                .await;
        }
        // A dispatched network action's connection is `vault run`'s proxy's to open: the wait
        // ends there.
        let handed_over = action.state == State::Dispatched && action.tool == approvals::NETWORK;
        if action.state.is_terminal() || handed_over || Instant::now() >= deadline {
            return Ended::Done;
        }
        if Instant::now() >= next_progress {
            tick += 1;
            let message = format!(
                "{}: waiting for approval in `vault approve` ({})",
                action.id, action.state
            );
            events.send(Event::Progress { n: tick, message }).await;
            next_progress += PROGRESS_EVERY;
        }
        tokio::select! {
            changed = rx.changed() => {
                if changed.is_err() {
                    return Ended::Done;
                }
                let fresh = rx.borrow_and_update().clone();
                *action = fresh;
            }
            _ = tokio::time::sleep_until(next_progress.min(deadline)) => {}
            changed = cancel.changed() => {
                if changed.is_ok() && *cancel.borrow() {
                    // The agent stopping cancels every call of the connection: that is not the
                    // client's cancellation, and the call is answered.
                    let stopping = *env.stopping.borrow();
                    let reason = match stopping {
                        Some(why) => format!("the vault locked while it waited: {}", stop_text(why)),
                        None => "the client cancelled the request".to_owned(),
                    };
                    if (withdraw_on_cancel || stopping.is_some()) && action.state == State::Pending {
                        let (sid, id) = (ses.id.clone(), action.id.clone());
                        if let Ok(Ok(a)) = env.db.run(move |s| {
                            approvals::withdraw(s, &sid, &id, &reason)
                        }).await {
                            *action = a;
                        }
                    }
                    return match stopping {
                        Some(why) => Ended::Stopped(why),
                        None => Ended::Cancelled,
                    };
                }
            }
        }
    }
}

/// Why the agent stopped, as a person would say it.
pub(crate) fn stop_text(why: &str) -> &'static str {
    match why {
        "vault lock" => "the person locked it (`vault lock`)",
        "restart" => "the person restarted the vault agent (`vault unlock --restart`)",
        "signal" => "the vault agent was told to stop (SIGTERM)",
        "lifetime ended" => "its unlock time (`vault unlock --for`) ran out",
        "idle" => "it locked itself after its idle time",
        "agent.lock replaced" => {
            "its lock file (agent.lock) was moved or replaced, so the agent locked the vault"
        }
        _ => "the vault agent stopped",
    }
}
