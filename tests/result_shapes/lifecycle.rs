//! The scenarios of `tests/result_shapes.rs` that change the vault's own state: the pause switch,
//! the cap on waiting actions, `vault lock` and a killed agent under waiting and running calls, a
//! short expiry, and a directory with no vault.
use crate::support::mcp::McpProc;
use crate::support::shapes::*;
use crate::support::target::HttpTarget;
use crate::support::*;
use crate::SECRET;
use serde_json::json;
use std::time::{Duration, Instant};

/// The pause switch (paused, for a lookup and for a request), the per-session cap on waiting
/// actions (the 17th is `limit`), `vault lock` while 16 wait (each withdrawn, with why), and
/// the next call with no agent (`locked`).
pub fn switches_and_limits(v: &mut TestVault, target: &HttpTarget, shapes: &mut Shapes) {
    let base = target.base();
    let mut s = Session::start(v);
    v.run(&["pause", "--reason", "shape test"], None).ok();
    let r = s.call("list_credentials", json!({}));
    shapes.add_as("paused lookup", "list_credentials", &r, "code", "paused");
    let r = s.call("http_request", get("auto", format!("{base}/p"), json!({})));
    shapes.add_as("paused request", "http_request", &r, "code", "paused");
    let r = s.call("list_recent_actions", json!({}));
    shapes.add_as("paused list", "list_recent_actions", &r, "code", "paused");
    v.run(
        &["resume", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();

    let waiting: Vec<i64> = (0..16)
        .map(|i| {
            s.send(
                "http_request",
                get("api", format!("{base}/wait/{i}"), json!({"wait_s": 60})),
            )
        })
        .collect();
    await_pending(v, 16);
    // Each call counts itself as waiting just after its action is stored.
    std::thread::sleep(Duration::from_millis(500));
    let r = s.call(
        "http_request",
        get("api", format!("{base}/wait/16"), json!({"wait_s": 60})),
    );
    shapes.add_as(
        "the 17th waiting action",
        "http_request",
        &r,
        "code",
        "limit",
    );
    v.run(&["lock"], None).ok();
    for id in waiting {
        let r = s.result(id, Duration::from_secs(10));
        shapes.add_as(
            "locked while waiting",
            "http_request",
            &r,
            "code",
            "withdrawn",
        );
    }
    let r = s.call(
        "get_action",
        json!({"action_id": format!("act_{}", "2".repeat(32))}),
    );
    shapes.add_as("no agent", "get_action", &r, "code", "locked");
    unlock(v);
    s.p.finish(Duration::from_secs(10));
}

/// The agent killed (SIGKILL) under a waiting call and under a running one: `vault mcp` answers
/// from what it was told (withdrawn; indeterminate).
pub fn agent_killed(v: &mut TestVault, target: &HttpTarget, shapes: &mut Shapes) {
    let base = target.base();
    let mut s = Session::start(v);
    let asked = s.send(
        "http_request",
        get("api", format!("{base}/killed"), json!({})),
    );
    await_pending(v, 1);
    std::thread::sleep(Duration::from_millis(200));
    kill_agent(v);
    let r = s.result(asked, Duration::from_secs(10));
    let c = shapes.add_as(
        "agent killed while waiting",
        "http_request",
        &r,
        "code",
        "withdrawn",
    );
    assert!(
        c.get("summary").is_none(),
        "answered by vault mcp, not the agent: {c}"
    );
    unlock(v);

    let running = s.send(
        "http_request",
        get(
            "auto",
            format!("{base}/slow?s=4&killed=1"),
            json!({"timeout_s": 20}),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while target
        .requests()
        .last()
        .is_none_or(|r| r["path"] != "/slow?s=4&killed=1")
    {
        assert!(Instant::now() < deadline, "the slow request never arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill_agent(v);
    let r = s.result(running, Duration::from_secs(10));
    let c = shapes.add_as(
        "agent killed while running",
        "http_request",
        &r,
        "code",
        "indeterminate",
    );
    assert!(
        c.get("summary").is_none(),
        "answered by vault mcp, not the agent: {c}"
    );
    unlock(v);
    s.p.finish(Duration::from_secs(10));
}

/// An action nobody decides before `[approvals] expiry_seconds = 1` (expired), and `vault mcp`
/// on a directory with no vault (not_initialized).
pub fn expiry_and_no_vault(shapes: &mut Shapes) {
    let mut v = TestVault::init("shapes-expiry");
    v.configure("[approvals]\nexpiry_seconds = 1\n");
    v.add_bearer("api", "api.example.com", SECRET);
    let mut s = Session::start(&v);
    let r = s.call(
        "http_request",
        get(
            "api",
            "https://api.example.com/x".into(),
            json!({"wait_s": 5}),
        ),
    );
    shapes.add_as("expired", "http_request", &r, "state", "expired");
    s.p.finish(Duration::from_secs(10));

    let empty = TestVault::empty("shapes-empty");
    let mut p = McpProc::spawn(empty.command(&["mcp"]));
    p.initialize();
    let r = p.call(1, "list_credentials", json!({}));
    shapes.add_as(
        "no vault",
        "list_credentials",
        &r["result"],
        "code",
        "not_initialized",
    );
    p.finish(Duration::from_secs(10));
}
