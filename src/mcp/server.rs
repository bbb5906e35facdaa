//! One MCP session over stdio: the read loop (a thread reading stdin, frames → classification →
//! lifecycle → a request to the custody agent), the single writer thread that owns stdout,
//! concurrent tool calls with cancellation, and an orderly shutdown on EOF or SIGTERM (in-flight
//! calls cancelled within the grace period; the agent withdraws what waits and journals
//! `session.end`).
use super::framing::{Frame, LineSplitter};
use super::jsonrpc::{
    classify, error_response, response, Message, RpcError, INVALID_PARAMS, INVALID_REQUEST,
    METHOD_NOT_FOUND, PARSE_ERROR,
};
use super::link::{Link, Progress};
use super::protocol::{self, Era};
use super::tools;
use crate::paths::VaultPaths;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// What `vault mcp` was started with.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub paths: VaultPaths,
    pub profile: String,
}

/// How much longer than the grace period the agent gets to confirm the session's end.
const END_MARGIN: Duration = Duration::from_secs(3);

#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

struct Session {
    link: Arc<Link>,
    era: Era,
    out: mpsc::Sender<String>,
    inflight: Arc<Mutex<HashMap<String, Inflight>>>,
    tasks: JoinSet<()>,
    /// How long in-flight calls get to finish after EOF or SIGTERM.
    grace: Duration,
}

/// Serves one MCP session on stdin/stdout until EOF, SIGTERM or a framing error.
pub fn serve(opts: ServeOptions) -> Result<(), ServeError> {
    // A broken config.toml stops the server before it reads a byte: better than limits nobody set.
    let config = crate::config::Config::load(&opts.paths)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(run(opts, config));
    // Do not wait for a blocking task still parked (stdin has a thread of its own).
    rt.shutdown_timeout(Duration::from_millis(50));
    Ok(result?)
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    #[error("stdio failed: {0}")]
    Io(#[from] std::io::Error),
}

async fn run(opts: ServeOptions, config: crate::config::Config) -> std::io::Result<()> {
    let (out, rx) = mpsc::channel::<String>(256);
    let writer = std::thread::Builder::new()
        .name("mcp-stdout".into())
        .spawn(move || write_lines(rx))?;
    let mut stdin = read_stdin()?;
    let link = Arc::new(Link::new(opts.paths, opts.profile.clone()));
    tracing::info!(profile = %opts.profile, "mcp session started");
    let mut session = Session {
        link: link.clone(),
        era: Era::Unset,
        out,
        inflight: Arc::default(),
        tasks: JoinSet::new(),
        grace: config.shutdown_grace(),
    };
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut splitter = LineSplitter::new();
    let reason = loop {
        tokio::select! {
            read = stdin.recv() => match read.unwrap_or(Ok(Vec::new())) {
                Ok(buf) if buf.is_empty() => {
                    if let Some(frame) = std::mem::take(&mut splitter).finish() {
                        session.handle(frame).await;
                    }
                    break "eof";
                }
                Ok(buf) => {
                    let mut frames = Vec::new();
                    splitter.push(&buf, &mut frames);
                    let mut closed = false;
                    for frame in frames {
                        if session.handle(frame).await == Flow::Close {
                            closed = true;
                            break;
                        }
                    }
                    if closed {
                        break "protocol_error";
                    }
                }
                Err(e) => {
                    tracing::warn!("reading stdin failed: {e}");
                    break "error";
                }
            },
            _ = sigterm.recv() => break "signal",
            Some(_) = session.tasks.join_next(), if !session.tasks.is_empty() => {}
        }
    };
    tracing::info!(reason, "mcp session ending");
    session.shutdown().await;
    // The agent may still be giving an SSH command its grace after our calls were cancelled.
    link.end(reason, session.grace + END_MARGIN).await;
    drop(session);
    // Every sender is gone: the writer ends once the lines queued before are out.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
    Ok(())
}

/// A tool call in flight: how to cancel it, and whether its client did (then it gets no
/// response).
#[derive(Clone)]
struct Inflight {
    cancel: watch::Sender<bool>,
    by_client: Arc<std::sync::atomic::AtomicBool>,
}

/// Reads stdin on a thread of its own, in chunks as they come (an empty chunk at EOF). A
/// blocking read on a plain thread, rather than tokio's stdin (a blocking-pool task per read),
/// costs one wake-up per message instead of two; the thread may stay parked in its read when the
/// session ends, which does not hold the process.
fn read_stdin() -> std::io::Result<mpsc::Receiver<std::io::Result<Vec<u8>>>> {
    let (tx, rx) = mpsc::channel(4);
    std::thread::Builder::new()
        .name("mcp-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let chunk = match stdin.read(&mut buf) {
                    Ok(n) => Ok(buf[..n].to_vec()),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let last = !matches!(&chunk, Ok(c) if !c.is_empty());
                if tx.blocking_send(chunk).is_err() || last {
                    break;
                }
            }
        })?;
    Ok(rx)
}

