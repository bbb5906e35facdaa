//! The HTTP executor's kept connections: one ureq agent, and so one pool of idle connections,
//! per credential version, set of TLS roots, pinned addresses and timeout. A later action of the
//! same credential version, to the same checked addresses, sends on a connection an earlier
//! authorized action opened (no new TCP or TLS handshake); an edit changes the version, so a
//! connection of the old version never serves the new one. Idle connections are kept for
//! `IDLE_KEPT` only, shorter than the usual server's keep-alive, so a reused connection is
//! rarely one the target is closing. `Sending` marks, per request, whether any of its bytes
//! started out: a pooled connection never passes through the connector chain, so "connected"
//! cannot tell `failed_before_send` from `indeterminate` any more; the first write can.
use std::cell::Cell;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

/// How long an idle connection (and an agent no action used) is kept.
pub(super) const IDLE_KEPT: Duration = Duration::from_secs(2);
/// Idle connections kept per agent: enough for a client's few requests in parallel.
pub(super) const IDLE_PER_AGENT: usize = 4;
/// Agents kept at once; past it the least recently used goes, with its connections.
const MAX_AGENTS: usize = 32;

thread_local! {
    /// Whether the request running on this thread has begun to write (`Sending`).
    static SENT: Cell<bool> = const { Cell::new(false) };
}

/// What an agent may be reused for: all of it must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub credential_id: String,
    pub version: i64,
    /// The blake3 of the roots (`tls::Shared::roots_key`).
    pub roots: [u8; 32],
    /// The credential host's checked addresses for this action, in the guard's order.
    pub addrs: Vec<SocketAddr>,
    pub timeout_s: u64,
}

#[derive(Debug)]
struct Kept {
    key: Key,
    agent: ureq::Agent,
    used: Instant,
}

/// The process's agents, least recently used first.
#[derive(Debug, Default)]
pub(super) struct Agents(Mutex<Vec<Kept>>);

impl Agents {
    /// The agent for `key`: the kept one, else `make()`'s, kept from now on. Agents idle past
    /// `IDLE_KEPT` are dropped first (and their connections closed).
    pub(super) fn agent(&self, key: Key, make: impl FnOnce() -> ureq::Agent) -> ureq::Agent {
        let now = Instant::now();
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.retain(|k| now.duration_since(k.used) <= IDLE_KEPT);
        let agent = match kept.iter().position(|k| k.key == key) {
            Some(i) => kept.remove(i).agent,
            None => make(),
        };
        if kept.len() >= MAX_AGENTS {
            kept.remove(0);
        }
        kept.push(Kept {
            key,
            agent: agent.clone(),
            used: now,
        });
        agent
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

/// The request about to run on this thread has sent nothing yet.
pub(super) fn begin_request() {
    SENT.with(|s| s.set(false));
}

/// Whether the request running on this thread began to write to its connection: after that,
/// the target may have it.
pub(super) fn request_began() -> bool {
    SENT.with(Cell::get)
}

/// Last in the connector chain (after TCP and, for https, the handshake): wraps a new
/// connection so that its writes are seen, whichever later request it serves from the pool.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Marked;

impl<In: Transport> Connector<In> for Marked {
    type Out = Sending<In>;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<In>,
    ) -> Result<Option<Self::Out>, ureq::Error> {
        Ok(chained.map(Sending))
    }
}

/// A connection whose first write of each request marks it begun (`request_began`).
#[derive(Debug)]
pub(super) struct Sending<T>(T);

impl<T: Transport> Transport for Sending<T> {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.0.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        // Marked before the write: a write that fails part way may have reached the target.
        if !crate::mutation::off("request_began") {
            SENT.with(|s| s.set(true));
        }
        self.0.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.0.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.0.is_open()
    }

    fn is_tls(&self) -> bool {
        self.0.is_tls()
    }
}

#[cfg(test)]
mod tests {
    use super::{Agents, Key, IDLE_KEPT, MAX_AGENTS};

    fn key(version: i64, port: u16) -> Key {
        Key {
            credential_id: "cred_1".into(),
            version,
            roots: [7; 32],
            addrs: vec![([127, 0, 0, 1], port).into()],
            timeout_s: 30,
        }
    }

    /// The same key gets the same agent; any part that differs (an edited credential's version,
    /// other addresses) gets a new one; an agent idle past `IDLE_KEPT` is not reused.
    #[test]
    fn an_agent_is_reused_only_for_the_same_version_and_addresses() {
        let agents = Agents::default();
        let made = std::cell::Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            ureq::Agent::new_with_defaults()
        };
        agents.agent(key(1, 80), make);
        agents.agent(key(1, 80), make);
        assert_eq!(made.get(), 1, "the same key reuses its agent");
        agents.agent(key(2, 80), make);
        agents.agent(key(1, 81), make);
        assert_eq!(made.get(), 3, "another version or address is another agent");
        agents.0.lock().unwrap()[0].used -= IDLE_KEPT * 2;
        agents.agent(key(1, 80), make);
        assert_eq!(made.get(), 4, "an agent idle too long is dropped");
        for port in 0..MAX_AGENTS as u16 * 2 {
            agents.agent(key(9, port), make);
        }
        assert_eq!(agents.len(), MAX_AGENTS, "the kept agents are bounded");
    }
}
