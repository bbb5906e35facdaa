//! The agent's service loop: the listening socket, one task per connection (peer uid checked,
//! peer pid and executable recorded), the frame cap and per-connection limits, requests routed
//! to the services, events pushed to the connection that submitted, and the lifetimes (absolute,
//! idle, `vault lock`) with an orderly shutdown that journals `vault.lock`.
use super::db::Db;
use super::hub::Hub;
use super::protocol::{
    self, AgentFrame, AgentStatus, ClientFrame, ErrorCode, Event, Reply, Request, Role,
};
use super::socket::{self, Peer};
use super::{AgentError, Start};
use crate::services::tools::{self, Env, EventSink, Session};
use crate::services::{ops, session_end, session_start};
use crate::store::Store;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::OwnedWriteHalf;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::time::Instant;
use zeroize::Zeroizing;

/// Requests one connection may have in flight at once.
const MAX_INFLIGHT: usize = 64;

/// Connections at once.
const MAX_CONNECTIONS: usize = 256;

/// What the whole agent shares.
struct Agent {
    env: Arc<Env>,
    /// The master key (locked in RAM where allowed): long reads (verify, export) open a
    /// connection of their own instead of holding up the writer.
    master: crate::keys::MasterKey,
    proof_key: Zeroizing<[u8; 32]>,
    status: Mutex<AgentStatus>,
    last_activity: Mutex<Instant>,
    busy: AtomicUsize,
    connections: AtomicUsize,
    stop: watch::Sender<Option<&'static str>>,
}

impl Agent {
    fn touch(&self) {
        *self.last_activity.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
    fn stop(&self, why: &'static str) {
        self.stop.send_if_modified(|s| {
            if s.is_none() {
                *s = Some(why);
                true
            } else {
                false
            }
        });
    }
}

pub(super) fn serve(
    start: Start,
    store: Store,
    hardening: crate::sys::Hardening,
    ready: impl FnOnce(Result<&AgentStatus, &AgentError>),
) -> Result<(), AgentError> {
    // Whatever stops the start is told to the one waiting for it (`vault unlock`), never left
    // for it to time out on.
    let started = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(AgentError::from)
        .and_then(|rt| {
            let config = crate::config::Config::load(&start.paths)
                .map_err(|e| AgentError::Start(e.to_string()))?;
            Ok((rt, config))
        });
    let (rt, config) = match started {
        Ok(ok) => ok,
        Err(e) => {
            ready(Err(&e));
            return Err(e);
        }
    };
    let hub = Arc::new(Hub::default());
    let (db, db_thread) = Db::start(store, hub.clone(), start.paths.clone());
    let mut proof_key = super::proof_key(&start.master);
    let key_locked = crate::sys::lock_in_memory(&proof_key[..])
        && crate::sys::lock_in_memory(&start.master.expose()[..]);
    // (The key's bytes are on the heap: moving `start.master` below moves only the pointer.)
    let now = jiff::Timestamp::now();
    let status = AgentStatus {
        pid: std::process::id(),
        vault_id: start.trust.vault_id.clone(),
        socket: start.socket.display().to_string(),
        started_at: crate::time::format_utc(now),
        locks_at: crate::time::format_utc(now + start.lifetime),
        idle_seconds: config.agent.idle_seconds,
        hardening: crate::sys::Hardening {
            key_locked,
            ..hardening
        },
        connections: 0,
        version: env!("CARGO_PKG_VERSION").into(),
        store: None,
    };
    let env = Arc::new(Env {
        db,
        hub,
        trust: start.trust,
        paths: start.paths.clone(),
        http: Arc::new(crate::exec::HttpExecutor::new(&config.limits)),
        ssh: Arc::new(crate::exec::SshExecutor::new(&config.limits)),
        config,
    });
    let listener = rt.block_on(async { bind(&start.socket) });
    let listener = match listener {
        Ok(l) => l,
        Err(e) => {
            ready(Err(&e));
            return Err(e);
        }
    };
    ready(Ok(&status));
    tracing::info!(pid = status.pid, socket = %status.socket, locks_at = %status.locks_at, "vault agent listening");
    let (stop, _) = watch::channel(None);
    let agent = Arc::new(Agent {
        env,
        master: start.master,
        proof_key: std::mem::take(&mut proof_key),
        status: Mutex::new(status),
        last_activity: Mutex::new(Instant::now()),
        busy: AtomicUsize::new(0),
        connections: AtomicUsize::new(0),
        stop,
    });
    let why = rt.block_on(run(agent.clone(), listener, start.lifetime));
    let _ = std::fs::remove_file(&start.socket);
    rt.block_on(shutdown(&agent, why));
    rt.shutdown_timeout(Duration::from_millis(200));
    drop(agent);
    let _ = db_thread.join();
    tracing::info!(why, "vault agent stopped");
    Ok(())
}

fn bind(path: &std::path::Path) -> Result<UnixListener, AgentError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    socket::prepare_dir(dir)?;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn run(agent: Arc<Agent>, listener: UnixListener, lifetime: Duration) -> &'static str {
    tokio::spawn(expiry_task(agent.env.clone()));
    let mut stop = agent.stop.subscribe();
    let ends = Instant::now() + lifetime;
    // 0: never stop for idleness.
    let idle = match agent.env.config.agent.idle_seconds {
        0 => Duration::from_secs(100 * 365 * 86400),
        s => Duration::from_secs(s),
    };
    let mut sigterm =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    loop {
        let idle_at = *agent
            .last_activity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            + idle;
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    agent.touch();
                    tokio::spawn(connection(agent.clone(), stream));
                }
                Err(e) => tracing::warn!("accept failed: {e}"),
            },
            _ = stop.changed() => return (*stop.borrow()).unwrap_or("locked"),
            _ = tokio::time::sleep_until(ends) => return "lifetime ended",
            _ = tokio::time::sleep_until(idle_at) => {
                let quiet = agent.busy.load(Ordering::SeqCst) == 0
                    && agent.last_activity.lock().map(|t| t.elapsed() >= idle).unwrap_or(true);
                if quiet {
                    return "idle";
                }
            }
            _ = async { match sigterm.as_mut() { Some(s) => { s.recv().await; } None => std::future::pending().await } } => return "signal",
        }
    }
}

