//! One remote command on one session channel whose exec request was sent (the command string as
//! given, no local shell; `pool` sends it): the server's answer to it, both streams drained into
//! bounded captures until the channel closes, and the stop sequence on timeout, cancellation or
//! shutdown: TERM to the remote command, a grace period while the streams keep draining, then
//! the channel is closed. Only what was observed is reported: an exit status or signal the
//! server sent, and how the streams ended.
use crate::exec::bounded::{Capture, Captured};
use crate::exec::Cancel;
use russh::client::Msg;
use russh::{Channel, ChannelMsg, ChannelWriteHalf, Sig};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// After the vault closed the channel, how long it waits for the server's close (OpenSSH does
/// not answer while the command still runs).
const CLOSE_WAIT: Duration = Duration::from_millis(500);

/// How the output streams ended (docs/design.md §5 `stream_end`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StreamEnd {
    Eof,
    Cancelled,
    Timeout,
}

impl StreamEnd {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            StreamEnd::Eof => "eof",
            StreamEnd::Cancelled => "cancelled",
            StreamEnd::Timeout => "timeout",
        }
    }
}

/// Why the vault stopped the command, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// `timeout_s` passed.
    Timeout,
    /// The call was cancelled (client cancellation or shutdown).
    Cancelled,
    /// The command exited but something it started kept the streams open past the grace period.
    StreamsHeldOpen,
}

/// What was observed while the command ran.
#[derive(Debug)]
pub(super) struct Observed {
    pub stdout: Captured,
    pub stderr: Captured,
    /// The server refused the exec request (the command did not start).
    pub refused: bool,
    pub exit_status: Option<u32>,
    pub exit_signal: Option<String>,
    pub stop: Option<Stop>,
    /// The connection ended before the channel closed.
    pub lost: bool,
    pub elapsed: Duration,
}

impl Observed {
    pub(super) fn stream_end(&self) -> StreamEnd {
        match self.stop {
            None => StreamEnd::Eof,
            Some(Stop::Cancelled) => StreamEnd::Cancelled,
            Some(Stop::Timeout | Stop::StreamsHeldOpen) => StreamEnd::Timeout,
        }
    }
}

enum Phase {
    Running,
    /// Exit observed; waiting for the streams to end.
    Draining(Instant),
    /// TERM sent; waiting for the command to end.
    Signalled(Instant),
    /// Close sent; waiting for the server's close.
    Closing(Instant),
}

fn signal_name(s: &Sig) -> String {
    match s {
        Sig::ABRT => "ABRT".into(),
        Sig::ALRM => "ALRM".into(),
        Sig::FPE => "FPE".into(),
        Sig::HUP => "HUP".into(),
        Sig::ILL => "ILL".into(),
        Sig::INT => "INT".into(),
        Sig::KILL => "KILL".into(),
        Sig::PIPE => "PIPE".into(),
        Sig::QUIT => "QUIT".into(),
        Sig::SEGV => "SEGV".into(),
        Sig::TERM => "TERM".into(),
        Sig::USR1 => "USR1".into(),
        // A name the server chose: not repeated to the model (third-party text).
        Sig::Custom(_) => "other".into(),
    }
}

/// How long a cancelled call waits for the command after TERM: half the grace period, so the
/// whole stop (and recording the outcome) fits in the grace period the session gives its calls
/// when it shuts down, which is the same `shutdown_grace_seconds`.
fn cancel_budget(grace: Duration) -> Duration {
    (grace / 2).max(Duration::from_millis(500))
}

/// What the vault asks of the remote side while it keeps reading.
enum Ask {
    Eof,
    Term,
    Close,
}

/// Sends `ask` from its own task. The connection's task delivers data to every channel and
/// waits when a channel's queue is full; a reader that awaited its own request while that task
/// waits on another full channel could deadlock the shared connection, so readers never do.
fn ask(write: &Arc<ChannelWriteHalf<Msg>>, ask: Ask) {
    let w = write.clone();
    tokio::spawn(async move {
        let _ = match ask {
            Ask::Eof => w.eof().await,
            Ask::Term => w.signal(Sig::TERM).await,
            Ask::Close => w.close().await,
        };
    });
}

/// Runs the command whose exec request was sent on `channel`; `timeout` counts from here.
pub(super) async fn run(
    channel: Channel<Msg>,
    timeout: Duration,
    grace: Duration,
    cancel: &Cancel,
    mut stdout: Capture,
    mut stderr: Capture,
) -> Observed {
    let start = Instant::now();
    let (mut channel, write) = channel.split();
    let mut run = Stopper {
        write: Arc::new(write),
        grace,
        phase: Phase::Running,
        started: false,
        seen: Facts::default(),
    };
    // The command gets no input: EOF at once, as `ssh host cmd </dev/null`, so a command that
    // reads its input ends instead of waiting for the timeout.
    ask(&run.write, Ask::Eof);
    let deadline = start + timeout;
    let mut cancel_seen = false;
    let closed = loop {
        tokio::select! {
            msg = channel.wait() => {
                if let Some(closed) = run.on_message(msg, &mut stdout, &mut stderr) {
                    break closed;
                }
            }
            _ = tokio::time::sleep_until(run.wake(deadline)) => {
                if run.on_timer() {
                    break false;
                }
            }
            _ = cancel.cancelled(), if !cancel_seen => {
                cancel_seen = true;
                run.on_cancel();
            }
        }
    };
    // Stop reading first (queued data is dropped, the connection's task never waits on us),
    // then close: dropping a channel does not close it, and a shared connection must not keep it.
    drop(channel);
    if !closed {
        ask(&run.write, Ask::Close);
    }
    run.seen.observed(stdout, stderr, start)
}

