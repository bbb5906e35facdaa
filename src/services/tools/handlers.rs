//! The tool handlers, as the agent runs them: each checks its arguments against the catalog,
//! fails closed when the pause switch cannot be read, and calls the approvals and credential
//! services inside the agent's writer. Refused calls are journaled as `call.rejected`.
use super::errors::{approval_error, credential_error, invalid, paused_error, policy_error};
use super::remote::{resolve, Remote};
use super::result::{action_result, stopped_result, time_obj};
use super::wait::{wait_for, Waited};
use super::{Env, EventSink, Session, MAX_WAITING_PER_SESSION};
use crate::approvals::{self, Submission, Submitted};
use crate::credentials::{self, Target};
use crate::policy::{self, HttpArgs, SshArgs, ValidatedRequest};
use crate::store::Store;
use crate::wire::{internal, ToolErrorCode};
use crate::wire::{OpenBaoRef, ToolResult};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Checks argument names against the tool's input schema, then parses them into `T`.
fn parse_args<T: for<'de> Deserialize<'de>>(
    tool: &Value,
    args: &Map<String, Value>,
) -> Result<T, ToolResult> {
    let allowed = crate::wire::catalog::allowed_args(tool);
    let unknown: Vec<&str> = args
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    let name = tool["name"].as_str().unwrap_or("");
    if !unknown.is_empty() {
        return Err(invalid(
            format!(
                "{name} does not take {}",
                unknown
                    .iter()
                    .map(|u| format!("`{u}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            if allowed.is_empty() {
                format!("call {name} with no arguments: {{}}")
            } else {
                format!("use only these arguments: {}", allowed.join(", "))
            },
            json!({"unknown": unknown, "allowed": allowed}),
        ));
    }
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| {
        invalid(
            format!("{name}: {e}"),
            format!("fix the argument; see the input schema of {name} in tools/list"),
            json!({"allowed": allowed}),
        )
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    action_id: String,
    wait_s: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecentArgs {
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelArgs {
    action_id: String,
}

/// Runs one `tools/call` and journals it as `call.rejected` when it was refused before it could
/// become an action (bad arguments, unknown credential, policy). `None`: cancelled, no response.
pub(crate) async fn call(
    env: Arc<Env>,
    ses: Arc<Session>,
    name: &str,
    args: Map<String, Value>,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let Some(tool) = crate::wire::catalog::find(name) else {
        return Some(invalid(
            format!("there is no tool {name:?}"),
            "call tools/list to see the tools".into(),
            json!({}),
        ));
    };
    let fingerprint = blake3::hash(
        crate::canonical::to_string(&json!({"name": name, "arguments": args})).as_bytes(),
    )
    .to_hex()
    .to_string();
    let result = run_call(&env, &ses, tool, args, events, cancel).await;
    if let Some(r) = &result {
        let refused = match r.code() {
            Some(
                c @ (ToolErrorCode::InvalidArgument
                | ToolErrorCode::PolicyDenied
                | ToolErrorCode::NotFound),
            ) => Some(c),
            _ => None,
        };
        if let Some(code) = refused.filter(|_| r.structured.get("action_id").is_none()) {
            // The category and the argument at fault, never text derived from the request.
            let reason = match r.structured["error"]["details"]["field"].as_str() {
                Some(field) => format!("{code} ({field})"),
                None => code.as_str().to_owned(),
            };
            reject(&env, Some(&ses), 0, &reason, &fingerprint, Some(name)).await;
        }
    }
    result
}

/// Journals a refused call (`call.rejected`: a category and a fingerprint, never the bytes),
/// within the session's budget of refused calls per second (past it they are counted, and the
/// count journaled as `call.suppressed` before the next one that is journaled).
pub(crate) async fn reject(
    env: &Env,
    ses: Option<&Session>,
    code: i64,
    reason: &str,
    fingerprint: &str,
    tool: Option<&str>,
) {
    let per_second = env.config.limits.refused_calls_per_second;
    let suppressed = match ses {
        Some(s) => match s
            .rejections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(per_second)
        {
            Some(n) => n,
            None => {
                tracing::debug!("a refused call over the per-second budget was counted");
                return;
            }
        },
        None => 0,
    };
    let session = ses.map(|s| s.id.clone()).unwrap_or_default();
    let reason: String = reason
        .split(':')
        .next()
        .unwrap_or("")
        .trim()
        .chars()
        .take(80)
        .collect();
    let tool = tool
        .filter(|t| crate::wire::catalog::find(t).is_some())
        .map(str::to_owned);
    let fingerprint = fingerprint.to_owned();
    tracing::info!(code, reason, %fingerprint, ?tool, "rejected request");
    let done = env
        .db
        .run(
            move |s: &mut Store| -> Result<(), crate::store::StoreError> {
                let tx = s.write()?;
                if suppressed > 0 {
                    let body = crate::wire::journal::CallSuppressed {
                        count: suppressed,
                        reason: "over the refused-calls-per-second budget".into(),
                    };
                    crate::audit::append(&tx, Some(&session), None, &body)
                        .map_err(|e| crate::store::StoreError::Damaged(audit_damage(&e)))?;
                }
                crate::audit::record_rejection(
                    &tx,
                    Some(&session),
                    code,
                    &reason,
                    &fingerprint,
                    tool.as_deref(),
                )
                .map_err(|e| crate::store::StoreError::Damaged(audit_damage(&e)))?;
                tx.commit()
            },
        )
        .await;
    if !matches!(done, Ok(Ok(()))) {
        tracing::warn!("could not journal a rejected call");
    }
}

fn audit_damage(e: &crate::audit::AuditError) -> &'static str {
    tracing::error!("journal append failed: {e}");
    "the journal could not be appended to"
}

async fn run_call(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    tool: &'static Value,
    args: Map<String, Value>,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let name = tool["name"].as_str().unwrap_or("");
    // Fail closed: a pause switch that cannot be read refuses the call. (`http_request` and
    // `ssh_exec` check it in the same job as their submission.)
    if !matches!(name, "http_request" | "ssh_exec") {
        if let Some(refusal) = env
            .db
            .run(paused_refusal)
            .await
            .unwrap_or_else(|_| Some(internal("the vault agent is stopping")))
        {
            return Some(refusal);
        }
    }
    let (session, profile) = (ses.id.clone(), ses.profile.clone());
    let db = |f: Box<dyn FnOnce(&mut Store) -> ToolResult + Send>| async {
        env.db
            .run(f)
            .await
            .unwrap_or_else(|_| internal("the vault agent is stopping"))
    };
    match name {
        "list_credentials" => Some(match parse_args::<NoArgs>(tool, &args) {
            Err(e) => e,
            Ok(_) => {
                let trust = env.trust.clone();
                db(Box::new(move |s| list_credentials(s, &trust, &profile))).await
            }
        }),
        "list_recent_actions" => Some(match parse_args::<RecentArgs>(tool, &args) {
            Err(e) => e,
            Ok(a) => {
                db(Box::new(move |s| {
                    list_recent(s, &session, a.limit.unwrap_or(10))
                }))
                .await
            }
        }),
        "cancel_action" => Some(match parse_args::<CancelArgs>(tool, &args) {
            Err(e) => e,
            Ok(a) => db(Box::new(move |s| cancel_action(s, &session, &a.action_id))).await,
        }),
        "get_action" => get_action(env, ses, tool, &args, events, cancel).await,
        "http_request" | "ssh_exec" => Some(match parse_request(tool, &args) {
            Err(e) => e,
            Ok(req) => request_action(env, ses, req, events, cancel).await?,
        }),
        _ => Some(internal("unknown tool")),
    }
}

/// `get_action`: the caller's own action, waited on for up to `wait_s`.
async fn get_action(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    tool: &'static Value,
    args: &Map<String, Value>,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let a = match parse_args::<GetArgs>(tool, args) {
        Err(e) => return Some(e),
        Ok(a) => a,
    };
    let (session, id) = (ses.id.clone(), a.action_id.clone());
    let first = env
        .db
        .run(move |s| approvals::get(s, &session, &id).map_err(|e| approval_error(&e)))
        .await
        .unwrap_or_else(|_| Err(internal("the vault agent is stopping")));
    match first {
        Err(e) => Some(e),
        Ok(action) => {
            let wait = Duration::from_secs(a.wait_s.unwrap_or(0).min(120));
            answer(wait_for(env, ses, action, wait, events, cancel, false).await)
        }
    }
}

fn parse_request(tool: &'static Value, args: &Map<String, Value>) -> Result<Request, ToolResult> {
    if tool["name"] == "http_request" {
        parse_args::<HttpArgs>(tool, args).map(Request::Http)
    } else {
        parse_args::<SshArgs>(tool, args).map(Request::Ssh)
    }
}

/// `http_request` / `ssh_exec`: submitted (or replayed), run at once when policy allows it,
/// then waited on until it is final or `wait_s` passes. `None`: the call was cancelled.
async fn request_action(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    req: Request,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let wait_default = env.config.approvals.wait_seconds;
    let wait = Duration::from_secs(req.wait_s().unwrap_or(wait_default).min(120));
    let action = match submit(env, ses, req).await {
        Err(e) => return Some(e),
        Ok((Submitted::Replayed(a), _)) => return Some(action_result(&a, true)),
        Ok((Submitted::Created(a), Some(claim))) => {
            // Policy-allowed: claimed in the job that created it (one commit).
            let exec_cancel = crate::exec::Cancel::new(cancel.clone());
            super::wait::run_claimed(env, a, claim, &events, exec_cancel).await
        }
        Ok((Submitted::Created(a) | Submitted::Existing(a), _)) => a,
    };
    answer(wait_for(env, ses, action, wait, events, cancel, true).await)
}

/// `vault run`'s proxy's swapped request (`services::egress::swap`): an `http_request` of the
/// egress session, submitted and run exactly as one (`HttpArgs::proxied` only shapes its
/// response), and waited on until final or until its card expires. `Err`: refused before it
/// became an action. `Ok(None)`: the proxy withdrew it.
pub(crate) async fn proxied(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    args: HttpArgs,
    events: Arc<dyn EventSink>,
    cancel: watch::Receiver<bool>,
) -> Result<Option<crate::wire::Action>, ToolResult> {
    let wait = env.config.expiry() + Duration::from_secs(1);
    let action = match submit(
        env,
        ses,
        Request::Http(HttpArgs {
            proxied: true,
            ..args
        }),
    )
    .await?
    {
        (Submitted::Created(a), Some(claim)) => {
            let exec_cancel = crate::exec::Cancel::new(cancel.clone());
            super::wait::run_claimed(env, a, claim, &events, exec_cancel).await
        }
        (Submitted::Created(a) | Submitted::Existing(a) | Submitted::Replayed(a), _) => a,
    };
    Ok(
        match wait_for(env, ses, action, wait, events, cancel, true).await {
            Waited::Done(a) | Waited::Stopped(a, _) => Some(a),
            Waited::Cancelled => None,
        },
    )
}

/// A wait's answer: `None` only when the client itself cancelled the call.
fn answer(waited: Waited) -> Option<ToolResult> {
    match waited {
        Waited::Done(a) => Some(action_result(&a, false)),
        Waited::Stopped(a, why) => Some(stopped_result(&a, why)),
        Waited::Cancelled => None,
    }
}

enum Request {
    Http(HttpArgs),
    Ssh(SshArgs),
}

impl Request {
    fn wait_s(&self) -> Option<u64> {
        match self {
            Request::Http(a) => a.wait_s,
            Request::Ssh(a) => a.wait_s,
        }
    }
}

/// The pause switch as a refusal; one that cannot be read refuses too.
fn paused_refusal(s: &mut Store) -> Option<ToolResult> {
    match approvals::paused(s.conn()) {
        Ok(None) => None,
        Ok(Some(why)) => Some(paused_error(&why)),
        Err(_) => Some(internal("the pause switch cannot be read; nothing runs")),
    }
}

fn list_credentials(s: &mut Store, trust: &approvals::Trust, profile: &str) -> ToolResult {
    let creds = match credentials::list(s, trust, Some(profile)) {
        Ok(c) => c,
        Err(e) => return credential_error(&e),
    };
    let items: Vec<Value> = creds
        .iter()
        .map(|l| {
            let c = &l.credential;
            // The policy in force: an unsigned one counts as `each`.
            let mut item = json!({"name": c.name, "kind": c.target.kind(), "target": c.target.summary(), "approval": l.effective().as_str(), "signed": l.signed});
            match &c.target {
                Target::Http(h) => {
                    item["methods"] = json!(h.methods);
                    item["path_prefix"] = json!(h.path_prefix);
                }
                Target::Ssh(s) => item["allow_commands"] = json!(s.allow_commands),
            }
            item
        })
        .collect();
    ToolResult::ok(json!({"profile": profile, "credentials": items}))
}

fn list_recent(s: &mut Store, session: &str, limit: u32) -> ToolResult {
    if !(1..=50).contains(&limit) {
        return invalid(
            format!("limit {limit} is outside 1..=50"),
            "pass a limit between 1 and 50".into(),
            json!({}),
        );
    }
    match approvals::list_recent(s, session, limit) {
        Err(e) => approval_error(&e),
        Ok(actions) => {
            let items: Vec<Value> = actions
                .iter()
                .map(|a| json!({"action_id": a.id, "state": a.state.as_str(), "tool": a.tool, "credential": a.credential_name, "summary": a.summary, "created": time_obj(&a.created_at)}))
                .collect();
            ToolResult::ok(json!({"actions": items}))
        }
    }
}

fn cancel_action(s: &mut Store, session: &str, id: &str) -> ToolResult {
    match approvals::withdraw(s, session, id, "cancelled by the client") {
        Err(e) => approval_error(&e),
        Ok(a) => {
            let mut r = action_result(&a, false);
            // Cancelling succeeded: report the withdrawn action without flagging an error.
            if let Value::Object(m) = &mut r.structured {
                m.remove("error");
            }
            ToolResult::ok(r.structured)
        }
    }
}

fn check_idempotency_key(key: Option<&str>) -> Result<(), ToolResult> {
    let ok = key.is_none_or(|k| {
        !k.is_empty()
            && k.len() <= 128
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(&c))
    });
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "idempotency_key must be 1-128 of A-Z a-z 0-9 . _ : -".into(),
            "fix the key".into(),
            json!({"field": "idempotency_key"}),
        ))
    }
}