/// Expires pending actions when their time comes (the writer then publishes them).
async fn expiry_task(env: Arc<Env>) {
    let mut queue = env.hub.watch_queue();
    loop {
        let next = env
            .db
            .run(|s| crate::approvals::next_expiry(s).ok().flatten())
            .await;
        let Ok(next) = next else { return };
        let wait = next
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| {
                let ms = t.duration_since(jiff::Timestamp::now()).as_millis();
                Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0) + 5)
            })
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {
                if env.db.run(|s| crate::approvals::expire_due(s).map(|v| v.len())).await.is_err() {
                    return;
                }
            }
            changed = queue.changed() => if changed.is_err() { return },
        }
    }
}

async fn shutdown(agent: &Arc<Agent>, why: &'static str) {
    // Connections see the stop signal and end their sessions; give in-flight work the grace.
    agent.stop(why);
    let grace = agent.env.config.shutdown_grace();
    let deadline = Instant::now() + grace;
    while agent.connections.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = agent
        .env
        .db
        .run(move |s| {
            let tx = s.write()?;
            crate::audit::append(
                &tx,
                "vault.lock",
                None,
                None,
                &serde_json::json!({"reason": why}),
            )
            .map_err(|_| crate::store::StoreError::Damaged("journal append failed"))?;
            tx.commit()
        })
        .await;
}

/// Writes frames to one connection, one whole line at a time.
struct Writer(tokio::sync::Mutex<OwnedWriteHalf>);

impl Writer {
    async fn frame(&self, frame: &AgentFrame) {
        let line = protocol::encode(frame);
        let mut w = self.0.lock().await;
        let _ = w.write_all(&line).await;
    }
    async fn reply(&self, id: u64, reply: Reply) {
        self.frame(&AgentFrame::Reply {
            id,
            reply: Box::new(reply),
        })
        .await;
    }
}

