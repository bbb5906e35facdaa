//! The person is always told, with the real agent: a second `vault unlock` says the vault is
//! already unlocked and changes nothing (same agent pid, a waiting call still waiting), while
//! `vault unlock --restart` replaces the agent on purpose; and a running `vault approve` (on a
//! real pty) prints a line when a call it shows is withdrawn, when the vault is paused, when the
//! agent is restarted (and then keeps working: it approves on the new agent, counted at the
//! target), and when it is locked; its pings do not keep the agent from its idle lock.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::pty::PtySession;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_told_tok_9a27c4";

fn mcp(v: &TestVault) -> McpProc {
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p
}

/// Sends an `http_request` without waiting for its answer.
fn send(p: &mut McpProc, id: i64, url: &str) {
    p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "POST", "url": url, "json": {"n": id}, "wait_s": 50}}}));
}

fn pending_ids(v: &mut TestVault) -> Vec<String> {
    let r = v.run(&["pending", "--json"], None).ok();
    let listed: Vec<Value> = serde_json::from_str(r.stdout.trim()).unwrap();
    listed
        .iter()
        .map(|a| a["action_id"].as_str().unwrap().to_owned())
        .collect()
}

fn unlock(v: &mut TestVault, extra: &[&str]) -> Run {
    let mut args = vec!["unlock", "--passphrase-stdin"];
    args.extend_from_slice(extra);
    v.run(&args, Some(&format!("{PASSPHRASE}\n")))
}

#[test]
fn a_second_unlock_changes_nothing_and_restart_replaces_the_agent() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("told-unlock");
    v.add_bearer("api", &t.base(), SECRET);
    let first = v.agent_pid().expect("init leaves the vault unlocked");
    let mut p = mcp(&v);
    send(&mut p, 1, &format!("{}/v1/items", t.base()));
    let waiting = v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Found: a second `vault unlock` silently replaced the agent and withdrew this call.
    let again = unlock(&mut v, &[]).ok();
    assert!(
        again.stdout.contains("already unlocked")
            && again.stdout.contains(&format!("agent pid {first}"))
            && again.stdout.contains("nothing changed")
            && again.stdout.contains("--restart"),
        "{}",
        again.stdout
    );
    assert_eq!(v.agent_pid(), Some(first), "the agent was replaced");
    assert_eq!(
        pending_ids(&mut v),
        vec![waiting.clone()],
        "the call stopped waiting"
    );
    // Its flags are not applied to the running agent either, and it says so.
    let with_for = unlock(&mut v, &["--for", "2s"]).ok();
    assert!(
        with_for.stdout.contains("nothing changed"),
        "{}",
        with_for.stdout
    );
    assert!(with_for.stdout.contains("--for"), "{}", with_for.stdout);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(v.agent_pid(), Some(first));
    while let Some(m) = p.recv(Duration::from_millis(200)) {
        assert_ne!(m["id"], 1, "the call was answered: {m}");
    }

    // On purpose: a new agent, and the waiting call is answered (withdrawn, saying why).
    let restart = unlock(&mut v, &["--restart"]).ok();
    let second = v.agent_pid().expect("a new agent runs");
    assert_ne!(second, first, "{}", restart.stdout);
    assert!(
        restart.stdout.contains(&format!("agent pid {second}")),
        "{}",
        restart.stdout
    );
    let (r, _) = p.until_id(&json!(1), Duration::from_secs(20));
    let sc = &r["result"]["structuredContent"];
    assert_eq!(sc["state"], "withdrawn", "{r}");
    assert!(r.to_string().contains("--restart"), "{r}");
    assert!(t.requests().is_empty());
    p.finish(Duration::from_secs(10));
}

/// Waits for `text` in what `vault approve` drew, failing with the screen so far.
#[track_caller]
fn told(approve: &mut PtySession, text: &str) {
    assert!(
        approve.wait_for(text, Duration::from_secs(30)),
        "`vault approve` never said {text:?}; it drew:\n{}",
        approve.output().escape_debug()
    );
}

#[test]
fn a_running_approve_is_told_of_withdrawal_pause_restart_and_lock_and_keeps_working() {
    let t = HttpTarget::start(SECRET);
    let mut v = TestVault::init("told-approve");
    v.add_bearer("api", &t.base(), SECRET);
    let url = format!("{}/v1/items", t.base());
    let mut approve = PtySession::spawn(v.command(&["approve"]), None);
    told(&mut approve, "passphrase");
    std::thread::sleep(Duration::from_millis(200));
    approve.send(&format!("{PASSPHRASE}\n"));
    told(&mut approve, "No action waits");

    // Withdrawn: the client cancels the call whose card is on screen.
    let mut p = mcp(&v);
    send(&mut p, 1, &url);
    told(&mut approve, "[a]pprove once");
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user pressed stop"}}));
    told(&mut approve, "withdrawn");
    told(&mut approve, "cancelled");

    // Paused, with the reason given; and resumed.
    v.run(&["pause", "--reason", "told-test-pause"], None).ok();
    told(&mut approve, "paused");
    told(&mut approve, "told-test-pause");
    v.run_pp(&["resume"], None).ok();
    told(&mut approve, "resumed");

    // Restarted: it says so, finds the new agent, and approves on it.
    let old = v.agent_pid().unwrap();
    unlock(&mut v, &["--restart"]).ok();
    let new = v.agent_pid().unwrap();
    assert_ne!(old, new);
    told(&mut approve, "--restart");
    told(&mut approve, &format!("vault agent (pid {new})"));
    let mut p2 = mcp(&v);
    send(&mut p2, 2, &url);
    told(&mut approve, "[a]pprove once");
    std::thread::sleep(Duration::from_millis(800));
    approve.send("a");
    told(&mut approve, "PIN to approve");
    approve.send(&format!("{PIN}\r"));
    told(&mut approve, "Approved act_");
    let (r, _) = p2.until_id(&json!(2), Duration::from_secs(30));
    assert_eq!(
        r["result"]["structuredContent"]["state"], "completed",
        "{r}"
    );
    assert_eq!(t.requests().len(), 1, "approved on the new agent");

    // Locked: it says so and what to run; unlocked again, it is back.
    v.run(&["lock"], None).ok();
    told(&mut approve, "vault lock");
    told(&mut approve, "vault unlock");
    unlock(&mut v, &[]).ok();
    let third = v.agent_pid().unwrap();
    told(&mut approve, &format!("vault agent (pid {third})"));
    approve.send("q");
    assert_eq!(approve.finish(Duration::from_secs(10)), Some(0));
    p.finish(Duration::from_secs(10));
    p2.finish(Duration::from_secs(10));
}

#[test]
fn a_running_approve_does_not_keep_the_agent_from_its_idle_lock() {
    let mut v = TestVault::init("told-idle");
    // `vault approve` pings a quiet agent every 5 s; those pings are not activity.
    v.configure("[agent]\nidle_seconds = 8\n");
    let mut approve = PtySession::spawn(v.command(&["approve"]), None);
    told(&mut approve, "passphrase");
    std::thread::sleep(Duration::from_millis(200));
    approve.send(&format!("{PASSPHRASE}\n"));
    told(&mut approve, "No action waits");
    told(&mut approve, "idle time");
    assert_eq!(v.agent_pid(), None, "the agent still runs");
    approve.send("q");
    assert_eq!(approve.finish(Duration::from_secs(10)), Some(0));
}
