//! The approval card at the terminal sizes people use, through the real `vault approve` on a real
//! pseudo-terminal: at 80x24, 50x15 and 40x12, for an HTTP request with a JSON body and for an
//! SSH command, every deciding fact (the tool, the credential, the method and URL or the login,
//! command and pinned key, the keys) is on the screen where `a` is typed, and that `a` runs the
//! action; or the screen says the terminal is too small, and that `a` sends nothing (counted at
//! the target) and leaves the action pending. A terminal made larger shows the card, and only
//! then does `a` count.
mod support;

use serde_json::{json, Value};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::mcp::McpProc;
use support::pty::PtySession;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_sizes_tok_4c81e2";
const HOST_KEY: &str = "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8";
const SIZES: [(u16, u16); 3] = [(24, 80), (15, 50), (12, 40)];

/// A loopback port that counts the connections made to it (and closes each): an SSH "host"
/// where an approved command would arrive.
struct Counting {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Counting {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let n = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                n.fetch_add(1, Ordering::SeqCst);
                drop(stream);
            }
        });
        Self { port, connections }
    }

    fn count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// `s` without its terminal escapes (ESC [ … letter).
fn strip_ansi(s: &str) -> String {
    let mut plain = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain
}

/// The last screen drawn before `before` (a byte offset) that shows the keys, as lines.
fn card_screen(transcript: &str, before: usize) -> Vec<String> {
    let upto = &transcript[..before.min(transcript.len())];
    let screen = upto
        .rsplit("\x1b[2J\x1b[H")
        .find(|s| s.contains("[v]iew"))
        .unwrap_or_else(|| panic!("no card drawn in: {}", transcript.escape_debug()));
    // Not the PIN prompt that `a` put on the terminal's last row (`ESC [ rows ; 1 H`).
    let screen = match screen.find(";1H\x1b[2K") {
        Some(at) => &screen[..screen[..at].rfind("\x1b[").unwrap_or(at)],
        None => screen,
    };
    strip_ansi(screen)
        .split('\n')
        .map(|l| l.trim_end_matches('\r').to_owned())
        .filter(|l| !l.is_empty())
        .collect()
}

fn squeezed(s: &str) -> String {
    s.split_whitespace().collect()
}

/// Runs `vault approve` at `(rows, cols)`, types `a` once the card has been up 0.8 s, then the
/// approval PIN (which a card shown whole asks for; on a too-small screen its keys do nothing),
/// then `q`: the screen `a` was typed on, and whether it said the terminal was too small.
fn approve_at(v: &mut TestVault, (rows, cols): (u16, u16)) -> (Vec<String>, bool) {
    let run = v.run_tty_sized(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[v]iew", "a", 0.8),
            ("", &format!("{PIN}\r"), 0.5),
            ("", "q", 1.5),
        ],
        (rows, cols),
    );
    assert_eq!(run.code, 0, "{}", run.stdout.escape_debug());
    // The card on screen when `a` was typed: the last one drawn before the decision's note.
    let decided = run.stdout.find("Approved act_").unwrap_or(run.stdout.len());
    let screen = card_screen(&run.stdout, decided);
    let what = format!("{rows}x{cols}:\n{}", screen.join("\n"));
    assert!(
        screen.len() < usize::from(rows),
        "taller than the terminal: {what}"
    );
    assert!(
        screen
            .iter()
            .all(|l| l.chars().count() <= usize::from(cols)),
        "wider than the terminal: {what}"
    );
    let small = squeezed(&screen.join(" ")).contains("toosmall");
    (screen, small)
}

/// Every fact on `screen` (a fact wrapped over rows still counts).
fn assert_on(screen: &[String], facts: &[String], what: &str) {
    let all = squeezed(&screen.join(" "));
    for fact in facts {
        assert!(
            all.contains(&squeezed(fact)),
            "{what}: {fact:?} is not on the card:\n{}",
            screen.join("\n")
        );
    }
}

fn state(p: &mut McpProc, id: i64) -> Value {
    p.until_id(&json!(id), Duration::from_secs(60)).0["result"]["structuredContent"]["state"]
        .clone()
}

#[test]
fn an_http_card_with_a_json_body_shows_every_deciding_fact_at_each_size_or_sends_nothing() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("sizes-http");
    v.add_bearer("api", &t.base(), SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    for (n, size) in SIZES.into_iter().enumerate() {
        let id = n as i64 + 1;
        let before = t.requests().len();
        p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": {
            "credential": "api", "method": "POST",
            "url": format!("{}/v1/databases?dry_run=false&attempt={id}", t.base()),
            "headers": {"X-Request-Id": "r-81", "X-Trace": "t-1", "Accept": "application/json"},
            // Keys sorted: the body travels as sent, and this test's serde_json keeps insertion
            // order (passkey-types, a dev-dependency, turns on `preserve_order`).
            "json": {"backup": {"retention_days": 30, "window": "03:00"},
                     "deletion_protection": false, "name": "prod-db", "region": "eu-west-1",
                     "replicas": 3, "tags": ["billing", "critical"]},
            "wait_s": 60}}}));
        let action = v.wait_pending(1)[0]["action_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (screen, small) = approve_at(&mut v, size);
        let what = format!("HTTP at {}x{}", size.1, size.0);
        if small {
            assert_eq!(
                t.requests().len(),
                before,
                "{what}: `a` on a too-small card sent"
            );
            let still = v.wait_pending(1);
            assert_eq!(
                still[0]["action_id"],
                action.as_str(),
                "{what}: no longer pending"
            );
            v.run_pp(&["approve", "--id", &action, "--deny"], None).ok();
            assert_eq!(state(&mut p, id), "denied");
            continue;
        }
        assert_on(
            &screen,
            &[
                "tool http_request".into(),
                "credential api (profile default, version 1)".into(),
                format!("POST {}/v1/databases", t.base()),
                "[a]".into(),
                "[s]".into(),
            ],
            &what,
        );
        // The body's first fields, never `{` alone.
        let all = screen.join("\n");
        assert!(
            all.contains("\"backup\": {"),
            "{what}: no first field:\n{all}"
        );
        assert_eq!(state(&mut p, id), "completed", "{what}");
        assert_eq!(t.requests().len(), before + 1, "{what}: `a` ran it once");
    }
    p.finish(Duration::from_secs(10));
}

