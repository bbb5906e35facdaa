//! What every tool call of one `vault mcp` session shares: the lazily opened vault, the client's
//! identity, timings from `config.toml`, the executors, and the session's journal rows
//! (`session.start`, `call.rejected`, `session.end` with its anchor).
use super::errors::{internal, vault_error};
use super::result::ToolResult;
use crate::approvals;
use crate::credentials;
use crate::exec::{Executor, HttpExecutor, RecordingExecutor, SshExecutor};
use crate::mcp::protocol::ClientInfo;
use crate::paths::VaultPaths;
use crate::vault::Vault;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    pub(super) http: Arc<dyn Executor>,
    pub(super) ssh: Option<Arc<dyn Executor>>,
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
            ssh: Some(
                recording_executor().unwrap_or_else(|| Arc::new(SshExecutor::new(&config.limits))),
            ),
        }
    }

    pub(super) fn client(&self) -> ClientInfo {
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
