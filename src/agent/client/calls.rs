//! The request and reply traffic of a `Client`: each request goes out (sealed once the channel is
//! open) and waits at most its deadline for its reply, the events that arrive meanwhile are kept
//! for `next_event`, a quiet agent is pinged (`keep_alive`), and every frame read notes when the
//! agent was last heard from and why it stops if it says so. The end of the stream is `gone`;
//! no answer within the deadline is `silent`.
use super::{Client, ClientError};
use crate::agent::protocol::{self, AgentFrame, ClientFrame, Event, Reply, Request};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use zeroize::Zeroizing;

impl Client {
    /// How long `req` may take to be answered: the deadline, plus the wait a `journal` request
    /// asks the agent for; `verify` and `export` read the whole journal, so twenty times it.
    fn deadline_for(&self, req: &Request) -> Duration {
        match req {
            Request::Journal { wait_ms, .. } => self.deadline + Duration::from_millis(*wait_ms),
            Request::Verify { .. } | Request::Export { .. } => self.deadline * 20,
            _ => self.deadline,
        }
    }

    /// For a command that waits on events for long (`vault approve`): after `every` with nothing
    /// from the agent, sends a `ping`; `Silent` when neither its answer nor anything else came
    /// within the deadline.
    pub fn keep_alive(&mut self, every: Duration) -> Result<(), ClientError> {
        if let Some(sent) = self.ping_sent {
            if self.last_heard >= sent {
                self.ping_sent = None;
            } else if sent.elapsed() >= self.deadline {
                return Err(self.silent(self.deadline));
            } else {
                return Ok(());
            }
        }
        if self.last_heard.elapsed() >= every {
            self.send(Request::Ping)?;
            self.ping_sent = Some(Instant::now());
        }
        Ok(())
    }

    /// Sends a request; returns its id.
    pub fn send(&mut self, req: Request) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let line = protocol::encode(&ClientFrame { id, req });
        let written = match &mut self.sealer {
            Some(sealer) => {
                // The frame without its newline; the channel frames it anew.
                let sealed = sealer.seal(&line[..line.len() - 1]);
                self.stream.write_all(&sealed)
            }
            None => self.stream.write_all(&line),
        };
        match written {
            Ok(()) => Ok(id),
            Err(e) if crate::agent::socket::timed_out(&e) => Err(self.silent(self.deadline)),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends a request and waits for its reply (events that arrive meanwhile are kept), at most
    /// its deadline.
    pub fn call(&mut self, req: Request) -> Result<Reply, ClientError> {
        let within = self.deadline_for(&req);
        let id = self.send(req)?;
        let until = Instant::now() + within;
        loop {
            match self.read_frame(until)? {
                Some(AgentFrame::Reply { id: rid, reply }) if rid == id || rid == 0 => {
                    return match *reply {
                        Reply::Error { code, message } => {
                            Err(ClientError::Refused { code, message })
                        }
                        r => Ok(r),
                    }
                }
                Some(AgentFrame::Reply { .. }) => {}
                Some(AgentFrame::Event { id, event }) => self.pending_events.push((id, event)),
                None => return Err(self.silent(within)),
            }
        }
    }

    /// The next reply to any request sent with `send` (events that arrive meanwhile are kept),
    /// waiting at most the deadline.
    pub fn next_reply(&mut self) -> Result<(u64, Reply), ClientError> {
        let until = Instant::now() + self.deadline;
        loop {
            match self.read_frame(until)? {
                Some(AgentFrame::Reply { id, reply }) => return Ok((id, *reply)),
                Some(AgentFrame::Event { id, event }) => self.pending_events.push((id, event)),
                None => return Err(self.silent(self.deadline)),
            }
        }
    }

    /// The next event, waiting at most `timeout` (`Ok(None)` when none came).
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<(u64, Event)>, ClientError> {
        if !self.pending_events.is_empty() {
            return Ok(Some(self.pending_events.remove(0)));
        }
        match self.read_frame(Instant::now() + timeout)? {
            Some(AgentFrame::Event { id, event }) => Ok(Some((id, event))),
            Some(AgentFrame::Reply { .. }) | None => Ok(None),
        }
    }

    /// The next frame, reply or event (events kept by `call` first), waiting at most `timeout`
    /// (`Ok(None)` when none came): for a client with several requests in flight.
    pub fn next_frame(&mut self, timeout: Duration) -> Result<Option<AgentFrame>, ClientError> {
        if !self.pending_events.is_empty() {
            let (id, event) = self.pending_events.remove(0);
            return Ok(Some(AgentFrame::Event { id, event }));
        }
        self.read_frame(Instant::now() + timeout)
    }

    /// The descriptor to wait on (with the terminal) in `vault approve`.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.stream.as_fd()
    }

    /// One frame; `None` when `until` passed first (the end of the stream is `gone`). Notes
    /// when the agent was last heard from, and why it stops if it says so.
    fn read_frame(&mut self, until: Instant) -> Result<Option<AgentFrame>, ClientError> {
        loop {
            let Some(unit) = self.read_unit(until)? else {
                return Ok(None);
            };
            self.last_heard = Instant::now();
            let frame = match &mut self.opener {
                Some(opener) => match opener
                    .open(&unit)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?
                {
                    Some(frame) => frame,
                    // A chunk of a longer frame: the rest follows at once.
                    None => continue,
                },
                None => unit,
            };
            let frame: AgentFrame =
                protocol::decode(&frame).map_err(|e| ClientError::Protocol(e.to_string()))?;
            if let AgentFrame::Event {
                event: Event::Stopping { reason },
                ..
            } = &frame
            {
                self.stopping = Some(reason.clone());
            }
            return Ok(Some(frame));
        }
    }

    /// One line, or once the channel is open one sealed message; `None` when `until` passed
    /// first; `gone` at the end of the stream.
    pub(super) fn read_unit(
        &mut self,
        until: Instant,
    ) -> Result<Option<Zeroizing<Vec<u8>>>, ClientError> {
        loop {
            let next = match self.opener {
                Some(_) => self.splitter.next_sealed(),
                None => self
                    .splitter
                    .next_line()
                    .map_err(|e| ClientError::Protocol(e.to_string()))?,
            };
            if next.is_some() {
                return Ok(next);
            }
            // Waited for with `poll(2)`, whose timeout is exact: a socket's receive timeout is
            // counted in the kernel's ticks, so even a zero wait ("what else already arrived")
            // slept a tick (4 ms at 250 Hz) on every read that found nothing.
            let left = until.saturating_duration_since(Instant::now());
            if !readable(&self.stream, left)? {
                if Instant::now() >= until {
                    return Ok(None);
                }
                continue;
            }
            match self.stream.read(&mut self.read_buf[..]) {
                Ok(0) => return Err(self.gone()),
                Ok(n) => self.splitter.push(&self.read_buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Whether `stream` has something to read (data, its end, or an error) within `within`.
fn readable(stream: &std::os::unix::net::UnixStream, within: Duration) -> std::io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let timeout = Timespec::try_from(within).unwrap_or(Timespec {
        tv_sec: i64::MAX as _,
        tv_nsec: 0,
    });
    let mut fds = [PollFd::new(stream, PollFlags::IN)];
    match poll(&mut fds, Some(&timeout)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}