struct Sink {
    writer: Arc<Writer>,
    id: u64,
}

impl EventSink for Sink {
    fn send(&self, event: Event) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            self.writer
                .frame(&AgentFrame::Event { id: self.id, event })
                .await
        })
    }
}

/// One client's connection.
struct Conn {
    agent: Arc<Agent>,
    peer: Peer,
    writer: Arc<Writer>,
    role: Option<Role>,
    session: Option<Arc<Session>>,
    end_reason: Arc<Mutex<Option<String>>>,
    inflight: Arc<Mutex<HashMap<u64, watch::Sender<bool>>>>,
    /// Requests that finish on their own (tool calls get the grace period at close).
    tasks: tokio::task::JoinSet<()>,
    /// Subscriptions (`WatchPending`, a waiting `Journal`): stopped at once when the peer goes.
    watchers: tokio::task::JoinSet<()>,
}

async fn connection(agent: Arc<Agent>, stream: UnixStream) {
    let peer = match Peer::of(&stream) {
        Ok(p) if p.is_same_user() => p,
        Ok(p) => {
            tracing::warn!(uid = p.uid, pid = ?p.pid, "refused a connection from another user");
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer cannot be identified: {e}");
            return;
        }
    };
    if agent.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        agent.connections.fetch_sub(1, Ordering::SeqCst);
        tracing::warn!("refused a connection: {MAX_CONNECTIONS} are open");
        return;
    }
    let (mut read, write) = stream.into_split();
    let mut conn = Conn {
        agent: agent.clone(),
        peer,
        writer: Arc::new(Writer(tokio::sync::Mutex::new(write))),
        role: None,
        session: None,
        end_reason: Arc::default(),
        inflight: Arc::default(),
        tasks: tokio::task::JoinSet::new(),
        watchers: tokio::task::JoinSet::new(),
    };
    let mut stop = agent.stop.subscribe();
    let mut splitter = protocol::Splitter::default();
    let mut buf = Zeroizing::new(vec![0u8; 64 * 1024]);
    let reason = 'outer: loop {
        tokio::select! {
            n = read.read(&mut buf[..]) => {
                let n = match n { Ok(0) | Err(_) => break "disconnected", Ok(n) => n };
                splitter.push(&buf[..n]);
                loop {
                    match splitter.next_line() {
                        Ok(None) => break,
                        Ok(Some(line)) => {
                            agent.touch();
                            if let Err(why) = conn.frame(&line).await {
                                conn.refused(why, &line).await;
                                break 'outer "protocol_error";
                            }
                        }
                        Err(e) => {
                            conn.refused(e.to_string(), b"").await;
                            break 'outer "protocol_error";
                        }
                    }
                }
            }
            _ = stop.changed() => break "agent stopping",
            Some(_) = conn.tasks.join_next(), if !conn.tasks.is_empty() => {}
            Some(_) = conn.watchers.join_next(), if !conn.watchers.is_empty() => {}
        }
    };
    conn.close(reason).await;
    agent.connections.fetch_sub(1, Ordering::SeqCst);
}

impl Conn {
    /// A refused frame: answered with a protocol error, journaled like a refused MCP call.
    async fn refused(&self, why: String, line: &[u8]) {
        tracing::info!(pid = ?self.peer.pid, "refused frame: {why}");
        self.writer
            .reply(0, ops::error(ErrorCode::Protocol, why.clone()))
            .await;
        let fp = blake3::hash(line).to_hex().to_string();
        tools::reject(
            &self.agent.env,
            self.session.as_deref(),
            -32600,
            "agent frame refused",
            &fp,
            None,
        )
        .await;
    }

