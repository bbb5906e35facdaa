//! `vault mcp`'s link to the custody agent: one agent connection per MCP session (opened at
//! `initialize`, or at the first tool call once the person unlocked), one typed request per
//! `tools/call`, the agent's events turned into `notifications/progress`, and an honest answer
//! when the agent is missing (`locked`) or goes away mid-call (`indeterminate` once the action
//! may have been sent). This process never holds a key or a secret.
use super::protocol::ClientInfo;
use crate::agent::protocol::{
    self, AgentFrame, ClientFrame, ErrorCode, Event, Reply, Request, Role, Splitter, VERSION,
};
use crate::paths::VaultPaths;
use crate::wire::State;
use crate::wire::{internal, locked, ToolErrorCode, ToolResult};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch};

/// Sends `notifications/progress` for one call, when the client asked for it.
pub(super) struct Progress {
    pub token: Option<Value>,
    pub out: mpsc::Sender<String>,
}

impl Progress {
    async fn send(&self, n: u64, message: &str) {
        if let Some(token) = &self.token {
            let line = super::jsonrpc::notification(
                "notifications/progress",
                json!({"progressToken": token, "progress": n, "message": message}),
            );
            let _ = self.out.send(line).await;
        }
    }
}

type Waiters = Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<AgentFrame>>>>;

/// One open connection to the agent.
struct AgentConn {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    waiters: Waiters,
    next: AtomicU64,
    closed: watch::Receiver<bool>,
}

impl AgentConn {
    fn register(&self) -> (u64, mpsc::UnboundedReceiver<AgentFrame>) {
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        if let Ok(mut w) = self.waiters.lock() {
            w.insert(id, tx);
        }
        (id, rx)
    }

    async fn send(&self, id: u64, req: Request) -> bool {
        let line = protocol::encode(&ClientFrame { id, req });
        self.writer.lock().await.write_all(&line).await.is_ok()
    }

    /// A request and its reply (or `None` if the agent went away).
    async fn call(&self, req: Request) -> Option<Reply> {
        let (id, mut rx) = self.register();
        if !self.send(id, req).await {
            return None;
        }
        while let Some(f) = rx.recv().await {
            if let AgentFrame::Reply { reply, .. } = f {
                return Some(*reply);
            }
        }
        None
    }
}

/// Why there is no connection.
enum Missing {
    NoVault(String),
    Locked,
}

/// The session's link to the agent.
pub(super) struct Link {
    paths: VaultPaths,
    profile: String,
    client: Mutex<ClientInfo>,
    conn: tokio::sync::Mutex<Option<Arc<AgentConn>>>,
}

impl Link {
    pub(super) fn new(paths: VaultPaths, profile: String) -> Self {
        Self {
            paths,
            profile,
            client: Mutex::default(),
            conn: tokio::sync::Mutex::new(None),
        }
    }

    pub(super) fn set_client(&self, info: ClientInfo) {
        if let Ok(mut c) = self.client.lock() {
            *c = info;
        }
    }

    /// The open connection, connecting (and saying hello, which journals `session.start`) if
    /// there is none or the last one closed.
    async fn conn(&self) -> Result<Arc<AgentConn>, Missing> {
        self.conn_telling(None).await
    }