/// The only writer of stdout, on a thread of its own: one complete line at a time, flushed. (A
/// plain thread, rather than tokio's stdout, which hands every write and flush to the blocking
/// pool and waits for it: the runtime only queues the line.)
fn write_lines(mut rx: mpsc::Receiver<String>) {
    let mut stdout = std::io::stdout().lock();
    while let Some(line) = rx.blocking_recv() {
        if stdout.write_all(line.as_bytes()).is_err() || stdout.flush().is_err() {
            break;
        }
    }
}

impl Session {
    async fn send(&self, line: String) {
        let _ = self.out.send(line).await;
    }

    async fn reply_err(&self, id: Option<&Value>, err: RpcError) {
        self.send(error_response(id, &err)).await;
    }

    async fn handle(&mut self, frame: Frame) -> Flow {
        let line = match frame {
            Frame::Line(l) => l,
            Frame::TooLong => {
                let e = RpcError::new(
                    PARSE_ERROR,
                    format!(
                        "Parse error: a line is longer than {} bytes",
                        super::framing::MAX_LINE
                    ),
                );
                self.rejected(&e, b"", None).await;
                self.reply_err(None, e).await;
                return Flow::Close;
            }
            Frame::Truncated(bytes) => {
                let e = RpcError::new(
                    PARSE_ERROR,
                    "Parse error: the input ended in the middle of a line",
                );
                self.rejected(&e, &bytes, None).await;
                self.reply_err(None, e).await;
                return Flow::Close;
            }
        };
        match classify(&line) {
            Err(e) => {
                self.rejected(&e, &line, None).await;
                self.reply_err(None, e).await;
                Flow::Close
            }
            Ok(Message::Notification { method, params }) => {
                self.notification(&method, params.as_ref());
                Flow::Continue
            }
            Ok(Message::Request { id, method, params }) => {
                self.request(id, &method, params, &line).await
            }
        }
    }