    async fn frame(&mut self, line: &[u8]) -> Result<(), String> {
        let frame: ClientFrame = protocol::decode(line).map_err(|e| e.to_string())?;
        let (id, req) = (frame.id, frame.req);
        if self.role.is_none() {
            return match req {
                Request::Hello { .. } => self.hello(id, req).await,
                _ => Err("the first request must be hello".into()),
            };
        }
        if matches!(req, Request::Hello { .. }) {
            return Err("hello was already said".into());
        }
        // Finished tasks the select loop has not reaped yet are not in flight.
        while self.tasks.try_join_next().is_some() {}
        let inflight = self.tasks.len() + self.watchers.len();
        if inflight >= MAX_INFLIGHT {
            self.writer
                .reply(
                    id,
                    ops::error(
                        ErrorCode::Limit,
                        format!(
                            "at most {MAX_INFLIGHT} requests may be in flight on one connection"
                        ),
                    ),
                )
                .await;
            return Ok(());
        }
        self.request(id, req).await;
        Ok(())
    }

    async fn hello(&mut self, id: u64, req: Request) -> Result<(), String> {
        let Request::Hello {
            v,
            role,
            client,
            profile,
            challenge,
        } = req
        else {
            unreachable!()
        };
        if v != protocol::VERSION {
            return Err(format!(
                "this agent speaks protocol {}, not {v}; run the same `vault` binary for both",
                protocol::VERSION
            ));
        }
        if role == Role::Mcp {
            let profile = profile.unwrap_or_else(|| "default".into());
            crate::credentials::check_name("profile", &profile).map_err(|e| e.to_string())?;
            let session = Arc::new(Session {
                id: crate::credentials::new_id("ses"),
                profile,
                client: client.unwrap_or_default(),
                waiting: AtomicUsize::new(0),
                rejections: std::sync::Mutex::default(),
            });
            let (s2, peer) = (session.clone(), self.peer.clone());
            let started = self
                .agent
                .env
                .db
                .run(move |st| session_start(st, &s2.id, &s2.client, &s2.profile, &peer))
                .await;
            if !matches!(started, Ok(Ok(()))) {
                return Err("the session could not be journaled".into());
            }
            self.session = Some(session);
        }
        self.role = Some(role);
        let reply = Reply::Welcome {
            v: protocol::VERSION,
            vault_id: self.agent.env.trust.vault_id.clone(),
            pid: std::process::id(),
            session: self.session.as_ref().map(|s| s.id.clone()),
            proof: challenge.map(|c| super::proof(&self.agent.proof_key, &c)),
        };
        self.writer.reply(id, reply).await;
        Ok(())
    }

