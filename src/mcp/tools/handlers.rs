//! The tool handlers. Each checks its arguments, opens the vault lazily (a locked or missing vault
//! is an error result that says what to run), and calls the same services the CLI uses.
use super::ctx::Ctx;
use super::errors::{
    approval_error, credential_error, internal, invalid, paused_error, policy_error,
};
use super::result::{action_result, time_obj, ToolResult};
use super::wait::{wait_for, Progress};
use crate::approvals::{self, Submission, Submitted};
use crate::credentials::{self, Target};
use crate::policy::{self, HttpArgs, SshArgs, ValidatedRequest};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Checks argument names against the tool's input schema, then parses them into `T`.
fn parse_args<T: for<'de> Deserialize<'de>>(
    tool: &Value,
    args: &Map<String, Value>,
) -> Result<T, ToolResult> {
    let allowed = super::allowed_args(tool);
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
pub async fn call(
    ctx: Arc<Ctx>,
    tool: &'static Value,
    args: Map<String, Value>,
    raw: Vec<u8>,
    progress: Progress,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let result = run_call(ctx.clone(), tool, args, progress, cancel).await;
    if let Some(r) = &result {
        let code = r.structured["error"]["code"].as_str().unwrap_or("");
        if r.is_error
            && r.structured.get("action_id").is_none()
            && matches!(code, "invalid_argument" | "policy_denied" | "not_found")
        {
            // The category and the argument at fault, never text derived from the request.
            let reason = match r.structured["error"]["details"]["field"].as_str() {
                Some(field) => format!("{code} ({field})"),
                None => code.to_owned(),
            };
            let name = tool["name"].as_str().map(str::to_owned);
            let _ =
                tokio::task::spawn_blocking(move || ctx.reject(0, &reason, &raw, name.as_deref()))
                    .await;
        }
    }
    result
}

async fn run_call(
    ctx: Arc<Ctx>,
    tool: &'static Value,
    args: Map<String, Value>,
    progress: Progress,
    cancel: watch::Receiver<bool>,
) -> Option<ToolResult> {
    let name = tool["name"].as_str().unwrap_or("");
    let paused = {
        let ctx = ctx.clone();
        tokio::task::spawn_blocking(move || paused_error(&ctx))
            .await
            .ok()
            .flatten()
    };
    if let Some(p) = paused {
        return Some(p);
    }
    let blocking = |f: Box<dyn FnOnce(&Ctx) -> ToolResult + Send>| {
        let ctx = ctx.clone();
        async move {
            tokio::task::spawn_blocking(move || f(&ctx))
                .await
                .unwrap_or_else(|_| internal("a worker thread failed"))
        }
    };
    match name {
        "list_credentials" => {
            if let Err(e) = parse_args::<NoArgs>(tool, &args) {
                return Some(e);
            }
            Some(blocking(Box::new(list_credentials)).await)
        }
        "list_recent_actions" => match parse_args::<RecentArgs>(tool, &args) {
            Err(e) => Some(e),
            Ok(a) => Some(blocking(Box::new(move |c| list_recent(c, a.limit.unwrap_or(10)))).await),
        },
        "cancel_action" => match parse_args::<CancelArgs>(tool, &args) {
            Err(e) => Some(e),
            Ok(a) => Some(blocking(Box::new(move |c| cancel_action(c, &a.action_id))).await),
        },
        "get_action" => {
            let a = match parse_args::<GetArgs>(tool, &args) {
                Err(e) => return Some(e),
                Ok(a) => a,
            };
            let id = a.action_id.clone();
            let first = tokio::task::spawn_blocking({
                let ctx = ctx.clone();
                move || {
                    ctx.with_vault(|v| {
                        approvals::get(&v.store, &ctx.profile, &id).map_err(|e| approval_error(&e))
                    })
                }
            })
            .await
            .unwrap_or_else(|_| Err(internal("a worker thread failed")));
            match first {
                Err(e) => Some(e),
                Ok(action) => {
                    let wait = Duration::from_secs(a.wait_s.unwrap_or(0).min(120));
                    wait_for(ctx, action, wait, &progress, cancel, false)
                        .await
                        .map(|a| action_result(&a, false))
                }
            }
        }
        "http_request" | "ssh_exec" => {
            let parsed = if name == "http_request" {
                parse_args::<HttpArgs>(tool, &args).map(Request::Http)
            } else {
                parse_args::<SshArgs>(tool, &args).map(Request::Ssh)
            };
            let req = match parsed {
                Err(e) => return Some(e),
                Ok(r) => r,
            };
            let wait = Duration::from_secs(req.wait_s().unwrap_or(ctx.wait_default_s).min(120));
            let submitted = tokio::task::spawn_blocking({
                let ctx = ctx.clone();
                move || submit(&ctx, req)
            })
            .await
            .unwrap_or_else(|_| Err(internal("a worker thread failed")));
            match submitted {
                Err(e) => Some(e),
                Ok(Submitted::Replayed(a)) => Some(action_result(&a, true)),
                Ok(Submitted::Created(a) | Submitted::Existing(a)) => {
                    wait_for(ctx, a, wait, &progress, cancel, true)
                        .await
                        .map(|a| action_result(&a, false))
                }
            }
        }
        _ => Some(internal("unknown tool")),
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

fn list_credentials(ctx: &Ctx) -> ToolResult {
    ctx.with_vault(|v| {
        let creds = credentials::list(&v.store, Some(&ctx.profile)).map_err(|e| credential_error(&e))?;
        let items: Vec<Value> = creds
            .iter()
            .map(|c| {
                let mut item = json!({"name": c.name, "kind": c.target.kind(), "target": c.target.summary(), "approval": c.approval.as_str()});
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
        Ok(ToolResult::ok(json!({"profile": ctx.profile, "credentials": items})))
    })
    .unwrap_or_else(|e| e)
}

fn list_recent(ctx: &Ctx, limit: u32) -> ToolResult {
    if !(1..=50).contains(&limit) {
        return invalid(
            format!("limit {limit} is outside 1..=50"),
            "pass a limit between 1 and 50".into(),
            json!({}),
        );
    }
    let client = ctx.client().name;
    ctx.with_vault(|v| {
        let actions = approvals::list_recent(&v.store, &ctx.profile, Some(&client), limit).map_err(|e| approval_error(&e))?;
        let items: Vec<Value> = actions
            .iter()
            .map(|a| json!({"action_id": a.id, "state": a.state.as_str(), "tool": a.tool, "credential": a.credential_name, "summary": a.summary, "created": time_obj(&a.created_at)}))
            .collect();
        Ok(ToolResult::ok(json!({"actions": items})))
    })
    .unwrap_or_else(|e| e)
}

fn cancel_action(ctx: &Ctx, id: &str) -> ToolResult {
    ctx.with_vault(|v| {
        let a = approvals::withdraw(&mut v.store, &ctx.profile, id, "cancelled by the client")
            .map_err(|e| approval_error(&e))?;
        let mut r = action_result(&a, false);
        // Cancelling succeeded: report the withdrawn action without flagging an error.
        if let Value::Object(m) = &mut r.structured {
            m.remove("error");
        }
        Ok(ToolResult::ok(r.structured))
    })
    .unwrap_or_else(|e| e)
}

fn submit(ctx: &Ctx, req: Request) -> Result<Submitted, ToolResult> {
    let (cred_name, key) = match &req {
        Request::Http(a) => (a.credential.clone(), a.idempotency_key.clone()),
        Request::Ssh(a) => (a.credential.clone(), a.idempotency_key.clone()),
    };
    if let Some(k) = &key {
        let ok = !k.is_empty()
            && k.len() <= 128
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(&c));
        if !ok {
            return Err(invalid(
                "idempotency_key must be 1-128 of A-Z a-z 0-9 . _ : -".into(),
                "fix the key".into(),
                json!({}),
            ));
        }
    }
    let client = ctx.client().name;
    ctx.with_vault(|v| {
        let cred = credentials::get(&v.store, &ctx.profile, &cred_name)
            .map_err(|e| credential_error(&e))?;
        let validated: ValidatedRequest = match req {
            Request::Http(a) => policy::validate_http(&cred, a),
            Request::Ssh(a) => policy::validate_ssh(&cred, a),
        }
        .map_err(|e| policy_error(&e))?;
        approvals::submit(
            &mut v.store,
            Submission {
                session_id: &ctx.session_id,
                client: &client,
                profile: &ctx.profile,
                credential: &cred,
                request: &validated,
                idempotency_key: key.as_deref(),
                expiry: ctx.expiry,
                replay_window: ctx.replay_window,
            },
        )
        .map_err(|e| approval_error(&e))
    })
}