/// A running command: what was seen of it, and how far its stop has gone.
struct Stopper {
    write: Arc<ChannelWriteHalf<Msg>>,
    grace: Duration,
    phase: Phase,
    /// The server accepted the exec request.
    started: bool,
    seen: Facts,
}

impl Stopper {
    /// When the timer fires next: the timeout while running, else the current phase's limit.
    fn wake(&self, deadline: Instant) -> Instant {
        match self.phase {
            Phase::Running => deadline,
            Phase::Draining(t) | Phase::Signalled(t) | Phase::Closing(t) => t,
        }
    }

    /// Takes one channel message; `Some(closed)` ends the run (`closed`: the channel is closed
    /// already, nothing to close).
    fn on_message(
        &mut self,
        msg: Option<ChannelMsg>,
        stdout: &mut Capture,
        stderr: &mut Capture,
    ) -> Option<bool> {
        match msg {
            None => {
                // The connection went away (or the channel was already closed by us).
                self.seen.lost = !matches!(self.phase, Phase::Closing(_));
                return Some(true);
            }
            Some(ChannelMsg::Data { data }) => stdout.push(&data),
            Some(ChannelMsg::ExtendedData { data, .. }) => stderr.push(&data),
            Some(ChannelMsg::Success) => self.started = true,
            Some(ChannelMsg::Failure) if !self.started => {
                self.seen.refused = true;
                return Some(false);
            }
            Some(ChannelMsg::ExitStatus { exit_status }) => {
                self.seen.exit_status = Some(exit_status);
                self.drain();
            }
            Some(ChannelMsg::ExitSignal { signal_name: s, .. }) => {
                self.seen.exit_signal = Some(signal_name(&s));
                self.drain();
            }
            Some(ChannelMsg::Close) => return Some(true),
            Some(_) => {}
        }
        None
    }

    /// The command ended: its streams get the grace period to end too.
    fn drain(&mut self) {
        if matches!(self.phase, Phase::Running) {
            self.phase = Phase::Draining(Instant::now() + self.grace);
        }
    }

    /// The current phase's time is up; true when the run gives up waiting.
    fn on_timer(&mut self) -> bool {
        match self.phase {
            Phase::Running => {
                tracing::debug!("timeout: sending TERM");
                self.seen.stop = Some(Stop::Timeout);
                ask(&self.write, Ask::Term);
                self.phase = Phase::Signalled(Instant::now() + self.grace);
            }
            Phase::Draining(_) | Phase::Signalled(_) => {
                if self.seen.stop.is_none() {
                    self.seen.stop = Some(Stop::StreamsHeldOpen);
                }
                tracing::debug!("grace over: closing the channel");
                ask(&self.write, Ask::Close);
                self.phase = Phase::Closing(Instant::now() + CLOSE_WAIT);
            }
            Phase::Closing(_) => {
                tracing::debug!("no close from the server; leaving the channel");
                return true;
            }
        }
        false
    }

    /// A cancellation (or shutdown) also cuts short a stop already under way, so the outcome is
    /// recorded within the grace period the session gives its calls.
    fn on_cancel(&mut self) {
        let by = Instant::now() + cancel_budget(self.grace);
        match self.phase {
            Phase::Running => {
                self.seen.stop = Some(Stop::Cancelled);
                ask(&self.write, Ask::Term);
                self.phase = Phase::Signalled(by);
            }
            Phase::Draining(t) => {
                self.seen.stop.get_or_insert(Stop::Cancelled);
                self.phase = Phase::Draining(t.min(by));
            }
            // TERM was sent already and the grace is running: stop waiting now.
            Phase::Signalled(_) => {
                tracing::debug!("cancelled during the grace period: closing the channel");
                ask(&self.write, Ask::Close);
                self.phase = Phase::Closing(Instant::now() + CLOSE_WAIT);
            }
            Phase::Closing(_) => {}
        }
    }
}

#[derive(Default)]
struct Facts {
    refused: bool,
    exit_status: Option<u32>,
    exit_signal: Option<String>,
    stop: Option<Stop>,
    lost: bool,
}

impl Facts {
    fn observed(self, stdout: Capture, stderr: Capture, start: Instant) -> Observed {
        Observed {
            stdout: stdout.finish(),
            stderr: stderr.finish(),
            refused: self.refused,
            exit_status: self.exit_status,
            exit_signal: self.exit_signal,
            stop: self.stop,
            lost: self.lost,
            elapsed: start.elapsed(),
        }
    }
}
