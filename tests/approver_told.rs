//! The person is always told, with the real agent: a second `vault unlock` says the vault is
//! already unlocked and changes nothing (same agent pid, a waiting call still waiting), while
//! `vault unlock --restart` replaces the agent on purpose.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
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
