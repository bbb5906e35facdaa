//! The MCP tools as the custody agent runs them: argument checks against the catalog's schemas,
//! credential lookup in the session's profile, policy, submission, waiting for the decision
//! (pushed, never polled), dispatch on the executors, and the result shapes. Every action and
//! every lookup is scoped to the session (one agent connection of `vault mcp`) that asked.
mod errors;
mod handlers;
#[cfg(test)]
mod output_parity_tests;
mod remote;
mod result;
mod wait;

pub(crate) use handlers::{call, proxied, reject};
pub(crate) use wait::{stop_text, wait_for, Waited};

use crate::approvals::Trust;
use crate::config::Config;
use crate::exec::Executor;
use crate::paths::VaultPaths;
use crate::services::db::Db;
use crate::services::hub::Hub;
use crate::wire::protocol::Event;
use crate::wire::ClientInfo;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

/// What every tool call in the agent shares.
pub(crate) struct Env {
    pub db: Db,
    pub hub: Arc<Hub>,
    pub trust: Trust,
    pub paths: VaultPaths,
    pub config: Config,
    pub http: Arc<dyn Executor>,
    pub ssh: Arc<dyn Executor>,
    /// Team mode: the OpenBao session secrets are read through (no login: none is used).
    pub openbao: Arc<crate::services::openbao::Remote>,
    /// Team mode: writes the journal's head to OpenBao at every anchor and at lock.
    pub heads: Arc<crate::services::openbao::head::Publisher>,
    /// Why the agent is stopping, once it is: a waiting call it cancels is answered, not dropped.
    pub stopping: tokio::sync::watch::Receiver<Option<&'static str>>,
}

/// One MCP session: a connection of `vault mcp` to the agent.
pub(crate) struct Session {
    pub id: String,
    pub profile: String,
    /// The client's self-reported name and version: a label for people, never used to scope.
    pub client: ClientInfo,
    /// Actions of this session now waiting for a person (bounded per session).
    pub waiting: AtomicUsize,
    /// Refused calls journaled in the current second, and those only counted.
    pub rejections: std::sync::Mutex<Rejections>,
}

/// A per-session budget of refused calls journaled one by one (`limits.refused_calls_per_second`);
/// past it they are counted and journaled as one `call.suppressed` row.
#[derive(Debug, Default)]
pub(crate) struct Rejections {
    window: Option<std::time::Instant>,
    journaled: u32,
    suppressed: u64,
    pub total_suppressed: u64,
}

impl Rejections {
    /// Whether to journal this refusal, and how many were suppressed before it (to journal first).
    fn admit(&mut self, per_second: u32) -> Option<u64> {
        let now = std::time::Instant::now();
        if self
            .window
            .is_none_or(|w| now.duration_since(w).as_secs() >= 1)
        {
            self.window = Some(now);
            self.journaled = 0;
        }
        if self.journaled < per_second {
            self.journaled += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            self.total_suppressed += 1;
            None
        }
    }
}

/// Most actions one session may have waiting for a person at once.
pub(crate) const MAX_WAITING_PER_SESSION: usize = 16;

/// Where a tool call's events go (the connection that submitted it). `send` resolves once the
/// event is written, so a `dispatched` state is on its way before the executor starts.
pub(crate) trait EventSink: Send + Sync {
    fn send(&self, event: Event) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}
