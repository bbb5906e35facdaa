//! A connection's opening: `hello` (the protocol version, the role and what it may be from
//! where, a session for the MCP and egress roles, journaled), and `contained`, `vault run`'s
//! relay naming the contained process it carries. Both the relay and the egress role are
//! accepted only from a peer that runs the agent's own executable.
use super::Conn;
use crate::agent::protocol::{self, ErrorCode, Reply, Request, Role};
use crate::agent::socket::Peer;
use crate::services::tools::Session;
use crate::services::{ops, session_start};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

impl Conn {
    /// `vault run`'s relay names the contained process it relays for. Only a peer running this
    /// agent's own executable may (a hand-written frame from any other program is refused), and
    /// the peer recorded for the session becomes the contained process.
    pub(super) async fn contained(&mut self, id: u64, pid: u32) -> Result<(), String> {
        self.own_executable("a contained session")?;
        let inner = Peer::of_pid(pid)
            .filter(Peer::is_same_user)
            .ok_or_else(|| {
                format!("the contained process {pid} is gone or runs as another user")
            })?;
        self.peer = inner;
        self.contained = true;
        self.writer.reply(id, Reply::Ok).await;
        Ok(())
    }

    /// `what` is opened only by `vault run`: the peer must run this agent's own executable (a
    /// hand-written frame from any other program is refused).
    fn own_executable(&self, what: &str) -> Result<(), String> {
        let own = std::fs::read_link("/proc/self/exe")
            .ok()
            .map(|p| p.display().to_string());
        if own.is_none() || self.peer.exe != own {
            return Err(format!(
                "{what} is opened only by `vault run` ({}), not by {}",
                own.as_deref().unwrap_or("?"),
                self.peer.exe.as_deref().unwrap_or("an unknown program")
            ));
        }
        Ok(())
    }

    pub(super) async fn hello(&mut self, id: u64, req: Request) -> Result<(), String> {
        let Request::Hello {
            v,
            role,
            client,
            profile,
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
        if self.contained && role != Role::Mcp {
            return Err("from inside `vault run` only `vault mcp` reaches the vault; run other `vault` commands outside it".into());
        }
        if role == Role::Egress {
            self.own_executable("a network session")?;
        }
        if role == Role::Approver && self.opener.is_none() {
            return Err("the approver speaks only over the encrypted channel".into());
        }
        if self.opener.is_none() {
            if let Err(why) = self.ticket.plain(role == Role::Mcp) {
                tracing::warn!(pid = ?self.peer.pid, "refused a plain-text session: {why}");
                self.writer
                    .reply(id, ops::error(ErrorCode::Limit, why))
                    .await;
                self.closing = Some("limit");
                return Ok(());
            }
        }
        // An MCP session, or `vault run`'s network session (its actions are the contained
        // client's, so it is marked contained).
        if matches!(role, Role::Mcp | Role::Egress) {
            let profile = profile.unwrap_or_else(|| "default".into());
            crate::credentials::check_name("profile", &profile).map_err(|e| e.to_string())?;
            let session = Arc::new(Session {
                id: crate::credentials::new_id("ses"),
                profile,
                client: client.unwrap_or_default(),
                waiting: AtomicUsize::new(0),
                rejections: std::sync::Mutex::default(),
            });
            let (s2, peer) = (session.clone(), (self.peer.process(), self.peer.parent()));
            let contained = self.contained || role == Role::Egress;
            let started = self
                .agent
                .env
                .db
                .run(move |st| session_start(st, &s2.id, &s2.client, &s2.profile, peer, contained))
                .await;
            if !matches!(started, Ok(Ok(()))) {
                return Err("the session could not be journaled".into());
            }
            self.session = Some(session);
        }
        self.role = Some(role);
        let mut warnings = self.agent.warnings();
        if let Some(session) = &self.session {
            let profile = session.profile.clone();
            let db = &self.agent.env.db;
            if let Ok(Ok(Some(w))) = db.run(move |st| ops::empty_profile(st, &profile)).await {
                warnings.push(w);
            }
        }
        let reply = Reply::Welcome {
            v: protocol::VERSION,
            vault_id: self.agent.env.trust.vault_id.clone(),
            pid: std::process::id(),
            session: self.session.as_ref().map(|s| s.id.clone()),
            secure: self.opener.is_some(),
            warnings,
        };
        self.writer.reply(id, reply).await;
        Ok(())
    }
}
