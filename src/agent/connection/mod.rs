//! One client connection of the agent: the peer checked and recorded, frames read under the cap,
//! `hello` first, each request routed to the services as its own task (at most `MAX_INFLIGHT`),
//! replies and pushed events written by one writer, and an orderly close that cancels what the
//! connection left in flight and ends its MCP session.
use super::admission::{self, Ticket};
use super::channel::{self, Opener};
use super::protocol::{
    self, AgentFrame, ClientFrame, ErrorCode, Event, Reply, Request, RequestKind, Role,
};
use super::shared::Agent;
use super::socket::Peer;
use crate::services::tools::{self, Session};
use crate::services::{ops, session_end};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::watch;
use tokio::time::Instant;
use zeroize::Zeroizing;

mod answers;
mod hello;
mod writer;
use answers::{journal, on_fresh_connection, openbao_head, status, watch_pending};
use writer::{Sink, Writer};

/// Requests one connection may have in flight at once.
const MAX_INFLIGHT: usize = 64;

/// The requests of a connection that can be cancelled, by id.
type Inflight = Arc<Mutex<HashMap<u64, watch::Sender<bool>>>>;

/// One client's connection.
struct Conn {
    agent: Arc<Agent>,
    peer: Peer,
    writer: Arc<Writer>,
    role: Option<Role>,
    /// Frames from the client, once the encrypted channel is open.
    opener: Option<Opener>,
    session: Option<Arc<Session>>,
    inflight: Inflight,
    /// Requests that finish on their own (tool calls get the grace period at close).
    tasks: tokio::task::JoinSet<()>,
    /// Subscriptions (`WatchPending`, a waiting `Journal`): stopped at once when the peer goes.
    watchers: tokio::task::JoinSet<()>,
    /// This connection's place among the agent's connections.
    ticket: Ticket,
    /// Set when the connection must close after what it was just told (no room for it).
    closing: Option<&'static str>,
    /// The connection came through `vault run`'s relay (`Request::Contained`).
    contained: bool,
}