    fn notification(&mut self, method: &str, params: Option<&Value>) {
        match method {
            "notifications/initialized" => {
                if let Era::Legacy { .. } = self.era {
                    self.era = Era::Legacy { initialized: true };
                }
            }
            "notifications/cancelled" => {
                let Some(id) = params.and_then(|p| p.get("requestId")) else {
                    return;
                };
                if let Some(call) = self
                    .inflight
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&id.to_string()).cloned())
                {
                    // The client withdrew it: it gets no response, whatever comes back.
                    call.by_client
                        .store(true, std::sync::atomic::Ordering::SeqCst);
                    let _ = call.cancel.send(true);
                }
            }
            other => tracing::debug!(method = other, "ignored notification"),
        }
    }

    async fn request(
        &mut self,
        id: Value,
        method: &str,
        params: Option<Value>,
        raw: &[u8],
    ) -> Flow {
        if self
            .inflight
            .lock()
            .map(|m| m.contains_key(&id.to_string()))
            .unwrap_or(false)
        {
            let e = RpcError::new(
                INVALID_REQUEST,
                "Invalid Request: this id is already in use by a request in flight",
            );
            self.rejected(&e, raw, None).await;
            self.reply_err(None, e).await;
            return Flow::Close;
        }
        let meta_version = match protocol::meta_version(params.as_ref()) {
            Ok(v) => v.map(str::to_owned),
            Err(e) => {
                self.reply_err(Some(&id), e).await;
                return Flow::Continue;
            }
        };
        if self
            .handshake(&id, method, params.as_ref(), meta_version.as_deref())
            .await
        {
            return Flow::Continue;
        }
        let Some(modern) = self
            .session_era(&id, method, params.as_ref(), meta_version.as_deref())
            .await
        else {
            return Flow::Continue;
        };
        match method {
            "ping" => self.answer(&id, Ok(json!({}))).await,
            "tools/list" => {
                let answer = tools::list(params.as_ref()).map(|mut r| {
                    if modern {
                        // 2026-07-28 makes tools/list cacheable: ttlMs and cacheScope are
                        // required (the Python SDK rejects the result without them).
                        r["resultType"] = json!("complete");
                        r["ttlMs"] = json!(0);
                        r["cacheScope"] = json!("private");
                    }
                    r
                });
                self.answer(&id, answer).await;
            }
            "tools/call" => self.tools_call(id, params, modern, raw).await,
            other => {
                let e = RpcError::new(METHOD_NOT_FOUND, format!("Method not found: {other}"));
                self.rejected(&e, raw, None).await;
                self.reply_err(Some(&id), e).await;
            }
        }
        Flow::Continue
    }

    /// `initialize` and `server/discover`: answered here, whatever the era. True when handled.
    async fn handshake(
        &mut self,
        id: &Value,
        method: &str,
        params: Option<&Value>,
        meta_version: Option<&str>,
    ) -> bool {
        match method {
            "initialize" => {
                let first = self.era == Era::Unset;
                let answer = match self.era {
                    Era::Unset => protocol::initialize(params).map(|(result, info)| {
                        self.era = Era::Legacy { initialized: false };
                        self.link.set_client(info);
                        result
                    }),
                    Era::Legacy { .. } => Err(protocol::already_initialized()),
                    Era::Modern => Err(protocol::unsupported(protocol::LATEST_HANDSHAKE)),
                };
                if first && answer.is_ok() {
                    self.open_session_journal().await;
                }
                self.answer(id, answer).await;
                true
            }
            "server/discover" => {
                let answer = match meta_version {
                    Some(v) if v != protocol::MODERN_VERSION => Err(protocol::unsupported(v)),
                    _ => Ok(protocol::discover()),
                };
                self.answer(id, answer).await;
                true
            }
            _ => false,
        }
    }

    /// Which handshake the connection speaks for this request: `Some(true)` for 2026-07-28 (every
    /// request carries `_meta`), `Some(false)` for the initialized legacy session; `None` when
    /// the request was already answered (a refusal, or a ping before initialize).
    async fn session_era(
        &mut self,
        id: &Value,
        method: &str,
        params: Option<&Value>,
        meta_version: Option<&str>,
    ) -> Option<bool> {
        Some(match (self.era, meta_version) {
            (_, Some(v)) => match protocol::check_modern_meta(params, v) {
                Ok(info) => {
                    if self.era == Era::Unset {
                        self.era = Era::Modern;
                        self.link.set_client(info);
                        self.open_session_journal().await;
                    }
                    true
                }
                Err(e) => {
                    self.reply_err(Some(id), e).await;
                    return None;
                }
            },
            (Era::Modern, None) => {
                let e = RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "this connection uses {}: every request needs _meta.{}",
                        protocol::MODERN_VERSION,
                        protocol::META_VERSION
                    ),
                );
                self.reply_err(Some(id), e).await;
                return None;
            }
            (Era::Legacy { .. }, None) => false,
            (Era::Unset, None) => {
                let answer = if method == "ping" {
                    Ok(json!({}))
                } else {
                    Err(protocol::not_initialized(method))
                };
                self.answer(id, answer).await;
                return None;
            }
        })
    }

    async fn answer(&self, id: &Value, answer: Result<Value, RpcError>) {
        match answer {
            Ok(result) => self.send(response(id, result)).await,
            Err(e) => self.reply_err(Some(id), e).await,
        }
    }

    async fn tools_call(&mut self, id: Value, params: Option<Value>, modern: bool, raw: &[u8]) {
        let checked = (|| {
            let p = params.as_ref().and_then(Value::as_object).ok_or_else(|| {
                RpcError::new(
                    INVALID_PARAMS,
                    "tools/call needs params {\"name\", \"arguments\"}",
                )
            })?;
            if let Some(k) = p
                .keys()
                .find(|k| !matches!(k.as_str(), "name" | "arguments" | "_meta"))
            {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!(
                        "tools/call does not take {k:?}; its params are name, arguments and _meta"
                    ),
                ));
            }
            let name = p.get("name").and_then(Value::as_str).ok_or_else(|| {
                RpcError::new(INVALID_PARAMS, "tools/call: name must be a string")
            })?;
            let tool = tools::find(name).ok_or_else(|| {
                RpcError::new(
                    INVALID_PARAMS,
                    format!("Unknown tool: {name:?}; tools/list shows the tools"),
                )
            })?;
            let args = match p.get("arguments") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(m)) => m.clone(),
                Some(_) => {
                    return Err(RpcError::new(
                        INVALID_PARAMS,
                        "tools/call: arguments must be an object",
                    ))
                }
            };
            let token = p
                .get("_meta")
                .and_then(|m| m.get("progressToken"))
                .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
                .cloned();
            Ok((tool, args, token))
        })();
        let (tool, args, token) = match checked {
            Ok(x) => x,
            Err(e) => {
                let name = params
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.rejected(&e, raw, name.as_deref()).await;
                self.reply_err(Some(&id), e).await;
                return;
            }
        };
        let (cancel_tx, cancel_rx) = watch::channel(false);
        let key = id.to_string();
        let by_client = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Ok(mut m) = self.inflight.lock() {
            m.insert(
                key.clone(),
                Inflight {
                    cancel: cancel_tx,
                    by_client: by_client.clone(),
                },
            );
        }
        let (link, out, inflight) = (self.link.clone(), self.out.clone(), self.inflight.clone());
        let name = tool["name"].as_str().unwrap_or_default().to_owned();
        self.tasks.spawn(async move {
            let progress = Progress {
                token,
                out: out.clone(),
            };
            let result = link.tool(&name, args, &progress, cancel_rx).await;
            if let Ok(mut m) = inflight.lock() {
                m.remove(&key);
            }
            // Only a call the client cancelled goes unanswered (docs/design.md §2), even when
            // its action had already gone out: its outcome is journaled, and get_action and
            // `vault log` give it. A call cancelled by the session's end is still answered.
            let silent = by_client.load(std::sync::atomic::Ordering::SeqCst)
                && !crate::mutation::off("cancel_silence");
            if let Some(r) = result.filter(|_| !silent) {
                let _ = out.send(response(&id, r.to_json(modern))).await;
            }
        });
    }

    /// Connects to the agent, which journals `session.start` (not at all while locked). The
    /// handshake's answer waits until the socket is connected (at most a second; the hello goes
    /// on in its own task): a session its client saw start is bound to the agent it reached, and
    /// a process that renames or replaces the socket path afterwards cannot take it over.
    async fn open_session_journal(&self) {
        let link = self.link.clone();
        let (connected, socket) = tokio::sync::oneshot::channel();
        drop(tokio::spawn(
            async move { link.connect_early(connected).await },
        ));
        let _ = tokio::time::timeout(Duration::from_secs(1), socket).await;
    }

    /// A rejected request: journaled (`call.rejected`) with a fingerprint of its bytes, never the
    /// bytes, before the answer goes out.
    async fn rejected(&self, e: &RpcError, raw: &[u8], tool: Option<&str>) {
        self.link.reject(e.code, &e.message, raw, tool).await;
    }

    async fn shutdown(&mut self) {
        if let Ok(m) = self.inflight.lock() {
            for call in m.values() {
                let _ = call.cancel.send(true);
            }
        }
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(self.grace, drain).await.is_err() {
            tracing::warn!(
                "in-flight calls did not finish within {}s; aborting them",
                self.grace.as_secs()
            );
            self.tasks.abort_all();
        }
    }
}
