//! The targets of the scale suites: the one loopback server of the demo, tests and benches,
//! with a route that records each request's tag and reads the journal before it answers; and
//! the SSH command that reports to such a server from the SSH host.
use super::JournalReader;
use serde_json::json;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

// The file `support/target.rs` loads too, here with a route of its own; two copies of a
// test-only server in one test binary cost nothing.
#[path = "../../../src/demo/target.rs"]
#[allow(dead_code, clippy::duplicate_mod)]
mod server;

/// One tagged request as a target received it, and what the journal held at that moment.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub tag: String,
    /// The `action.dispatched` row naming the tag, looked up before the request was answered.
    pub dispatched: Option<(String, i64)>,
    /// The journal's head (seq, hash) read at arrival.
    pub head: (i64, String),
}

/// A loopback HTTP target whose every request carries `t=TAG` in its query. The server records
/// each request (that count is the target's); the route then reads the journal before it
/// answers, so a request that came ahead of its intent row is caught as it arrives.
pub struct Recorder {
    pub port: u16,
    server: server::Target,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
}

impl Recorder {
    pub fn start(journal: Arc<JournalReader>) -> Self {
        let arrivals: Arc<Mutex<Vec<Arrival>>> = Arc::default();
        let log = arrivals.clone();
        let server = server::Target::start(move |r: &server::Request| {
            let tag = r
                .query()
                .split('&')
                .find_map(|kv| kv.strip_prefix("t="))
                .unwrap_or("")
                .to_owned();
            let dispatched = journal.dispatched(&tag);
            let head = journal.head();
            log.lock().unwrap().push(Arrival {
                tag: tag.clone(),
                dispatched,
                head,
            });
            server::Response::json(200, &json!({"ok": true, "t": tag}))
        })
        .expect("start a recording target");
        Self {
            port: server.port,
            server,
            arrivals,
        }
    }

    /// The check is not vacuous: a request no action sent (a tag no journal row names) comes
    /// out with no intent row.
    pub fn check_catches_a_request_without_intent(journal: Arc<JournalReader>) {
        let probe = Self::start(journal);
        let mut s = std::net::TcpStream::connect(("127.0.0.1", probe.port)).unwrap();
        s.write_all(b"GET /rec?t=t99n99999x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let a = probe.arrivals();
        assert_eq!(a.len(), 1, "the probe request was recorded: {answer}");
        assert_eq!(a[0].tag, "t99n99999x");
        assert!(a[0].dispatched.is_none(), "{a:?}");
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// How many requests reached the server at all (tagged or not), counted by the server.
    pub fn requests(&self) -> usize {
        self.server.requests().len()
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    /// Requests per tag.
    pub fn per_tag(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for a in self.arrivals() {
            *m.entry(a.tag).or_insert(0) += 1;
        }
        m
    }
}

/// The allowlisted SSH command: a script on the SSH host (this machine, run as root by sshd)
/// that reports `$1`, the tag, to the recorder on `recorder_port` and prints its answer. So the
/// recorder counts commands that actually ran on the host.
pub fn write_rec_script(dir: &Path, recorder_port: u16) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("rec");
    let script = format!(
        "#!/bin/bash\n\
         # Reports that this command ran on the SSH host, tagged $1, and waits for the answer.\n\
         exec 3<>/dev/tcp/127.0.0.1/{recorder_port} || exit 3\n\
         printf 'GET /ssh?t=%s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n' \"$1\" >&3\n\
         IFS= read -r status <&3\n\
         echo \"$1 ${{status%$'\\r'}}\"\n"
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}