    async fn request(&mut self, id: u64, req: Request) {
        let (agent, writer) = (self.agent.clone(), self.writer.clone());
        match req {
            Request::Tool { name, args } => self.tool(id, name, args).await,
            Request::Cancel { call } => {
                if let Some(tx) = self
                    .inflight
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&call).cloned())
                {
                    let _ = tx.send(true);
                }
                writer.reply(id, Reply::Ok).await;
            }
            Request::Reject {
                code,
                reason,
                fingerprint,
                tool,
            } => {
                // A task like any other request, so a connection's refusals share commits
                // instead of queueing one commit each behind the read loop.
                let session = self.session.clone();
                self.tasks.spawn(async move {
                    tools::reject(
                        &agent.env,
                        session.as_deref(),
                        code,
                        &reason,
                        &fingerprint,
                        tool.as_deref(),
                    )
                    .await;
                    writer.reply(id, Reply::Ok).await;
                });
            }
            Request::End { reason } => {
                if let Ok(mut r) = self.end_reason.lock() {
                    *r = Some(reason.chars().take(40).collect());
                }
                writer.reply(id, Reply::Ok).await;
            }
            Request::Status => writer.reply(id, Reply::Status(status(&agent).await)).await,
            Request::Lock => {
                writer.reply(id, Reply::Ok).await;
                agent.stop("vault lock");
            }
            Request::WatchPending => {
                self.watchers.spawn(watch_pending(agent, writer, id));
            }
            Request::Journal {
                after,
                limit,
                wait_ms,
            } => {
                self.watchers
                    .spawn(journal(agent, writer, id, after, limit, wait_ms));
            }
            long @ (Request::Verify { .. } | Request::Export { .. }) => {
                self.tasks
                    .spawn(on_fresh_connection(agent, writer, id, long));
            }
            other => {
                let (trust, paths) = (agent.env.trust.clone(), agent.env.paths.clone());
                self.tasks.spawn(async move {
                    let reply = agent
                        .env
                        .db
                        .run(move |s| ops::handle(s, &trust, &paths, other))
                        .await
                        .unwrap_or_else(|e| ops::error(ErrorCode::Internal, e.to_string()));
                    writer.reply(id, reply).await;
                });
            }
        }
    }

    /// A `tools/call` of this connection's MCP session, run as its own task (cancellable by id).
    async fn tool(
        &mut self,
        id: u64,
        name: String,
        args: serde_json::Map<String, serde_json::Value>,
    ) {
        let (agent, writer) = (self.agent.clone(), self.writer.clone());
        let Some(session) = self.session.clone() else {
            writer
                .reply(
                    id,
                    ops::error(
                        ErrorCode::Protocol,
                        "tool calls need a hello with role mcp".into(),
                    ),
                )
                .await;
            return;
        };
        let (tx, rx) = watch::channel(false);
        if let Ok(mut m) = self.inflight.lock() {
            m.insert(id, tx);
        }
        let inflight = self.inflight.clone();
        self.tasks.spawn(async move {
            agent.busy.fetch_add(1, Ordering::SeqCst);
            let sink = Arc::new(Sink {
                writer: writer.clone(),
                id,
            });
            let result = tools::call(agent.env.clone(), session, &name, args, sink, rx).await;
            if let Ok(mut m) = inflight.lock() {
                m.remove(&id);
            }
            let reply = result.map_or(Reply::Cancelled, Reply::Tool);
            writer.reply(id, reply).await;
            agent.busy.fetch_sub(1, Ordering::SeqCst);
            agent.touch();
        });
    }

    async fn close(mut self, reason: &str) {
        self.watchers.abort_all();
        if let Ok(m) = self.inflight.lock() {
            for tx in m.values() {
                let _ = tx.send(true);
            }
        }
        let grace = self.agent.env.config.shutdown_grace();
        let drain = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, drain).await.is_err() {
            self.tasks.abort_all();
        }
        let Some(session) = self.session.take() else {
            return;
        };
        let reason = self
            .end_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| reason.to_owned());
        let paths = self.agent.env.paths.clone();
        let suppressed = session
            .rejections
            .lock()
            .map(|r| r.total_suppressed)
            .unwrap_or(0);
        let ended = self
            .agent
            .env
            .db
            .run(move |s| session_end(s, &session.id, &reason, suppressed))
            .await;
        if let Ok(Ok(head)) = ended {
            if let Err(e) = crate::audit::write_anchor(&paths, head.seq, &head.hash) {
                tracing::warn!("could not write the anchor: {e}");
            }
        }
    }
}

/// Sends the approval queue now and after every change, until the connection goes.
async fn watch_pending(agent: Arc<Agent>, writer: Arc<Writer>, id: u64) {
    let mut queue = agent.env.hub.watch_queue();
    let mut stop = agent.stop.subscribe();
    writer.reply(id, Reply::Ok).await;
    loop {
        let views = agent.env.db.run(ops::pending).await;
        let Ok(Ok(actions)) = views else { return };
        writer
            .frame(&AgentFrame::Event {
                id,
                event: Event::Queue { actions },
            })
            .await;
        tokio::select! {
            changed = queue.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
        }
    }
}

/// The agent's status, with the store as it sees it now.
async fn status(agent: &Arc<Agent>) -> AgentStatus {
    let mut status = agent
        .status
        .lock()
        .map(|s| s.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    status.connections = agent.connections.load(Ordering::SeqCst);
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
async fn journal(
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
async fn on_fresh_connection(agent: Arc<Agent>, writer: Arc<Writer>, id: u64, long: Request) {
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
