//! The tool handlers. Each checks its arguments, opens the vault lazily (a locked or missing vault
//! is an error result that says what to run), and calls the same services the CLI uses.
use super::result::{action_result, time_obj, ToolResult};
use crate::approvals::{self, Action, ApprovalError, Submission, Submitted};
use crate::credentials::{self, CredentialError, Target};
use crate::exec::{Executor, HttpExecutor, Outcome, RecordingExecutor};
use crate::mcp::protocol::ClientInfo;
use crate::paths::VaultPaths;
use crate::policy::{self, HttpArgs, PolicyError, SshArgs, ValidatedRequest};
use crate::vault::{Vault, VaultError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How often a waiting call checks `PRAGMA data_version` (a counter SQLite bumps when another
/// connection commits; reading it touches no table), re-reading the action only when it moved.
const POLL: Duration = Duration::from_millis(10);
/// Re-read regardless at least this often (expiry needs no other writer).
const REREAD: Duration = Duration::from_secs(1);
/// How often a waiting call sends `notifications/progress` (when the client gave a token).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What every call of one session shares.
pub struct Ctx {
    pub paths: VaultPaths,
    pub profile: String,
    pub session_id: String,
    pub client: Mutex<ClientInfo>,
    vault: Mutex<Option<Vault>>,
    session_started: AtomicBool,
    pub wait_default_s: u64,
    pub expiry: Duration,
    pub replay_window: Duration,
    /// Executors for authorized actions. `VAULT_EXECUTOR_RECORD=FILE` replaces both with the
    /// recording executor, which runs nothing (the test seam of the final boundary).
    http: Arc<dyn Executor>,
    ssh: Option<Arc<dyn Executor>>,
}

impl Ctx {
    pub fn new(paths: VaultPaths, profile: String, config: &crate::config::Config) -> Self {
        Self {
            paths,
            profile,
            session_id: credentials::new_id("ses"),
            client: Mutex::new(ClientInfo::default()),
            vault: Mutex::new(None),
            session_started: AtomicBool::new(false),
            wait_default_s: config.approvals.wait_seconds,
            expiry: config.expiry(),
            replay_window: config.replay_window(),
            http: recording_executor()
                .unwrap_or_else(|| Arc::new(HttpExecutor::new(&config.limits))),
            ssh: recording_executor(),
        }
    }

    fn client(&self) -> ClientInfo {
        self.client.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Runs `f` with the open vault, opening it on first use (the person may have unlocked it
    /// since the last call). Journals `session.start` once the vault first opens.
    pub fn with_vault<T>(
        &self,
        f: impl FnOnce(&mut Vault) -> Result<T, ToolResult>,
    ) -> Result<T, ToolResult> {
        let mut guard = self
            .vault
            .lock()
            .map_err(|_| internal("the vault lock was poisoned"))?;
        if guard.is_none() {
            *guard = Some(Vault::open(self.paths.clone()).map_err(|e| vault_error(&e))?);
        }
        let vault = guard.as_mut().expect("opened above");
        if !self.session_started.swap(true, Ordering::SeqCst) {
            match approvals::reap_orphans(&mut vault.store) {
                Ok(0) => {}
                Ok(n) => tracing::info!("{n} actions of ended processes were closed"),
                Err(e) => tracing::warn!("could not close the actions of ended processes: {e}"),
            }
            let c = self.client();
            let body = json!({
                "client": {"name": c.name, "version": c.version},
                "parent": parent_process(),
                "profile": self.profile,
                "protocol_version": c.protocol_version,
            });
            let logged = vault.store.write().ok().and_then(|tx| {
                crate::audit::append(&tx, "session.start", Some(&self.session_id), None, &body)
                    .ok()?;
                tx.commit().ok()
            });
            if logged.is_none() {
                tracing::warn!("could not journal session.start");
            }
        }
        f(vault)
    }

    /// Journals a refused call (`call.rejected`: reason and a fingerprint of the bytes, never the
    /// bytes). A locked vault cannot journal; the refusal is then only logged.
    pub fn reject(&self, code: i64, reason: &str, raw: &[u8], tool: Option<&str>) {
        // Protocol messages may quote the request after a ':'; the journal keeps the category.
        let reason: String = reason
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .chars()
            .take(80)
            .collect();
        let reason = reason.as_str();
        let tool = tool.filter(|t| super::find(t).is_some());
        let fingerprint = blake3::hash(raw).to_hex();
        tracing::info!(code, reason, %fingerprint, tool, "rejected request");
        let _ = self.with_vault(|v| {
            if let Ok(tx) = v.store.write() {
                if crate::audit::record_rejection(
                    &tx,
                    Some(&self.session_id),
                    code,
                    reason,
                    raw,
                    tool,
                )
                .is_ok()
                {
                    let _ = tx.commit();
                }
            }
            Ok(())
        });
    }

    /// At the end of the session: withdraw what still waits, journal `session.end`.
    pub fn finish(&self, reason: &str) {
        if !self.session_started.load(Ordering::SeqCst) {
            return;
        }
        let _ = self.with_vault(|v| {
            let n =
                approvals::withdraw_session(&mut v.store, &self.session_id, "the client went away")
                    .unwrap_or(0);
            if let Ok(tx) = v.store.write() {
                let end = crate::audit::append(
                    &tx,
                    "session.end",
                    Some(&self.session_id),
                    None,
                    &json!({"reason": reason, "withdrawn": n}),
                );
                // The head at the end of every session also goes outside the database.
                if let (Ok(a), Ok(())) = (end, tx.commit()) {
                    if let Err(e) = crate::audit::write_anchor(&self.paths, a.seq, &a.hash) {
                        tracing::warn!("could not write the anchor: {e}");
                    }
                }
            }
            Ok(())
        });
    }
}

fn recording_executor() -> Option<Arc<dyn Executor>> {
    static RECORDER: std::sync::OnceLock<Option<Arc<RecordingExecutor>>> =
        std::sync::OnceLock::new();
    let r = RECORDER.get_or_init(|| {
        let path = std::env::var_os("VAULT_EXECUTOR_RECORD").filter(|p| !p.is_empty())?;
        match RecordingExecutor::create(path.into()) {
            Ok(r) => {
                tracing::warn!(
                    "VAULT_EXECUTOR_RECORD is set: actions are recorded, never executed"
                );
                Some(Arc::new(r))
            }
            Err(e) => panic!("VAULT_EXECUTOR_RECORD cannot be created: {e}"),
        }
    });
    r.clone().map(|r| r as Arc<dyn Executor>)
}

fn parent_process() -> Value {
    let ppid = std::os::unix::process::parent_id();
    let exe = std::fs::read_link(format!("/proc/{ppid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    json!({"pid": ppid, "exe": exe})
}

fn internal(msg: &str) -> ToolResult {
    ToolResult::error(
        "internal",
        msg,
        "retry; if it persists, restart the MCP server and check `vault doctor`",
        json!({}),
        Map::new(),
    )
}

fn vault_error(e: &VaultError) -> ToolResult {
    match e {
        VaultError::Locked(_) => ToolResult::error(
            "locked",
            "the vault is locked: its key is in no keyring",
            "ask the person to run `vault unlock` in a terminal, then call the tool again",
            json!({}),
            Map::new(),
        ),
        VaultError::NotInitialized(dir) => ToolResult::error(
            "not_initialized",
            &format!("there is no vault in {dir}"),
            "ask the person to run `vault init` in a terminal, then call the tool again",
            json!({}),
            Map::new(),
        ),
        other => {
            tracing::error!("cannot open the vault: {other}");
            internal("the vault cannot be opened; the person should run `vault doctor`")
        }
    }
}

fn invalid(message: String, fix: String, details: Value) -> ToolResult {
    ToolResult::error("invalid_argument", &message, &fix, details, Map::new())
}

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

/// Sends `notifications/progress` for one call, when the client asked for it.
pub struct Progress {
    pub token: Option<Value>,
    pub out: mpsc::Sender<String>,
}

impl Progress {
    async fn send(&self, n: u64, message: &str) {
        if let Some(token) = &self.token {
            let line = crate::mcp::jsonrpc::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": n, "message": message}),
            );
            let _ = self.out.send(line).await;
        }
    }
}

fn paused_error(ctx: &Ctx) -> Option<ToolResult> {
    ctx.with_vault(|v| Ok(approvals::paused(v.store.conn()).ok().flatten()))
        .ok()
        .flatten()
        .map(|why| {
            ToolResult::error(
                "paused",
                &format!("the vault is paused ({why}); no action runs until the person resumes it"),
                "tell the person; they lift it with `vault resume` in a terminal",
                json!({}),
                Map::new(),
            )
        })
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

/// Claims an approved (or policy-allowed) action and runs it on its executor; returns the action
/// in its new state (dispatched → completed / failed_before_send / indeterminate, or refused).
async fn dispatch(ctx: Arc<Ctx>, action: Action) -> Action {
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
            ValidatedRequest::Http(_) => ctx.http.execute(&authorized),
            ValidatedRequest::Ssh(_) => match &ctx.ssh {
                Some(e) => e.execute(&authorized),
                None => Outcome {
                    state: approvals::State::FailedBeforeSend,
                    result: json!({}),
                    reason: Some("this build has no SSH executor yet; nothing was sent".into()),
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
async fn wait_for(
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
            action = dispatch(ctx.clone(), action).await;
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

fn credential_error(e: &CredentialError) -> ToolResult {
    match e {
        CredentialError::NotFound { name, profile } => ToolResult::error(
            "not_found",
            &format!("no credential named {name:?} in this session's profile ({profile})"),
            "call list_credentials to see the names this session may use",
            json!({"credential": name}),
            Map::new(),
        ),
        other => {
            tracing::error!("credential store: {other}");
            internal("the credential could not be read; the person should run `vault doctor`")
        }
    }
}

fn policy_error(e: &PolicyError) -> ToolResult {
    let details = match e {
        PolicyError::Invalid { field, .. } => json!({"field": field}),
        PolicyError::Denied { .. } => json!({}),
    };
    ToolResult::error(e.code(), &e.to_string(), e.fix(), details, Map::new())
}

fn approval_error(e: &ApprovalError) -> ToolResult {
    match e {
        ApprovalError::NotFound(id) => ToolResult::error(
            "not_found",
            &format!("no action {id} in this session's profile"),
            "call list_recent_actions to see the action ids of this client",
            json!({"action_id": id}),
            Map::new(),
        ),
        ApprovalError::NotPending { id, state } => {
            let mut extra = Map::new();
            extra.insert("action_id".into(), json!(id));
            extra.insert("state".into(), json!(state.as_str()));
            ToolResult::error(
                "not_pending",
                &format!("action {id} is {state}; only a pending action can be cancelled"),
                "call get_action to see its result",
                json!({"action_id": id, "state": state.as_str()}),
                extra,
            )
        }
        other => {
            tracing::error!("action store: {other}");
            internal("the action could not be stored; the person should run `vault doctor`")
        }
    }
}