    /// `conn`, telling `connected` as soon as the socket is connected (before the hello), or
    /// dropping it when it cannot be.
    async fn conn_telling(
        &self,
        connected: Option<oneshot::Sender<()>>,
    ) -> Result<Arc<AgentConn>, Missing> {
        let mut guard = self.conn.lock().await;
        if let Some(c) = guard.as_ref() {
            if !*c.closed.borrow() {
                return Ok(c.clone());
            }
        }
        // `vault.id` names the agent's socket; it is also all of the vault `vault run` shows
        // its client (the database and key file stay hidden).
        if !self.paths.id_file().exists() {
            return Err(Missing::NoVault(self.paths.dir().display().to_string()));
        }
        let socket = crate::agent::client::socket_of(&self.paths).ok_or(Missing::Locked)?;
        if let Some(dir) = socket.parent() {
            crate::agent::socket::check_dir(dir).map_err(|_| Missing::Locked)?;
        }
        let stream = UnixStream::connect(&socket)
            .await
            .map_err(|_| Missing::Locked)?;
        if let Some(tx) = connected {
            let _ = tx.send(());
        }
        let (read, write) = stream.into_split();
        let waiters: Waiters = Arc::default();
        let (closed_tx, closed) = watch::channel(false);
        tokio::spawn(route_frames(read, waiters.clone(), closed_tx));
        let conn = Arc::new(AgentConn {
            writer: tokio::sync::Mutex::new(write),
            waiters,
            next: AtomicU64::new(1),
            closed,
        });
        let client = self.client.lock().map(|c| c.clone()).unwrap_or_default();
        let hello = Request::Hello {
            v: VERSION,
            role: Role::Mcp,
            client: Some(client),
            profile: Some(self.profile.clone()),
        };
        match conn.call(hello).await {
            Some(Reply::Welcome {
                session, warnings, ..
            }) => {
                tracing::info!(?session, "connected to the vault agent");
                // On stderr, where MCP clients keep a server's log.
                for w in warnings {
                    tracing::warn!("the vault agent says: {w}");
                }
            }
            other => {
                tracing::warn!("the vault agent refused this session: {other:?}");
                return Err(Missing::Locked);
            }
        }
        *guard = Some(conn.clone());
        Ok(conn)
    }

    /// Opens the agent connection early (at `initialize`), so `session.start` is journaled when
    /// the session starts; without an agent nothing happens until a tool call. `connected` is
    /// told once the socket is connected (dropped if it cannot be).
    pub(super) async fn connect_early(&self, connected: oneshot::Sender<()>) {
        // A client shows the server as connected either way; its log (our stderr) says why every
        // tool will answer `locked`.
        match self.conn_telling(Some(connected)).await {
            Ok(_) => {}
            Err(Missing::Locked) => tracing::warn!(
                "the vault is locked: every tool answers `locked` until the person runs `vault unlock`"
            ),
            Err(Missing::NoVault(dir)) => tracing::warn!(
                "no vault in {dir}: `vault init` creates one (or set VAULT_DIR in this server's env)"
            ),
        }
    }

    /// One `tools/call`, run by the agent. `None`: cancelled, no response.
    pub(super) async fn tool(
        &self,
        name: &str,
        args: Map<String, Value>,
        progress: &Progress,
        mut cancel: watch::Receiver<bool>,
    ) -> Option<ToolResult> {
        let conn = match self.conn().await {
            Ok(c) => c,
            Err(Missing::NoVault(dir)) => return Some(locked(Some(&dir))),
            Err(Missing::Locked) => return Some(locked(None)),
        };
        let (id, mut rx) = conn.register();
        let req = Request::Tool {
            name: name.to_owned(),
            args,
        };
        if !conn.send(id, req).await {
            return Some(gone(None));
        }
        let mut last: Option<(String, State)> = None;
        let mut cancelled = false;
        loop {
            tokio::select! {
                frame = rx.recv() => match frame {
                    Some(AgentFrame::Reply { reply, .. }) => {
                        return match *reply {
                            Reply::Tool(r) => Some(r),
                            // Only a call the client cancelled goes unanswered.
                            Reply::Cancelled if cancelled => None,
                            Reply::Cancelled => Some(gone(last)),
                            Reply::Error { code: ErrorCode::Limit, message } => Some(ToolResult::error(
                                ToolErrorCode::Limit,
                                &message,
                                "wait for calls in flight to finish (get_action), then call again",
                                json!({}),
                                Map::new(),
                            )),
                            other => {
                                tracing::warn!("the vault agent answered a tool call with {other:?}");
                                Some(internal("the vault agent refused the call"))
                            }
                        };
                    }
                    Some(AgentFrame::Event { event: Event::Progress { n, message }, .. }) => {
                        progress.send(n, &message).await;
                    }
                    Some(AgentFrame::Event { event: Event::State { action_id, state }, .. }) => {
                        last = Some((action_id, state));
                    }
                    Some(AgentFrame::Event { .. }) => {}
                    None => return if cancelled { None } else { Some(gone(last)) },
                },
                changed = cancel.changed(), if !cancelled => {
                    if changed.is_ok() && *cancel.borrow() {
                        cancelled = true;
                        let (cid, _) = conn.register();
                        conn.send(cid, Request::Cancel { call: id }).await;
                    }
                }
            }
        }
    }

