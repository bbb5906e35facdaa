//! `vault approve`'s link to the agent: the queue it pushes and what it says besides (an action
//! that left the queue undecided, the pause switch, its own stop), a `ping` when it has been
//! quiet (a silent agent ends `vault approve` with what to check, never a hang), and, once the
//! agent is gone, a new connection to the next one: over the encrypted channel with the channel
//! key `vault approve` kept (not the master key), and only when what answers is the holder of
//! `agent.lock`. What it hears becomes `Told`, for the screen to show.
use crate::agent::client::{Client, ClientError};
use crate::agent::holder::{self, Holder};
use crate::agent::protocol::{ApprovalView, Event, Reply, Request, Role};
use crate::paths::VaultPaths;
use crate::wire::State;
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

/// After this long with nothing from the agent, `vault approve` pings it.
const PING_EVERY: Duration = Duration::from_secs(5);
/// How often, once the agent is gone, `vault approve` looks for the next one.
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// What the agent told, or what became of it.
pub(super) enum Told {
    Queue(Vec<ApprovalView>),
    /// An action left the queue: its state, and why.
    Left {
        action_id: String,
        state: State,
        reason: Option<String>,
    },
    Paused(String),
    Resumed,
    /// The agent is gone: what the person is told.
    Gone(String),
    /// Connected to a new agent, this pid.
    Back(u32),
}

pub(super) struct Watch {
    paths: VaultPaths,
    /// The encrypted channel's key (derived from the master key; it opens the channel, not
    /// `vault.db`), kept to reach the next agent.
    psk: Zeroizing<[u8; 32]>,
    client: Option<Client>,
    /// The agent last connected to.
    pid: u32,
    next_look: Instant,
}

impl Watch {
    /// Watches the queue of the agent `client` is connected to (it has asked `WatchPending`).
    pub(super) fn new(paths: VaultPaths, psk: Zeroizing<[u8; 32]>, client: Client) -> Self {
        Self {
            paths,
            psk,
            pid: client.pid,
            client: Some(client),
            next_look: Instant::now(),
        }
    }

    /// The connection to the agent, while there is one.
    pub(super) fn client(&mut self) -> Option<&mut Client> {
        self.client.as_mut()
    }

    /// Everything the agent told since the last call, without waiting; a new connection once a
    /// new agent holds the vault. `Err` when the agent stopped answering, or the next one cannot
    /// be reached safely: `vault approve` ends with that message.
    pub(super) fn poll(&mut self) -> anyhow::Result<Vec<Told>> {
        let mut told = Vec::new();
        let Some(client) = self.client.as_mut() else {
            if Instant::now() >= self.next_look {
                self.next_look = Instant::now() + LOOK_EVERY;
                if let Some(c) = self.reconnect()? {
                    self.pid = c.pid;
                    self.client = Some(c);
                    told.push(Told::Back(self.pid));
                }
            }
            return Ok(told);
        };
        match drain(client, &mut told) {
            Ok(()) => {}
            Err(ClientError::Stopped { reason }) => {
                self.client = None;
                told.push(Told::Gone(format!(
                    "The vault agent (pid {}) stopped: {reason}. Waiting for the next one (`vault unlock` starts it); [q] quits.",
                    self.pid
                )));
            }
            Err(ClientError::Gone | ClientError::CutByRelay { .. }) => {
                self.client = None;
                told.push(Told::Gone(format!(
                    "The vault agent (pid {}) went away without a word (killed, or it crashed); what waited is withdrawn. Waiting for the next one (`vault unlock` starts it); [q] quits.",
                    self.pid
                )));
            }
            Err(e) => return Err(e.into()),
        }
        Ok(told)
    }

    /// The vault's new agent over the encrypted channel, watching its queue; `None` while none
    /// listens yet.
    fn reconnect(&self) -> anyhow::Result<Option<Client>> {
        let held = holder::holder(&self.paths);
        if held == Holder::Nobody {
            return Ok(None);
        }
        let mut c = match Client::connect_secure(&self.paths, &self.psk, Role::Approver) {
            Ok(Some(c)) => c,
            // Not listening yet, or something else on the path: looked at again shortly.
            Ok(None) | Err(ClientError::Impostor(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let stands_between = match (held, c.relayed()) {
            (_, Some(listener)) => Some(listener),
            (Holder::Pid(agent), None) if agent != c.pid => Some(agent),
            _ => None,
        };
        if let Some(pid) = stands_between {
            anyhow::bail!(
                "a new vault agent (pid {}) holds the vault, but the process on its socket (pid {pid}) is not it; `vault approve` does not go on through it. `vault lock`, then `vault unlock`, takes the path back; then run `vault approve` again",
                c.pid
            );
        }
        match c.call(Request::WatchPending)? {
            Reply::Ok => Ok(Some(c)),
            other => Err(super::super::backend::unexpected(other)),
        }
    }
}

/// What `client` has received, as `Told`, then a ping if it has been quiet.
fn drain(client: &mut Client, told: &mut Vec<Told>) -> Result<(), ClientError> {
    while let Some((_, event)) = client.next_event(Duration::ZERO)? {
        told.push(match event {
            Event::Queue { actions } => Told::Queue(actions),
            Event::Left {
                action_id,
                state,
                reason,
            } => Told::Left {
                action_id,
                state,
                reason,
            },
            Event::Paused { reason } => Told::Paused(reason),
            Event::Resumed => Told::Resumed,
            // Kept by the client, and named by the end of the connection that follows.
            Event::Stopping { .. } | Event::Progress { .. } | Event::State { .. } => continue,
        });
    }
    client.keep_alive(PING_EVERY)
}

/// What the approver is told when an action it did not decide left the queue (`what`: its
/// headline, as its card showed it), or `None` when another note says it (a pause's denials).
pub(super) fn left_note(
    id: &str,
    what: Option<&str>,
    state: State,
    reason: Option<&str>,
) -> Option<String> {
    let id = crate::term::escape(id);
    let what = what.map_or(String::new(), |w| format!(" ({w})"));
    let reason = reason.map(crate::term::escape);
    Some(match (state, reason) {
        (State::Denied, Some(r)) if r.starts_with("the vault was paused") => return None,
        (State::Withdrawn, r) => format!(
            "Withdrawn {id}{what}: {}. Nothing was sent.",
            r.unwrap_or_else(|| "its call ended".into())
        ),
        (State::Expired, _) => {
            format!("Expired {id}{what}: nobody decided it in time. Nothing was sent.")
        }
        (state, Some(r)) => format!("{id}{what} is now {state} (not from this screen): {r}."),
        (state, None) => format!("{id}{what} is now {state} (not from this screen)."),
    })
}
