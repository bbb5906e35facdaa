//! A tool call the client did not cancel is always answered: while it waits for a person, the
//! agent is locked (`vault lock`), terminated (SIGTERM), killed (SIGKILL), reaches the end of its
//! lifetime (`unlock --for`) or idles out; each time the call gets a result within a second that
//! names the state and what to do, and the same `vault mcp` session answers the next call
//! (`locked`, then normally once the person unlocks again).
mod support;

use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::mcp::McpProc;
use support::*;

const DECOY: &str = "DECOY_waiting_calls_tok_51a0e";

/// A vault with one `each` credential, and a `vault mcp` session whose call 1 waits for a card.
fn waiting(tag: &str, config: &str) -> (TestVault, McpProc) {
    let mut v = TestVault::init(tag);
    if !config.is_empty() {
        v.configure(config);
    }
    v.add_bearer("api", "api.example.com", DECOY);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": "https://api.example.com/wait", "wait_s": 30}}}));
    wait_for_kind(&v, "action.pending");
    (v, p)
}

fn wait_for_kind(v: &TestVault, kind: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !support::journal::kinds(v).iter().any(|k| k == kind) {
        assert!(Instant::now() < deadline, "no {kind} row");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The response to call 1, and how long after `t0` it came (it must come within 5 s at all).
fn answer(p: &mut McpProc, t0: Instant) -> (Value, Duration) {
    let (r, _) = p.until_id(&json!(1), Duration::from_secs(5));
    (r, t0.elapsed())
}

/// The answer to a call that waited when the agent stopped: within a second, an error result
/// that names the action, the state it ended in, and `vault unlock`.
fn assert_answered(case: &str, r: &Value, took: Duration, want_state: &str) {
    assert!(
        took < Duration::from_secs(1),
        "{case}: answered after {took:?}"
    );
    let res = &r["result"];
    assert_eq!(res["isError"], true, "{case}: {r}");
    let s = &res["structuredContent"];
    assert_eq!(s["state"], want_state, "{case}: {r}");
    assert!(
        s["action_id"]
            .as_str()
            .is_some_and(|a| a.starts_with("act_")),
        "{case}: {r}"
    );
    let fix = s["error"]["fix"].as_str().unwrap_or("");
    assert!(
        fix.contains("vault unlock"),
        "{case}: the fix names vault unlock: {r}"
    );
    let text = res["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("Error: "), "{case}: {text}");
    assert_no_leak(case, r.to_string().as_bytes(), DECOY);
}

/// The same session answers the next call (`locked`), and works again once the person unlocks.
fn session_goes_on(case: &str, v: &mut TestVault, p: &mut McpProc) {
    let r = p.call(2, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], true, "{case}: {r}");
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"], "locked",
        "{case}: {r}"
    );
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let r = p.call(3, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], false, "{case}: {r}");
    assert_eq!(
        r["result"]["structuredContent"]["credentials"][0]["name"],
        "api"
    );
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: signalling the vault agent this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

fn spawn_quiet(v: &TestVault, args: &[&str]) -> Child {
    v.command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn vault_lock_answers_the_waiting_call() {
    let (mut v, mut p) = waiting("wait-lock", "");
    let t0 = Instant::now();
    let mut lock = spawn_quiet(&v, &["lock"]);
    let (r, took) = answer(&mut p, t0);
    assert!(lock.wait().unwrap().success());
    assert_answered("vault lock", &r, took, "withdrawn");
    let msg = r["result"]["structuredContent"]["error"]["message"].to_string();
    assert!(msg.contains("vault lock"), "the message says why: {msg}");
    session_goes_on("vault lock", &mut v, &mut p);
    v.run(&["verify"], None).ok();
}

#[test]
fn sigterm_of_the_agent_answers_the_waiting_call() {
    let (mut v, mut p) = waiting("wait-term", "");
    let agent = v.agent_pid().expect("an agent runs");
    let t0 = Instant::now();
    signal(agent, libc::SIGTERM);
    let (r, took) = answer(&mut p, t0);
    assert_answered("SIGTERM", &r, took, "withdrawn");
    session_goes_on("SIGTERM", &mut v, &mut p);
    let k = support::journal::kinds(&v);
    assert!(k.iter().any(|k| k == "action.withdrawn"), "{k:?}");
    v.run(&["verify"], None).ok();
}

#[test]
fn sigkill_of_the_agent_answers_the_waiting_call() {
    let (mut v, mut p) = waiting("wait-kill", "");
    let agent = v.agent_pid().expect("an agent runs");
    let t0 = Instant::now();
    signal(agent, libc::SIGKILL);
    let (r, took) = answer(&mut p, t0);
    assert_answered("SIGKILL", &r, took, "withdrawn");
    session_goes_on("SIGKILL", &mut v, &mut p);
    // The next agent reaped what the killed one left waiting.
    wait_for_kind(&v, "action.withdrawn");
    v.run(&["verify"], None).ok();
}

#[test]
fn the_end_of_the_agents_lifetime_answers_the_waiting_call() {
    let mut v = TestVault::init("wait-life");
    v.add_bearer("api", "api.example.com", DECOY);
    v.run(
        &["unlock", "--restart", "--for", "4s", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let unlocked = Instant::now();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": "https://api.example.com/wait", "wait_s": 30}}}));
    let (r, took) = answer(&mut p, unlocked);
    // The lifetime is 4 s from the unlock; the answer comes within a second of its end.
    assert!(
        took >= Duration::from_secs(3),
        "answered early: {took:?} {r}"
    );
    assert_answered(
        "lifetime",
        &r,
        took.saturating_sub(Duration::from_secs(4)),
        "withdrawn",
    );
    session_goes_on("lifetime", &mut v, &mut p);
}

#[test]
fn an_idle_lock_waits_for_the_call_and_does_not_spin() {
    // The idle timer counts a waiting call as activity: the call gets its own answer (`pending`
    // at `wait_s`), the agent locks once it is quiet, and it burns no CPU while it waits past
    // its idle time.
    let mut v = TestVault::init("wait-idle");
    v.add_bearer("api", "api.example.com", DECOY);
    v.configure("[agent]\nidle_seconds = 3\n");
    let agent = v.agent_pid().expect("an agent runs");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let cpu0 = cpu_ticks(agent);
    let t0 = Instant::now();
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": "https://api.example.com/wait", "wait_s": 7}}}));
    let (r, _) = p.until_id(&json!(1), Duration::from_secs(12));
    let took = t0.elapsed();
    let cpu = cpu_ticks(agent) - cpu0;
    assert!(took >= Duration::from_secs(7), "{took:?} {r}");
    assert_eq!(r["result"]["structuredContent"]["state"], "pending", "{r}");
    // 7 s of waiting, 4 of them past the idle time: a spinning loop would use ~400 ticks.
    assert!(
        cpu < 50,
        "the agent used {cpu} ticks of CPU while a call waited"
    );
    // Quiet now: the agent idles out 3 s after the call ended, and the session says `locked`.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(agent) {
        assert!(Instant::now() < deadline, "the agent did not idle out");
        std::thread::sleep(Duration::from_millis(50));
    }
    session_goes_on("idle", &mut v, &mut p);
}

/// Whether a process runs (a zombie that nobody reaped yet does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
}

/// utime + stime of a process, in clock ticks (readable for an undumpable process too).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}