/// Checks the pause switch, validates and submits, and (in the same job, so one commit) claims
/// an action its signed policy lets run without a card.
async fn submit(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    req: Request,
) -> Result<(Submitted, Option<approvals::Claim>), ToolResult> {
    let (cred_name, key) = match &req {
        Request::Http(a) => (a.credential.clone(), a.idempotency_key.clone()),
        Request::Ssh(a) => (a.credential.clone(), a.idempotency_key.clone()),
    };
    check_idempotency_key(key.as_deref())?;
    if ses.waiting.load(Ordering::SeqCst) >= MAX_WAITING_PER_SESSION {
        return Err(ToolResult::error(
            ToolErrorCode::Limit,
            &format!(
                "this session already has {MAX_WAITING_PER_SESSION} actions waiting for a person"
            ),
            "wait for them with get_action, or withdraw some with cancel_action, then ask again",
            json!({}),
            Map::new(),
        ));
    }
    // Team mode: a credential whose secret is in OpenBao makes the job return first, so the KV
    // version is resolved off the writer's thread; the job then runs again with it. Any other
    // call is one job, as before.
    let mut remote = Remote::Unknown;
    let mut req = req;
    loop {
        match submit_job(env, ses, req, &cred_name, key.clone(), remote).await {
            Step::Done(done) => return done,
            Step::Resolve(r, back) => {
                remote = resolve(env, r).await;
                req = back;
            }
        }
    }
}