    /// Journals a call refused here (framing, JSON-RPC, parameters) through the agent, if one
    /// is reachable; else it is only logged.
    pub(super) async fn reject(&self, code: i64, reason: &str, raw: &[u8], tool: Option<&str>) {
        let fingerprint = blake3::hash(raw).to_hex().to_string();
        tracing::info!(code, %fingerprint, "rejected request");
        if let Ok(conn) = self.conn().await {
            let req = Request::Reject {
                code,
                reason: reason.to_owned(),
                fingerprint,
                tool: tool.map(str::to_owned),
            };
            let _ = conn.call(req).await;
        }
    }

    /// The session ends: tell the agent why and wait, at most `limit`, until it has withdrawn
    /// what waits and journaled `session.end`; then close. An agent that does not answer in time
    /// (stopped, swapping) still ends the session, with this reason, when it reads on: nothing
    /// is lost, and the client's shutdown does not hang on it.
    pub(super) async fn end(&self, reason: &str, limit: Duration) {
        let conn = self.conn.lock().await.take();
        if let Some(conn) = conn {
            if !*conn.closed.borrow() {
                let end = conn.call(Request::End {
                    reason: reason.to_owned(),
                });
                if tokio::time::timeout(limit, end).await.is_err() {
                    tracing::warn!(
                        "the vault agent did not confirm the session's end within {}s; it \
                         journals it when it reads on",
                        limit.as_secs()
                    );
                }
            }
        }
    }
}

/// The answer when the agent went away during a call: exactly what is known of the action.
fn gone(last: Option<(String, State)>) -> ToolResult {
    let fix =
        "ask the person to run `vault unlock`, then check with a read-only request before retrying";
    let Some((id, state)) = last else {
        // No action of this call was announced, so none was dispatched: the vault is locked
        // (no agent), which is what a call made a moment later is told too.
        return ToolResult::error(
            ToolErrorCode::Locked,
            "the vault locked (its agent stopped) before this call was dispatched; nothing was sent",
            "ask the person to run `vault unlock` in a terminal, then call the tool again",
            json!({}),
            Map::new(),
        );
    };
    let (to, code, message) = if state == State::Dispatched {
        (
            State::Indeterminate,
            ToolErrorCode::Indeterminate,
            format!("the vault agent stopped while running action {id}; the target may have acted"),
        )
    } else {
        (
            State::Withdrawn,
            ToolErrorCode::Withdrawn,
            format!("the vault agent stopped while action {id} waited; nothing was sent"),
        )
    };
    let mut extra = Map::new();
    extra.insert("action_id".into(), json!(id));
    extra.insert("state".into(), json!(to.as_str()));
    ToolResult::error(
        code,
        &message,
        fix,
        json!({"action_id": id, "state": to.as_str()}),
        extra,
    )
}

/// Reads the agent's frames and hands each to the call it answers (a reply ends the call, an
/// event does not); when the connection ends or sends a bad frame, says so on `closed` and drops
/// every waiter, which tells each waiting call the agent is gone.
async fn route_frames(
    mut read: tokio::net::unix::OwnedReadHalf,
    waiters: Waiters,
    closed: watch::Sender<bool>,
) {
    let mut splitter = Splitter::default();
    let mut buf = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match read.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        splitter.push(&buf[..n]);
        loop {
            let line = match splitter.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(_) => break 'read,
            };
            let Ok(frame) = protocol::decode::<AgentFrame>(&line) else {
                break 'read;
            };
            let id = match &frame {
                AgentFrame::Reply { id, .. } | AgentFrame::Event { id, .. } => *id,
            };
            let done = matches!(frame, AgentFrame::Reply { .. });
            let mut map = waiters.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(tx) = map.get(&id) {
                let _ = tx.send(frame);
            }
            if done {
                map.remove(&id);
            }
        }
    }
    let _ = closed.send(true);
    waiters.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
