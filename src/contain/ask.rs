//! `vault run`'s proxy asking the person for a host its allow list does not name
//! (docs/design.md §8): one egress session with the vault's agent, opened at the first such
//! host (and again after the agent restarts), on which each host waits as a `network` action
//! for the person's card. One thread owns the connection: the proxy's threads hand it their
//! asks and what their connections carried, and it routes each reply back by request id. It
//! sleeps in `poll(2)` on the agent's socket and a wake-up pipe the proxy's threads write to (on
//! the pipe alone while nothing is in flight): no timer ticks while a card waits.
use crate::agent::client::{Client, ClientError};
use crate::agent::protocol::{
    AgentFrame, ClientInfo, ErrorCode, RelayedFile, Reply, Request, Role, State,
};
use crate::paths::VaultPaths;
use rustix::event::{PollFd, PollFlags};
use std::collections::HashMap;
use std::io::{PipeReader, PipeWriter, Read, Write};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Mutex;
use std::time::Duration;

/// How long the link waits for the rest of a frame once the socket said it is readable.
const REST_OF_FRAME: Duration = Duration::from_secs(1);

/// The person's answer for one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Approved (or covered by the person's session grant): open it, then report on `action`.
    Go { action: String },
    /// Not to be reached: why, in words for the client's proxy error.
    No(String),
}

/// One request for the agent, and who waits for its reply (nobody, for a report).
struct Job {
    req: Request,
    reply: Option<Sender<Reply>>,
}

/// The proxy's handle on its link to the agent: its queue, and the pipe that wakes it.
pub struct Asker {
    jobs: Mutex<(Sender<Job>, PipeWriter)>,
    /// Where the agent writes a response too large for its reply (`VaultPaths::relayed`).
    relayed: std::path::PathBuf,
}

impl Asker {
    /// Starts the link's thread; it connects at the first ask. `client`: the contained
    /// client's name, for the person's card (`claude (network)`).
    pub fn start(paths: VaultPaths, client: &str) -> Self {
        let (tx, rx) = mpsc::channel();
        let (wake_rx, wake_tx) = std::io::pipe().expect("a pipe for the proxy's link");
        let info = ClientInfo {
            name: format!("{client} (network)"),
            version: env!("CARGO_PKG_VERSION").into(),
            protocol_version: String::new(),
        };
        let relayed = paths.relayed();
        std::thread::spawn(move || Link::new(paths, info).run(rx, wake_rx));
        Self {
            jobs: Mutex::new((tx, wake_tx)),
            relayed,
        }
    }

    /// The file the agent wrote for action `id`'s response, when too large for its reply.
    pub fn relayed_body(&self, id: &str) -> std::path::PathBuf {
        crate::exec::relayed_body(&self.relayed, id)
    }

    /// Writes a request body too large for a frame to a new file for the agent.
    pub fn relay_request_body(&self, body: &[u8]) -> Result<RelayedFile, String> {
        crate::exec::relayed::write_request(&self.relayed, body)
            .map_err(|e| format!("the request body could not be passed to the vault: {e}"))
    }

    /// Removes the request body's file `name` once the agent answered (if it is still there).
    pub fn forget_request_body(&self, name: &str) {
        if let Ok(path) = crate::exec::relayed::relayed_request(&self.relayed, name) {
            let _ = std::fs::remove_file(path);
        }
    }

    /// Asks for `host:port` and waits for the person (or the card's expiry).
    pub fn ask(&self, host: &str, port: u16) -> Answer {
        answer(self.call(Request::Connect {
            host: host.to_owned(),
            port,
        }))
    }

    /// Sends `req` on the egress session and waits for its reply (a failure to reach the agent
    /// is an `error` reply that says so).
    pub fn call(&self, req: Request) -> Reply {
        let lost = || Reply::Error {
            code: ErrorCode::Internal,
            message: "the proxy's link to the vault agent stopped".into(),
        };
        let (reply, answer) = mpsc::channel();
        let job = Job {
            req,
            reply: Some(reply),
        };
        if self.send(job).is_err() {
            return lost();
        }
        answer.recv().unwrap_or_else(|_| lost())
    }

    /// A placeholder went to a host that is not its credential's: journaled (`call.rejected`
    /// of this session), never swapped. `head`: the request head it was in (its hash is the
    /// row's fingerprint). Waits for the agent to have journaled it.
    pub fn attempt(&self, why: String, head: &[u8]) {
        let req = Request::Reject {
            code: 403,
            reason: why,
            fingerprint: blake3::hash(head).to_hex()[..16].to_owned(),
            tool: None,
        };
        if let Reply::Error { message, .. } = self.call(req) {
            tracing::warn!("vault run: the attempt could not be journaled: {message}");
        }
    }

    /// What the connection of `action` carried, once it closed.
    pub fn closed(&self, action: &str, (sent, received): (u64, u64), error: Option<String>) {
        let req = Request::Tunneled {
            action_id: action.to_owned(),
            sent,
            received,
            error,
        };
        let _ = self.send(Job { req, reply: None });
    }

