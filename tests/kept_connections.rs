//! The HTTP executor keeps a credential version's connection for its next action
//! (`src/exec/kept.rs`), through the real binary, counted at loopback targets: a later action of
//! the same version sends on the same connection; another credential, an edited one, or one idle
//! past the kept time opens its own; a connection the target closed is not reused; and a kept
//! connection that breaks after the request went out is `indeterminate`, never
//! `failed_before_send` (the target counted the request).
mod support;

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_kept_tok_5e1d";

fn add_never(v: &mut TestVault, name: &str, host: &str) {
    v.add_bearer_with(name, host, SECRET, &["--approval", "never"]);
}

fn mcp(v: &TestVault) -> McpProc {
    support::ssh::mcp(v, None)
}

/// One `http_request` GET; returns its `structuredContent`.
fn get(p: &mut McpProc, id: i64, credential: &str, url: &str) -> Value {
    support::team::get(p, id, credential, url, 20)["structuredContent"].clone()
}

#[test]
fn a_credential_versions_next_action_reuses_its_connection_and_nothing_else_does() {
    let target = HttpTarget::start_kept(SECRET);
    let mut v = TestVault::init("kept-reuse");
    add_never(&mut v, "api", &target.base());
    add_never(&mut v, "other", &target.base());
    let mut p = mcp(&v);
    let url = |path: &str| format!("{}{path}", target.base());

    for (id, path) in [(1, "/a"), (2, "/b"), (3, "/c")] {
        assert_eq!(get(&mut p, id, "api", &url(path))["state"], "completed");
    }
    assert_eq!(target.requests().len(), 3);
    assert_eq!(
        target.connections(),
        1,
        "three actions of one credential version, one connection"
    );

    assert_eq!(get(&mut p, 4, "other", &url("/d"))["state"], "completed");
    assert_eq!(
        target.connections(),
        2,
        "another credential never sends on api's connection"
    );

    v.run_pp(&["edit", "api", "--path-prefix", "/"], None).ok();
    assert_eq!(get(&mut p, 5, "api", &url("/e"))["state"], "completed");
    assert_eq!(
        target.connections(),
        3,
        "an edited credential (a new version) opens its own connection"
    );

    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(get(&mut p, 6, "api", &url("/f"))["state"], "completed");
    assert_eq!(
        target.connections(),
        4,
        "a connection idle past the kept time is not reused"
    );
    let sent = target.requests();
    assert_eq!(sent.len(), 6);
    assert!(
        sent.iter()
            .all(|r| r["headers"]["authorization"] == format!("Bearer {SECRET}")),
        "every request carried the credential"
    );
    p.finish(Duration::from_secs(10));
}

/// What the raw target does with a connection after answering its first request.
#[derive(Clone, Copy)]
enum After {
    /// Closes it at once (the answer said keep-alive).
    Close,
    /// Reads the next request, then closes it without an answer.
    HangUp,
}

/// A loopback HTTP/1.1 server that answers the first request of every connection with a
/// keep-alive `{}`, then does `after`; it counts connections and request heads.
struct Raw {
    port: u16,
    connections: Arc<AtomicUsize>,
    heads: Arc<AtomicUsize>,
}

impl Raw {
    fn start(after: After) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (connections, heads) = (Arc::<AtomicUsize>::default(), Arc::<AtomicUsize>::default());
        let (c, h) = (connections.clone(), heads.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let h = h.clone();
                std::thread::spawn(move || {
                    if !read_head(&mut conn) {
                        return;
                    }
                    h.fetch_add(1, Ordering::SeqCst);
                    let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\n{}";
                    if conn.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                    if let After::HangUp = after {
                        if read_head(&mut conn) {
                            h.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    let _ = conn.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Self {
            port,
            connections,
            heads,
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn counts(&self) -> (usize, usize) {
        (
            self.connections.load(Ordering::SeqCst),
            self.heads.load(Ordering::SeqCst),
        )
    }
}

/// Reads one request head (a GET: no body); whether a whole one came.
fn read_head(conn: &mut TcpStream) -> bool {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return false,
        }
    }
    true
}

#[test]
fn a_connection_the_target_closed_is_not_reused() {
    let target = Raw::start(After::Close);
    let mut v = TestVault::init("kept-closed");
    add_never(&mut v, "api", &target.base());
    let mut p = mcp(&v);
    for id in 1..=2 {
        let r = get(&mut p, id, "api", &format!("{}/x{id}", target.base()));
        assert_eq!(r["state"], "completed", "{r}");
    }
    assert_eq!(
        target.counts(),
        (2, 2),
        "the second request went on a new connection, once"
    );
    p.finish(Duration::from_secs(10));
}

#[test]
fn a_kept_connection_that_breaks_after_the_request_went_out_is_indeterminate() {
    let target = Raw::start(After::HangUp);
    let mut v = TestVault::init("kept-hangup");
    add_never(&mut v, "api", &target.base());
    let mut p = mcp(&v);
    let first = get(&mut p, 1, "api", &format!("{}/first", target.base()));
    assert_eq!(first["state"], "completed", "{first}");
    let second = get(&mut p, 2, "api", &format!("{}/second", target.base()));
    assert_eq!(
        target.counts(),
        (1, 2),
        "the second request went out on the kept connection, and arrived"
    );
    assert_eq!(
        second["state"], "indeterminate",
        "the target had the request, so it may have acted: {second}"
    );
    p.finish(Duration::from_secs(10));
}
