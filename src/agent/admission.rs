//! How many connections the agent takes, and from whom, so a same-uid process that opens many
//! cannot crowd out the person: at most `MAX_PER_PEER` from one process, at most `MAX_PLAIN` in
//! plain text (MCP sessions and commands given no passphrase), of which at most `MAX_MCP` MCP
//! sessions (the rest stays for the person's commands), the rest of `MAX_CONNECTIONS` left to the
//! encrypted channel of commands that hold the vault's key; a connection must say what it is
//! (`hello`, or open the channel) within `FIRST_FRAME`. The kill switches do not
//! depend on any of this: `vault lock` and `vault pause` reach the agent by signal.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connections at once, of every kind.
pub(super) const MAX_CONNECTIONS: usize = 512;
/// Connections at once from one peer process.
pub(super) const MAX_PER_PEER: usize = 64;
/// Plain-text connections at once (MCP sessions, commands given no passphrase).
pub(super) const MAX_PLAIN: usize = 256;
/// MCP sessions at once (within `MAX_PLAIN`).
pub(super) const MAX_MCP: usize = 192;
/// How long a new connection has to say hello or open the channel.
pub(super) const FIRST_FRAME: Duration = Duration::from_secs(3);

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    plain: usize,
    mcp: usize,
    per_peer: HashMap<u32, usize>,
}

/// The agent's connection counts.
#[derive(Debug, Default)]
pub(super) struct Admission(Mutex<Counts>);

/// One admitted connection; its place is given back when it is dropped.
pub(super) struct Ticket {
    admission: Arc<Admission>,
    peer: u32,
    plain: bool,
    mcp: bool,
}

impl Admission {
    /// Admits a connection from `peer` (its pid, 0 if unknown), or says why not.
    pub(super) fn admit(self: &Arc<Self>, peer: u32) -> Result<Ticket, String> {
        let mut c = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let from_peer = c.per_peer.get(&peer).copied().unwrap_or(0);
        if c.total >= MAX_CONNECTIONS {
            return Err(format!(
                "the vault agent has {MAX_CONNECTIONS} connections open; `vault doctor` shows what holds them, `vault lock` stops the agent"
            ));
        }
        if from_peer >= MAX_PER_PEER {
            return Err(format!(
                "process {peer} already has {MAX_PER_PEER} connections open to the vault agent"
            ));
        }
        c.total += 1;
        *c.per_peer.entry(peer).or_default() += 1;
        Ok(Ticket {
            admission: self.clone(),
            peer,
            plain: false,
            mcp: false,
        })
    }

    /// Connections open now.
    pub(super) fn open(&self) -> usize {
        self.0.lock().map(|c| c.total).unwrap_or(0)
    }
}

impl Ticket {
    /// The connection said hello in plain text (as an MCP session if `mcp`): it takes a
    /// plain-text place, if one is free.
    pub(super) fn plain(&mut self, mcp: bool) -> Result<(), String> {
        if self.plain {
            return Ok(());
        }
        let mut c = self.admission.0.lock().unwrap_or_else(|p| p.into_inner());
        if c.plain >= MAX_PLAIN {
            return Err(format!(
                "the vault agent has {MAX_PLAIN} plain-text connections open (MCP sessions and commands without the passphrase); close some, or give this command the passphrase"
            ));
        }
        if mcp && c.mcp >= MAX_MCP {
            return Err(format!(
                "the vault agent has {MAX_MCP} MCP sessions open; close some AI clients' sessions"
            ));
        }
        c.plain += 1;
        c.mcp += usize::from(mcp);
        self.plain = true;
        self.mcp = mcp;
        Ok(())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut c = self.admission.0.lock().unwrap_or_else(|p| p.into_inner());
        c.total -= 1;
        if self.plain {
            c.plain -= 1;
        }
        if self.mcp {
            c.mcp -= 1;
        }
        if let Some(n) = c.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                c.per_peer.remove(&self.peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_peer_cannot_take_every_place_and_places_come_back() {
        let a = Arc::new(Admission::default());
        let mut held: Vec<Ticket> = (0..MAX_PER_PEER).map(|_| a.admit(7).unwrap()).collect();
        assert!(a.admit(7).is_err(), "a 65th connection of one process");
        let mut other = a.admit(8).unwrap();
        assert!(other.plain(false).is_ok());
        for t in held.iter_mut() {
            t.plain(true).unwrap();
        }
        assert_eq!(a.open(), MAX_PER_PEER + 1);
        held.clear();
        drop(other);
        assert_eq!(a.open(), 0);
        // MCP sessions run out first: the rest of the plain-text places stay for commands.
        let mut plain: Vec<Ticket> = Vec::new();
        for i in 0..MAX_MCP as u32 {
            let mut t = a.admit(100 + i).unwrap();
            t.plain(true).unwrap();
            plain.push(t);
        }
        let mut session = a.admit(5000).unwrap();
        assert!(session.plain(true).is_err(), "one MCP session too many");
        for i in MAX_MCP as u32..MAX_PLAIN as u32 {
            let mut t = a.admit(100 + i).unwrap();
            t.plain(false).unwrap();
            plain.push(t);
        }
        // The plain-text places run out before the whole: the rest stays for the channel.
        let mut late = a.admit(9999).unwrap();
        assert!(late.plain(false).is_err());
        assert!(
            a.admit(10_000).is_ok(),
            "an encrypted connection still gets in"
        );
    }
}
