//! The targets of the scale suites: a loopback HTTP/1.1 server that records each request's tag
//! and reads the journal before it answers, and the SSH command that reports to one from the
//! SSH host.
//!
//! Not the shared `src/demo/target.rs`: that server records a request whose head was cut short
//! (the agent killed between two writes of one request) as if it were whole, with a truncated
//! path. Here a request counts only once its head is complete (what a server would act on); a
//! connection that ended inside a head is recorded apart, with the bytes that did arrive.
use super::{find_tag, JournalReader};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What reached a target on one connection, and what the journal held at that moment.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// The tag of a complete request; of a cut one, if its bytes carry the whole tag.
    pub tag: Option<String>,
    /// The request head arrived whole (else the connection ended inside it).
    pub complete: bool,
    /// The bytes of a head cut short.
    pub cut: Option<String>,
    /// The `action.dispatched` row naming the tag (or, for a cut head without one, the path
    /// prefix that arrived), looked up before the request was answered.
    pub dispatched: Option<(String, i64)>,
    /// The journal's head (seq, hash) read at arrival.
    pub head: (i64, String),
}

struct Shared {
    journal: Arc<JournalReader>,
    /// What summaries name before the path of a request to this target ("127.0.0.1:PORT" for
    /// the HTTP target; `None` for the SSH recorder, whose requests no summary names).
    origin: Option<String>,
    arrivals: Mutex<Vec<Arrival>>,
    stop: AtomicBool,
    /// The connections being served: a handle on each (to end it) and its thread (to wait for).
    /// Dropping the recorder ends and joins them, so that no thread of it reads the journal
    /// (SQLCipher, OpenSSL) while the test process exits: a query that raced OpenSSL's exit-time
    /// cleanup is the likeliest reading of a `scale` run that crashed (SIGSEGV) after its tests
    /// had passed.
    serving: Mutex<Vec<(TcpStream, std::thread::JoinHandle<()>)>>,
}

/// A loopback HTTP target whose requests carry `t=TAG` in their query. It reads the journal as
/// each request arrives, before it answers, so a request that came ahead of its intent row is
/// caught at that moment.
pub struct Recorder {
    pub port: u16,
    shared: Arc<Shared>,
    accepting: Option<std::thread::JoinHandle<()>>,
}

impl Recorder {
    /// `named`: summaries name this target's URLs (an HTTP credential is bound to it).
    pub fn start(journal: Arc<JournalReader>, named: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            journal,
            origin: named.then(|| format!("127.0.0.1:{port}")),
            arrivals: Mutex::default(),
            stop: AtomicBool::new(false),
            serving: Mutex::default(),
        });
        let s = shared.clone();
        let accepting = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let Ok(handle) = conn.try_clone() else {
                    continue;
                };
                let s2 = s.clone();
                let thread = std::thread::spawn(move || {
                    serve(&conn, &s2);
                    // The handle kept below holds the socket open: end it, as dropping the
                    // connection would.
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                });
                let mut serving = s.serving.lock().unwrap();
                serving.retain(|(_, t)| !t.is_finished());
                serving.push((handle, thread));
            }
        });
        Self {
            port,
            shared,
            accepting: Some(accepting),
        }
    }

    /// The check is not vacuous: a request no action sent (a tag no journal row names) is
    /// recorded with no intent row, and so is a head cut short.
    pub fn check_catches_a_request_without_intent(journal: Arc<JournalReader>) {
        let probe = Self::start(journal, true);
        let mut s = TcpStream::connect(("127.0.0.1", probe.port)).unwrap();
        s.write_all(b"GET /rec?t=t99n99999x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        let mut s = TcpStream::connect(("127.0.0.1", probe.port)).unwrap();
        s.write_all(b"GET /rec?t=t99n99").unwrap();
        drop(s);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while probe.arrivals().len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                probe.arrivals()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let a = probe.arrivals();
        assert!(
            a[0].complete && a[0].tag.as_deref() == Some("t99n99999x"),
            "{a:?}"
        );
        assert!(
            !a[1].complete && a[1].cut.as_deref() == Some("GET /rec?t=t99n99"),
            "{a:?}"
        );
        assert!(a.iter().all(|a| a.dispatched.is_none()), "{a:?}");
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every connection that carried bytes, in order of arrival.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.shared.arrivals.lock().unwrap().clone()
    }

    /// Complete requests: the target's count.
    pub fn requests(&self) -> usize {
        self.arrivals().iter().filter(|a| a.complete).count()
    }

    /// Heads cut short.
    pub fn cut(&self) -> Vec<Arrival> {
        self.arrivals()
            .into_iter()
            .filter(|a| !a.complete)
            .collect()
    }

    /// Complete requests per tag.
    pub fn per_tag(&self) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for a in self.arrivals().into_iter().filter(|a| a.complete) {
            *m.entry(a.tag.unwrap_or_default()).or_insert(0) += 1;
        }
        m
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag and lets the listener go.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.accepting.take() {
            let _ = t.join();
        }
        // No connection comes in now; end the open ones (a read waiting on a half-open one
        // returns) and wait for their threads.
        let serving = std::mem::take(&mut *self.shared.serving.lock().unwrap());
        for (conn, _) in &serving {
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
        for (_, t) in serving {
            let _ = t.join();
        }
    }
}

/// One connection: its head read to the blank line (or to EOF), checked against the journal,
/// recorded, answered.
fn serve(mut conn: &TcpStream, s: &Shared) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let complete = loop {
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break true;
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => break false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            break false;
        }
    };
    // A recorder being dropped reads the journal no more.
    if head.is_empty() || s.stop.load(Ordering::SeqCst) {
        return;
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let path = text
        .split(' ')
        .nth(1)
        .map(|p| p.split("\r\n").next().unwrap_or(p).to_owned())
        .unwrap_or_default();
    let tag = path
        .split_once("t=")
        .and_then(|(_, t)| find_tag(t).filter(|found| t.starts_with(found.as_str())));
    let dispatched = match (&tag, &s.origin) {
        (Some(t), _) => s.journal.dispatched(t),
        // A cut head without its whole tag: some dispatched action's URL starts with what came.
        (None, Some(origin)) if !complete => s.journal.dispatched(&format!("{origin}{path}")),
        _ => None,
    };
    let head_row = s.journal.head();
    s.arrivals.lock().unwrap().push(Arrival {
        tag: tag.clone(),
        complete,
        cut: (!complete).then(|| text.clone()),
        dispatched,
        head: head_row,
    });
    if complete {
        let body = format!("{{\"ok\":true,\"t\":\"{}\"}}", tag.unwrap_or_default());
        let answer = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = conn.write_all(answer.as_bytes());
        let _ = conn.flush();
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