    fn send(&self, job: Job) -> Result<(), ()> {
        let mut jobs = self.jobs.lock().map_err(|_| ())?;
        jobs.0.send(job).map_err(|_| ())?;
        jobs.1.write_all(b"!").map_err(|_| ())
    }
}

/// The link's thread: its connection, and who waits for which reply.
struct Link {
    paths: VaultPaths,
    info: ClientInfo,
    client: Option<Client>,
    waiting: HashMap<u64, Option<Sender<Reply>>>,
}

impl Link {
    fn new(paths: VaultPaths, info: ClientInfo) -> Self {
        Self {
            paths,
            info,
            client: None,
            waiting: HashMap::new(),
        }
    }

    fn run(mut self, jobs: Receiver<Job>, mut wake: PipeReader) {
        let mut bytes = [0u8; 64];
        loop {
            loop {
                match jobs.try_recv() {
                    Ok(job) => self.start(job),
                    Err(TryRecvError::Empty) => break,
                    // The proxy is gone; what is in flight ends with the process.
                    Err(TryRecvError::Disconnected) => return,
                }
            }
            let (woken, readable) = match self.client.as_ref().filter(|_| !self.waiting.is_empty())
            {
                Some(c) => {
                    let socket = c.fd();
                    let mut fds = [
                        PollFd::new(&wake, PollFlags::IN),
                        PollFd::new(&socket, PollFlags::IN),
                    ];
                    if rustix::event::poll(&mut fds, None).is_err() {
                        continue;
                    }
                    (!fds[0].revents().is_empty(), !fds[1].revents().is_empty())
                }
                None => (true, false),
            };
            if woken && wake.read(&mut bytes).is_err() {
                return;
            }
            if readable {
                self.read();
            }
        }
    }

    /// Sends one job's request (connecting first if need be); a failure answers it at once.
    fn start(&mut self, Job { req, reply }: Job) {
        let sent = self
            .connected()
            .and_then(|c| c.send(req).map_err(|e| e.to_string()));
        match sent {
            Ok(id) => {
                self.waiting.insert(id, reply);
            }
            Err(why) => {
                // A broken connection: everyone in flight on it is answered too.
                self.client = None;
                self.fail_all(why.clone());
                if let Some(r) = reply {
                    let _ = r.send(failed(why));
                }
            }
        }
    }

    fn connected(&mut self) -> Result<&mut Client, String> {
        if self.client.is_none() {
            let info = Some(self.info.clone());
            self.client = match Client::connect_as(&self.paths, Role::Egress, info) {
                Ok(Some(c)) => Some(c),
                Ok(None) => {
                    return Err("the vault is locked, so nobody can approve this host: run `vault unlock` outside the sandbox, then try again".into())
                }
                Err(e) => return Err(format!("the vault agent could not be asked: {e}")),
            };
        }
        self.client
            .as_mut()
            .ok_or_else(|| "the vault agent could not be asked".into())
    }

    /// The frames the agent sent (the socket is readable): each reply goes to whoever waits for
    /// it. A broken connection answers everyone in flight.
    fn read(&mut self) {
        let mut within = REST_OF_FRAME;
        loop {
            let Some(client) = self.client.as_mut() else {
                return self.fail_all("the vault agent went away".into());
            };
            match client.next_frame(within) {
                Ok(Some(AgentFrame::Reply { id, reply })) => {
                    if let Some(Some(to)) = self.waiting.remove(&id) {
                        let _ = to.send(*reply);
                    }
                }
                Ok(Some(AgentFrame::Event { .. })) => {}
                Ok(None) => return,
                Err(e) => {
                    self.client = None;
                    return self.fail_all(stopped(&e));
                }
            }
            // What else already arrived, without waiting for more.
            within = Duration::ZERO;
        }
    }

    fn fail_all(&mut self, why: String) {
        for (_, to) in self.waiting.drain() {
            if let Some(to) = to {
                let _ = to.send(failed(why.clone()));
            }
        }
    }
}

fn failed(why: String) -> Reply {
    Reply::Error {
        code: ErrorCode::Internal,
        message: why,
    }
}

fn stopped(e: &ClientError) -> String {
    format!("the vault agent stopped before the person decided ({e}); try again once it runs")
}

/// The agent's reply to a `Connect`, as the proxy acts on it.
fn answer(reply: Reply) -> Answer {
    match reply {
        Reply::Action(a) if a.state == State::Dispatched => Answer::Go { action: a.id },
        Reply::Action(a) => {
            let why = a
                .reason
                .unwrap_or_else(|| format!("the action ended {}", a.state));
            Answer::No(format!("{} was {} ({}): {why}", a.summary, a.state, a.id))
        }
        Reply::Error { message, .. } => Answer::No(message),
        other => Answer::No(format!("the vault agent answered {other:?}")),
    }
}
