//! A same-uid process speaking the agent's protocol itself, not through a `vault` command.
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

pub struct RawClient {
    write: UnixStream,
    read: BufReader<UnixStream>,
}

impl RawClient {
    /// Connects to the socket of the vault `v`'s agent.
    pub fn connect(v: &super::TestVault) -> Self {
        let write =
            UnixStream::connect(v.socket()).expect("a same-uid process reaches the agent's socket");
        write
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let read = BufReader::new(write.try_clone().unwrap());
        Self { write, read }
    }

    /// Connects and says hello as a person's command (role cli, this build's protocol version),
    /// the way a same-uid process that skips the `vault` command would (request id 1).
    pub fn cli(v: &super::TestVault) -> Self {
        let mut c = Self::connect(v);
        c.ask(
            1,
            json!({"op": "hello", "v": agent_vault::agent::protocol::VERSION, "role": "cli"}),
        );
        c
    }

    /// Sends `req` as request `id` and returns its reply (events on the way are skipped).
    pub fn ask(&mut self, id: u64, req: Value) -> Value {
        self.try_ask(id, req).expect("the agent answered")
    }

    /// `ask`, or `None` when the agent hung up or answered something that is not a frame.
    pub fn try_ask(&mut self, id: u64, req: Value) -> Option<Value> {
        let line = json!({"id": id, "req": req}).to_string() + "\n";
        self.write.write_all(line.as_bytes()).ok()?;
        loop {
            let mut line = String::new();
            if self.read.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let frame: Value = serde_json::from_str(&line).ok()?;
            if frame["t"] == "reply" && frame["id"] == id {
                return Some(frame["reply"].clone());
            }
        }
    }
}