/// What one submission job did: finished, or stopped to have a secret's KV version resolved.
/// Returned once per job and moved out at once, so its size costs nothing.
#[allow(clippy::large_enum_variant)]
enum Step {
    Done(Result<(Submitted, Option<approvals::Claim>), ToolResult>),
    /// The secret's reference, and the call, given back for the next job.
    Resolve(OpenBaoRef, Request),
}

/// One job on the writer: the pause switch, the credential, policy, the submission and, for an
/// action its signed policy lets run without a card, the claim (one commit).
async fn submit_job(
    env: &Arc<Env>,
    ses: &Arc<Session>,
    req: Request,
    cred_name: &str,
    key: Option<String>,
    remote: Remote,
) -> Step {
    let (trust, ses2, cred_name) = (env.trust.clone(), ses.clone(), cred_name.to_owned());
    let (expiry, replay) = (env.config.expiry(), env.config.replay_window());
    env.db
        .run(move |s| {
            if let Some(refusal) = paused_refusal(s) {
                return Step::Done(Err(refusal));
            }
            let cred = match credentials::get(s, &ses2.profile, &cred_name) {
                Ok(c) => c,
                Err(e) => return Step::Done(Err(credential_error(&e))),
            };
            if let (Target::Http(t), Remote::Unknown) = (&cred.target, &remote) {
                if let Some(r) = &t.secret_from {
                    return Step::Resolve(r.clone(), req);
                }
            }
            let validated = match req {
                Request::Http(a) => policy::validate_http(&cred, a),
                Request::Ssh(a) => policy::validate_ssh(&cred, a),
            };
            let mut validated: ValidatedRequest = match validated {
                Ok(v) => v,
                Err(e) => return Step::Done(Err(policy_error(&e))),
            };
            let unresolved = remote.apply(&cred, &mut validated);
            Step::Done((|| {
                let submitted = approvals::submit(
                    s,
                    &trust,
                    Submission {
                        session_id: &ses2.id,
                        client: &ses2.client.name,
                        profile: &ses2.profile,
                        credential: &cred,
                        request: &validated,
                        idempotency_key: key.as_deref(),
                        expiry,
                        replay_window: replay,
                        unresolved: unresolved.as_deref(),
                    },
                )
                .map_err(|e| approval_error(&e))?;
                let claim = match &submitted {
                    Submitted::Created(a) if a.state == approvals::State::Received => {
                        Some(approvals::claim(s, &trust, &a.id).map_err(|e| approval_error(&e))?)
                    }
                    _ => None,
                };
                Ok((submitted, claim))
            })())
        })
        .await
        .unwrap_or_else(|_| Step::Done(Err(internal("the vault agent is stopping"))))
}

#[cfg(test)]
#[path = "parity_tests.rs"]
mod parity_tests;