pub(super) async fn serve(agent: Arc<Agent>, stream: UnixStream) {
    let peer = match Peer::of(&stream) {
        Ok(p) if p.is_same_user() || crate::mutation::off("peer_uid") => p,
        Ok(p) => {
            tracing::warn!(uid = p.uid, pid = ?p.pid, "refused a connection from another user");
            return;
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer cannot be identified: {e}");
            return;
        }
    };
    let ticket = match agent.admission.admit(peer.pid.unwrap_or(0)) {
        Ok(t) => t,
        Err(why) => {
            tracing::warn!(pid = ?peer.pid, "refused a connection: {why}");
            let frame = AgentFrame::Reply {
                id: 0,
                reply: Box::new(ops::error(ErrorCode::Limit, why)),
            };
            let mut stream = stream;
            let _ = stream.write_all(&protocol::encode(&frame)).await;
            return;
        }
    };
    let (mut read, write) = stream.into_split();
    let mut conn = Conn {
        agent: agent.clone(),
        peer,
        writer: Arc::new(Writer::new(write)),
        role: None,
        opener: None,
        session: None,
        inflight: Arc::default(),
        tasks: tokio::task::JoinSet::new(),
        watchers: tokio::task::JoinSet::new(),
        ticket,
        closing: None,
        contained: false,
    };
    let mut stop = agent.stop.subscribe();
    let said_hello_by = Instant::now() + admission::FIRST_FRAME;
    let mut splitter = protocol::Splitter::default();
    let mut buf = Zeroizing::new(vec![0u8; 64 * 1024]);
    let reason = 'outer: loop {
        tokio::select! {
            n = read.read(&mut buf[..]) => {
                let n = match n { Ok(0) | Err(_) => break "disconnected", Ok(n) => n };
                splitter.push(&buf[..n]);
                loop {
                    // Lines until the channel opens, its length-prefixed messages after.
                    let next = match conn.opener {
                        Some(_) => Ok(splitter.next_sealed()),
                        None => splitter.next_line(),
                    };
                    match next {
                        Ok(None) => break,
                        Ok(Some(line)) => {
                            if let Err(why) = conn.line(&line).await {
                                conn.refused(why, &line).await;
                                break 'outer "protocol_error";
                            }
                            if let Some(why) = conn.closing {
                                break 'outer why;
                            }
                        }
                        Err(e) => {
                            conn.refused(e.to_string(), b"").await;
                            break 'outer "protocol_error";
                        }
                    }
                }
            }
            _ = stop.changed() => {
                let why = *stop.borrow();
                conn.tell_stopping(why).await;
                break "agent stopping";
            }
            _ = tokio::time::sleep_until(said_hello_by), if conn.role.is_none() => {
                tracing::debug!(pid = ?conn.peer.pid, "closed a connection that said nothing");
                break "silent";
            }
            Some(_) = conn.tasks.join_next(), if !conn.tasks.is_empty() => {}
            Some(_) = conn.watchers.join_next(), if !conn.watchers.is_empty() => {}
        }
    };
    conn.end_session(reason).await;
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

    /// A request its connection's role may not ask (a person's command on an MCP or egress
    /// session, a host asked for by anything but `vault run`'s proxy): answered with a protocol
    /// error and journaled as a refused call; nothing of it runs.
    async fn refuse_for_role(&self, id: u64, kind: RequestKind, line: &[u8]) {
        tracing::warn!(pid = ?self.peer.pid, contained = self.contained, role = ?self.role, "refused {kind:?} for its role");
        let why = match self.role {
            Some(Role::Mcp) => format!(
                "{kind:?} is a person's command, and this is an MCP session: it may call its \
                 tools, cancel them and end itself. Run `vault` commands in your own terminal, \
                 outside `vault run`"
            ),
            Some(Role::Egress) => format!(
                "{kind:?} is not for `vault run`'s network session: it asks for hosts and ends"
            ),
            _ => format!("{kind:?} is asked only by `vault run`'s network proxy"),
        };
        self.writer
            .reply(id, ops::error(ErrorCode::Protocol, why))
            .await;
        let fp = blake3::hash(line).to_hex().to_string();
        tools::reject(
            &self.agent.env,
            self.session.as_deref(),
            -32600,
            "a person's command on an MCP session",
            &fp,
            None,
        )
        .await;
    }

    /// One unit from the client: a sealed message (one chunk of a frame) once the channel is
    /// open; before, a line: the channel's opening or a plain frame.
    async fn line(&mut self, line: &[u8]) -> Result<(), String> {
        if let Some(opener) = &mut self.opener {
            return match opener.open(line).map_err(|e| e.to_string())? {
                Some(frame) => self.frame(&frame).await,
                None => Ok(()),
            };
        }
        if self.role.is_none() {
            if let Ok(open) = protocol::decode::<channel::Open>(line) {
                let agent = &self.agent;
                let (sealer, opener, accept) =
                    channel::respond(&agent.channel_key, &agent.env.trust.vault_id, &open)
                        .map_err(|e| e.to_string())?;
                self.opener = Some(opener);
                self.writer.start_channel(&accept, sealer).await;
                return Ok(());
            }
        }
        self.frame(line).await
    }

    async fn frame(&mut self, line: &[u8]) -> Result<(), String> {
        let frame: ClientFrame = protocol::decode(line).map_err(|e| e.to_string())?;
        let (id, req) = (frame.id, frame.req);
        // Every request is activity (it keeps the agent from its idle lock) but a ping: a
        // `vault approve` left open must not keep the key unlocked for ever.
        if !matches!(req, Request::Ping) {
            self.agent.touch();
        }
        if self.role.is_none() {
            return match req {
                Request::Hello { .. } => self.hello(id, req).await,
                Request::Contained { pid } if !self.contained => self.contained(id, pid).await,
                _ => Err("the first request must be hello".into()),
            };
        }
        if matches!(req, Request::Hello { .. }) {
            return Err("hello was already said".into());
        }
        // One place decides what an MCP connection (every contained one among them) may ask,
        // and what `vault run`'s proxy may; and only the proxy asks for hosts.
        let kind = req.kind();
        let out_of_role = match self.role {
            Some(Role::Mcp) => !kind.for_mcp() && !crate::mutation::off("mcp_gate"),
            Some(Role::Egress) => !kind.for_egress(),
            _ => matches!(
                kind,
                RequestKind::Connect
                    | RequestKind::Tunneled
                    | RequestKind::Intercept
                    | RequestKind::Swap
            ),
        };
        if out_of_role {
            self.refuse_for_role(id, kind, line).await;
            return Ok(());
        }
        if req.needs_channel() && self.opener.is_none() {
            self.writer
                .reply(
                    id,
                    ops::error(
                        ErrorCode::Protocol,
                        "this request is accepted only over the encrypted channel, which a \
                         command opens with the vault's key: give it the passphrase"
                            .into(),
                    ),
                )
                .await;
            return Ok(());
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

    async fn request(&mut self, id: u64, req: Request) {
        let (agent, writer) = (self.agent.clone(), self.writer.clone());
        match req {
            Request::Tool { name, args } => self.tool(id, name, args).await,
            Request::Connect { host, port } => {
                let what = "a host is asked for";
                self.on_network_session(id, what, |env, ses, sink, rx| {
                    crate::services::egress::connect(env, ses, host, port, sink, rx)
                })
                .await
            }
            Request::Intercept { credential } => {
                let session = self.session.clone();
                self.tasks.spawn(async move {
                    let reply = crate::services::egress::intercept(
                        &agent.env,
                        session.as_deref(),
                        credential,
                    )
                    .await;
                    writer.reply(id, reply).await;
                });
            }
            Request::Swap {
                credential,
                method,
                url,
                headers,
                body_base64,
                body_file,
            } => {
                let args = match crate::services::egress::swap_args(
                    credential,
                    method,
                    url,
                    headers,
                    body_base64,
                ) {
                    Ok(a) => a,
                    Err(why) => {
                        return writer.reply(id, ops::error(ErrorCode::Invalid, why)).await;
                    }
                };
                let what = "a placeholder is swapped";
                self.on_network_session(id, what, |env, ses, sink, rx| {
                    crate::services::egress::swap(env, ses, args, body_file, sink, rx)
                })
                .await
            }
            Request::Tunneled {
                action_id,
                sent,
                received,
                error,
            } => {
                let session = self.session.clone();
                self.tasks.spawn(async move {
                    let reply = crate::services::egress::tunneled(
                        &agent.env,
                        session.as_deref(),
                        &action_id,
                        (sent, received),
                        error,
                    )
                    .await;
                    writer.reply(id, reply).await;
                });
            }
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
                // Journaled before the reply: once `vault mcp` has exited, its session's end
                // and the anchor of its head are on disk.
                let reason: String = reason.chars().take(40).collect();
                self.end_session(&reason).await;
                writer.reply(id, Reply::Ok).await;
            }
            Request::Status => writer.reply(id, Reply::Status(status(&agent).await)).await,
            // What the last call to OpenBao found; asking makes no request to it.
            Request::OpenBaoStatus => {
                writer
                    .reply(id, Reply::OpenBao(agent.env.openbao.view()))
                    .await
            }
            Request::OpenBaoHead => {
                self.tasks.spawn(openbao_head(agent, writer, id));
            }
            Request::Ping => writer.reply(id, Reply::Ok).await,
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
                // A decision needs no fsync of its own: nothing runs on it before the claim's
                // intent row, whose synced commit puts the decision on disk first (services/db.rs).
                let synced = !matches!(other, Request::Decide { .. });
                // A new (or removed) OpenBao login replaces the agent's session at once.
                let relogin = matches!(
                    other,
                    Request::OpenBaoLogin { .. } | Request::OpenBaoLogout { .. }
                )
                .then(|| agent.env.openbao.clone());
                self.tasks.spawn(async move {
                    let job = move |s: &mut crate::store::Store| {
                        let reply = ops::handle(s, &trust, &paths, other);
                        if let (Some(remote), Reply::Ok) = (&relogin, &reply) {
                            remote.reload(s.conn());
                        }
                        reply
                    };
                    let db = &agent.env.db;
                    let done = if synced {
                        db.run(job).await
                    } else {
                        db.run_unsynced(job).await
                    };
                    let reply =
                        done.unwrap_or_else(|e| ops::error(ErrorCode::Internal, e.to_string()));
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
                        "tool calls need a hello with role mcp, on a session that has not ended"
                            .into(),
                    ),
                )
                .await;
            return;
        };
        let (rx, inflight) = self.cancellable(id);
        self.tasks.spawn(async move {
            agent.busy.fetch_add(1, Ordering::SeqCst);
            let sink = Arc::new(Sink::new(writer.clone(), id));
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

    /// Registers request `id` as cancellable (`Cancel`, or the connection's close): its
    /// cancellation signal, and the map the task removes it from when done.
    fn cancellable(&self, id: u64) -> (watch::Receiver<bool>, Inflight) {
        let (tx, rx) = watch::channel(false);
        if let Ok(mut m) = self.inflight.lock() {
            m.insert(id, tx);
        }
        (rx, self.inflight.clone())
    }

    /// A request of `vault run`'s proxy that may wait for the person (`connect`: a host;
    /// `swap`: a request with a placeholder), as its own task on the network session (cancelled
    /// with the connection, which withdraws its card), answered once final.
    async fn on_network_session<F>(
        &mut self,
        id: u64,
        what: &str,
        run: impl FnOnce(Arc<tools::Env>, Arc<Session>, Arc<Sink>, watch::Receiver<bool>) -> F,
    ) where
        F: std::future::Future<Output = Reply> + Send + 'static,
    {
        let (agent, writer) = (self.agent.clone(), self.writer.clone());
        let Some(session) = self.session.clone() else {
            let why = format!("{what} on `vault run`'s network session only");
            writer.reply(id, ops::error(ErrorCode::Protocol, why)).await;
            return;
        };
        let (rx, inflight) = self.cancellable(id);
        let work = run(
            agent.env.clone(),
            session,
            Arc::new(Sink::new(writer.clone(), id)),
            rx,
        );
        self.tasks.spawn(async move {
            let reply = work.await;
            if let Ok(mut m) = inflight.lock() {
                m.remove(&id);
            }
            writer.reply(id, reply).await;
            agent.touch();
        });
    }

    /// Tells a person's command (not an MCP session, whose calls are answered one by one) that
    /// the agent stops, and why, before the connection closes: `vault approve` says so and
    /// waits for the next agent; another command names it in its error.
    async fn tell_stopping(&self, why: Option<&'static str>) {
        if matches!(self.role, Some(Role::Cli | Role::Approver)) {
            let reason = tools::stop_text(why.unwrap_or("locked")).to_owned();
            self.writer
                .frame(&AgentFrame::Event {
                    id: 0,
                    event: Event::Stopping { reason },
                })
                .await;
        }
    }

    /// Cancels what the connection has in flight (tool calls get the grace period), then
    /// withdraws what still waits, journals `session.end` and anchors the head. Once: a later
    /// call (the disconnect after `End`) finds no session and only stops the watchers.
    async fn end_session(&mut self, reason: &str) {
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
        let reason = reason.to_owned();
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
            // Team mode: the head goes to OpenBao too (on the publisher's thread).
            self.agent.env.heads.publish(head.seq, head.hash);
        }
    }
}