#[test]
fn an_ssh_card_shows_the_login_the_command_and_the_pinned_key_at_each_size_or_sends_nothing() {
    let host = Counting::start();
    let mut v = TestVault::init("sizes-ssh");
    let port = host.port.to_string();
    v.run_pp(
        &[
            "add",
            "ssh",
            "web1",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--user",
            "deploy",
            "--password-stdin",
            "--host-key",
            HOST_KEY,
        ],
        Some("DECOY_sizes_pw_1\n"),
    )
    .ok();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    for (n, size) in SIZES.into_iter().enumerate() {
        let id = n as i64 + 1;
        let before = host.count();
        p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "ssh_exec", "arguments": {
            "credential": "web1", "command": "systemctl restart web", "idempotency_key": format!("k{id}"), "wait_s": 60}}}));
        let action = v.wait_pending(1)[0]["action_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (screen, small) = approve_at(&mut v, size);
        let what = format!("SSH at {}x{}", size.1, size.0);
        if small {
            assert_eq!(
                host.count(),
                before,
                "{what}: `a` on a too-small card connected"
            );
            let still = v.wait_pending(1);
            assert_eq!(
                still[0]["action_id"],
                action.as_str(),
                "{what}: no longer pending"
            );
            v.run_pp(&["approve", "--id", &action, "--deny"], None).ok();
            assert_eq!(state(&mut p, id), "denied");
            continue;
        }
        assert_on(
            &screen,
            &[
                "tool ssh_exec".into(),
                "credential web1 (profile default, version 1)".into(),
                format!("ssh deploy@127.0.0.1:{port}"),
                "command systemctl restart web".into(),
                format!("host key {HOST_KEY} (pinned)"),
                "[a]".into(),
            ],
            &what,
        );
        // Approved: the executor went to the host (which is not an SSH server).
        assert_eq!(state(&mut p, id), "failed_before_send", "{what}");
        assert!(host.count() > before, "{what}: `a` did not reach the host");
    }
    p.finish(Duration::from_secs(10));
}

#[test]
fn a_terminal_too_small_for_the_deciding_facts_approves_nothing_until_it_is_larger() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("sizes-small");
    v.add_bearer("api", &t.base(), SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {
        "credential": "api", "method": "DELETE", "url": format!("{}/v1/projects/prod", t.base()), "wait_s": 60}}}));
    let action = v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut approve = PtySession::spawn(v.command(&["approve"]), None);
    approve.resize(6, 30);
    assert!(approve.wait_for("passphrase", Duration::from_secs(20)));
    std::thread::sleep(Duration::from_millis(200));
    approve.send(&format!("{PASSPHRASE}\n"));
    assert!(
        approve.wait_for("too small", Duration::from_secs(20)),
        "{}",
        approve.output().escape_debug()
    );
    // `a` and `s`, typed long after the screen came up: nothing is sent, nothing decided.
    std::thread::sleep(Duration::from_millis(800));
    approve.send("a");
    std::thread::sleep(Duration::from_millis(300));
    approve.send("s");
    std::thread::sleep(Duration::from_secs(1));
    assert!(t.requests().is_empty(), "sent: {:?}", t.requests());
    assert!(
        !approve.output().contains("PIN to approve"),
        "a too-small card asked for the PIN"
    );
    assert_eq!(v.wait_pending(1)[0]["action_id"], action.as_str());
    // Made larger, the card is drawn again (no key needed), and then `a` counts.
    approve.resize(24, 80);
    assert!(
        approve.wait_for("/v1/projects/prod", Duration::from_secs(5)),
        "not redrawn after the resize: {}",
        approve.output().escape_debug()
    );
    let out = approve.output();
    let last = out.rsplit("\x1b[2J\x1b[H").next().unwrap_or("");
    assert!(
        last.contains("DELETE") && last.contains("/v1/projects/prod"),
        "{}",
        last.escape_debug()
    );
    std::thread::sleep(Duration::from_millis(800));
    approve.send("a");
    assert!(approve.wait_for("PIN to approve", Duration::from_secs(10)));
    approve.send(&format!("{PIN}\r"));
    assert!(approve.wait_for("Approved act_", Duration::from_secs(20)));
    approve.send("q");
    assert_eq!(approve.finish(Duration::from_secs(10)), Some(0));
    let (r, _) = p.until_id(&json!(1), Duration::from_secs(60));
    assert_eq!(
        r["result"]["structuredContent"]["state"], "completed",
        "{r}"
    );
    let reqs = t.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0]["method"], "DELETE");
    p.finish(Duration::from_secs(10));
}
