//! The kill switches against a same-uid process that wants them to fail: `vault pending`,
//! `vault pause` and `vault lock` still work, within seconds, while the attacker holds 256 or
//! 1000 connections open on the agent's socket, and after it merely renamed the socket; and a
//! listing shows the policy that applies (an unsigned one counts as `each`), never the one a
//! database row claims. Run as root (CI), each test re-runs itself as the unprivileged
//! `vaulttest`, so the attacker and the vault's processes share that uid.
mod support;

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use support::mcp::McpProc;
use support::memory::is_gone;
use support::relay::MovedSocket;
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::*;

const SECRET: &str = "DECOY_killswitch_tok_0d4e71";
/// How long a kill switch may take.
const LIMIT: Duration = Duration::from_secs(10);

/// A connect that never blocks (a full backlog is a refusal, not a hang).
fn connect(path: &Path) -> std::io::Result<UnixStream> {
    use rustix::net::{socket_with, AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let flags = SocketFlags::CLOEXEC | SocketFlags::NONBLOCK;
    let fd = socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    rustix::net::connect(&fd, &SocketAddrUnix::new(path)?)?;
    Ok(UnixStream::from(fd))
}

/// Whether a connection is still open; reads (and so drops) anything the agent sent.
fn open(mut s: &UnixStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

fn hello() -> Vec<u8> {
    let v = agent_vault::agent::protocol::VERSION;
    format!("{{\"id\":1,\"req\":{{\"op\":\"hello\",\"v\":{v},\"role\":\"cli\"}}}}\n").into_bytes()
}

/// The attacker's `n` connections: every other one says hello and idles, the rest send nothing.
struct Flood(Vec<UnixStream>);

impl Flood {
    fn start(socket: &Path, n: usize) -> Self {
        let mut conns = Vec::new();
        for i in 0..n {
            let Ok(mut s) = connect(socket) else { continue };
            if i % 2 == 1 {
                let _ = s.write_all(&hello());
            }
            conns.push(s);
        }
        // Let the agent take (or refuse) them.
        std::thread::sleep(Duration::from_millis(500));
        Self(conns)
    }

    fn open(&self) -> usize {
        self.0.iter().filter(|s| open(s)).count()
    }
}

/// Whether one more connection of the attacker's is refused a welcome (the flood took all the
/// agent gives it).
fn saturated(socket: &Path) -> bool {
    let Ok(mut s) = connect(socket) else {
        return true;
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let _ = s.write_all(&hello());
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = s.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
        if got.contains(&b'\n') {
            break;
        }
    }
    !String::from_utf8_lossy(&got).contains("welcome")
}

/// `vault ARGS`, killed after `LIMIT`; (exit code or -1, stdout + stderr, how long it took).
fn timed(v: &TestVault, args: &[&str]) -> (i32, String, Duration) {
    let start = Instant::now();
    let mut child = v
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s.code().unwrap_or(-1);
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break -1;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut text);
    let _ = child.stderr.take().unwrap().read_to_string(&mut text);
    (code, text, start.elapsed())
}

/// Whether `pid` ends within `LIMIT`.
fn ends(pid: u32) -> bool {
    let deadline = Instant::now() + LIMIT;
    while !is_gone(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

#[track_caller]
fn assert_none(findings: &[String]) {
    assert!(findings.is_empty(), "\n{}", findings.join("\n"));
}

fn flood_then_kill_switches(tag: &str, n: usize) {
    let mut v = TestVault::init(tag);
    let agent = v.agent_pid().expect("the agent runs");
    let socket = v.socket();
    let flood = Flood::start(&socket, n);
    let (connected, held, full) = (flood.0.len(), flood.open(), saturated(&socket));
    eprintln!("{connected} of {n} connects succeeded; {held} are held open; saturated: {full}");
    assert!(held >= 64, "the flood holds only {held} connections open");
    assert!(
        held == n || full,
        "the flood holds {held} of {n} connections and the agent still welcomes more"
    );
    let mut findings = Vec::new();
    for (args, want) in [
        (&["pending"][..], "Nothing waits"),
        (&["pause"][..], "Paused"),
        (&["lock"][..], "Locked"),
    ] {
        let (code, out, took) = timed(&v, args);
        let line = format!(
            "vault {} (exit {code}, {took:.1?}): {}",
            args[0],
            out.trim()
        );
        eprintln!("{line}");
        if code != 0 || !out.contains(want) || out.contains("Already locked") {
            findings.push(line);
        }
    }
    if !ends(agent) {
        findings.push(format!(
            "the agent (pid {agent}) still runs after `vault lock`"
        ));
    }
    eprintln!("{} connections still held at the end", flood.open());
    drop(flood);
    assert_none(&findings);
}

#[test]
fn the_kill_switches_work_while_256_connections_are_held() {
    if !run_unprivileged("the_kill_switches_work_while_256_connections_are_held") {
        return;
    }
    flood_then_kill_switches("flood256", 256);
}

#[test]
fn the_kill_switches_work_while_1000_connections_are_held() {
    if !run_unprivileged("the_kill_switches_work_while_1000_connections_are_held") {
        return;
    }
    flood_then_kill_switches("flood1000", 1000);
}

#[test]
fn the_kill_switches_reach_the_agent_after_its_socket_was_renamed() {
    if !run_unprivileged("the_kill_switches_reach_the_agent_after_its_socket_was_renamed") {
        return;
    }
    let mut v = TestVault::init("renamed");
    let agent = v.agent_pid().expect("the agent runs");
    // The AI client's session, connected before the rename.
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    let moved = MovedSocket::new(&v.socket());
    let mut findings = Vec::new();
    let (code, out, took) = timed(&v, &["pause"]);
    eprintln!("vault pause (exit {code}, {took:.1?}): {}", out.trim());
    if code != 0 || out.to_lowercase().contains("locked") {
        findings.push(format!(
            "vault pause with the socket renamed: exit {code}: {}",
            out.trim()
        ));
    }
    // The person's doctor says what happened instead of "locked".
    let (code, out, _) = timed(&v, &["doctor"]);
    if code == 0 || !out.contains("nothing answers on its socket path") {
        findings.push(format!(
            "vault doctor with the socket renamed: exit {code}: {}",
            out.trim()
        ));
    }
    let r = mcp.call(2, "list_credentials", json!({}));
    let answer = r["result"]["structuredContent"]["error"]["code"].clone();
    if answer != "paused" {
        findings.push(format!(
            "after vault pause, a tool call answers {answer}, not paused: {r}"
        ));
    }
    let (code, out, took) = timed(&v, &["lock"]);
    eprintln!("vault lock (exit {code}, {took:.1?}): {}", out.trim());
    if code != 0 || out.contains("Already locked") {
        findings.push(format!(
            "vault lock with the socket renamed: exit {code}: {}",
            out.trim()
        ));
    }
    if !ends(agent) {
        findings.push(format!(
            "the agent (pid {agent}) still runs after `vault lock`"
        ));
    }
    drop(moved);
    drop(mcp);
    assert_none(&findings);
}

/// The listed credential `name` (from a JSON array of credentials).
fn entry<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
}

/// Findings about one listing: `forged` shows `each`, unsigned; `trusted` shows `never`, signed.
fn check_listing(what: &str, list: &Value, findings: &mut Vec<String>) {
    for (name, approval, signed) in [("forged", "each", false), ("trusted", "never", true)] {
        let e = entry(list, name);
        if e["approval"] != approval || e["signed"] != signed {
            findings.push(format!(
                "{what} lists {name} as {e}; want approval {approval:?}, \"signed\": {signed}"
            ));
        }
    }
}

#[test]
fn a_listing_shows_the_policy_that_applies() {
    if !run_unprivileged("a_listing_shows_the_policy_that_applies") {
        return;
    }
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("listing");
    v.add_bearer("forged", &target.base(), SECRET);
    v.add_bearer_with("trusted", &target.base(), SECRET, &["--approval", "never"]);
    // An unsigned policy: the row says `never`, no approver signed it.
    v.open_db()
        .store
        .conn()
        .execute(
            "UPDATE credentials SET approval = 'never' WHERE name = 'forged'",
            [],
        )
        .unwrap();
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    // Control: what applies to it is `each` (a GET waits for a card; nothing is sent).
    let r = mcp.call(1, "http_request", json!({"credential": "forged", "method": "GET", "url": format!("{}/x", target.base()), "wait_s": 0}));
    assert_eq!(r["result"]["structuredContent"]["state"], "pending", "{r}");
    assert!(target.requests().is_empty(), "the unsigned `never` ran");
    let mut findings = Vec::new();
    let json_list: Value =
        serde_json::from_str(v.run(&["list", "--json"], None).ok().stdout.trim()).unwrap();
    check_listing("vault list --json", &json_list, &mut findings);
    let tool = mcp.call(2, "list_credentials", json!({}));
    check_listing(
        "list_credentials",
        &tool["result"]["structuredContent"]["credentials"],
        &mut findings,
    );
    let text = v.run(&["list"], None).ok().stdout;
    let line = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or("")
            .to_owned()
    };
    let (forged, trusted) = (line("forged"), line("trusted"));
    if !(forged.contains("each") && forged.contains("unsigned")) {
        findings.push(format!(
            "vault list shows forged as {forged:?}; want `each` and \"unsigned\""
        ));
    }
    if !trusted.contains("never") || trusted.contains("unsigned") {
        findings.push(format!(
            "vault list shows trusted as {trusted:?}; want `never`, signed"
        ));
    }
    mcp.finish(Duration::from_secs(10));
    assert_none(&findings);
}

#[test]
fn a_replaced_lock_file_locks_the_vault() {
    if !run_unprivileged("a_replaced_lock_file_locks_the_vault") {
        return;
    }
    // `vault lock` finds the agent by its lock file: a process that swaps the file for one it
    // holds itself could make it miss the agent. The agent notices within a second and locks.
    let mut v = TestVault::init("lockfile");
    let agent = v.agent_pid().expect("the agent runs");
    let lock = v.vault_dir().join("agent.lock");
    std::fs::rename(&lock, v.vault_dir().join("agent.lock.moved")).unwrap();
    let decoy = std::fs::File::create(&lock).unwrap();
    rustix::fs::flock(&decoy, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    assert!(
        ends(agent),
        "the agent (pid {agent}) still runs with its lock file replaced"
    );
    drop(decoy);
    let reason = support::journal::last_lock_reason(&v);
    assert_eq!(reason, "agent.lock replaced");
}
