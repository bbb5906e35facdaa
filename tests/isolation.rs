//! What one MCP session may see of another, through the real binaries: two `vault mcp` processes
//! whose clients both call themselves `claude-code`. Each session reads, lists, cancels and
//! replays only its own actions (the agent scopes them to the connection, never to the client's
//! self-reported name); expiry is true when read; refused calls are journaled within a budget; a
//! session a same-uid process ended on the agent's socket (run as `vaulttest` under root) acts no
//! more.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::raw::RawClient;
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::*;

const SECRET: &str = "DECOY_isolation_tok_8b7e10";

fn session(v: &TestVault) -> McpProc {
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.request(
        json!("init"),
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2.0"}}),
    );
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    p
}

fn sc(r: &Value) -> Value {
    r["result"]["structuredContent"].clone()
}

#[test]
fn sessions_see_only_their_own_actions_whatever_the_client_calls_itself() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("isolation");
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
            "--approval",
            "never",
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
    v.run_pp(
        &[
            "add",
            "http",
            "gated",
            "--host",
            &target.base(),
            "--path-prefix",
            "/g/",
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
    let mut a = session(&v);
    let mut b = session(&v);
    let url = format!("{}/echo?who=a", target.base());
    let done = sc(&a.call(
        1,
        "http_request",
        json!({"credential": "api", "method": "POST", "url": url, "idempotency_key": "k1"}),
    ));
    assert_eq!(done["state"], "completed", "{done}");
    let done_id = done["action_id"].as_str().unwrap().to_owned();
    let waiting = sc(&a.call(2, "http_request", json!({"credential": "gated", "method": "GET", "url": format!("{}/g/x", target.base()), "wait_s": 0})));
    assert_eq!(waiting["state"], "pending");
    let waiting_id = waiting["action_id"].as_str().unwrap().to_owned();
    assert_eq!(target.requests().len(), 1);

    // B reads nothing of A's, even under the same client name.
    for id in [&done_id, &waiting_id] {
        let r = b.call(3, "get_action", json!({"action_id": id}));
        assert_eq!(sc(&r)["error"]["code"], "not_found", "{r}");
        assert!(
            !r.to_string().contains(SECRET) && !r.to_string().contains("who=a"),
            "{r}"
        );
    }
    let mine = sc(&b.call(4, "list_recent_actions", json!({})));
    assert_eq!(mine["actions"], json!([]), "{mine}");
    let r = b.call(5, "cancel_action", json!({"action_id": waiting_id}));
    assert_eq!(sc(&r)["error"]["code"], "not_found", "{r}");
    // The same write with the same idempotency key is B's own: it runs (no replay of A's result).
    let again = sc(&b.call(
        6,
        "http_request",
        json!({"credential": "api", "method": "POST", "url": url, "idempotency_key": "k1"}),
    ));
    assert_eq!(
        (again["state"].as_str(), again["replayed"].as_bool()),
        (Some("completed"), Some(false)),
        "{again}"
    );
    assert_ne!(again["action_id"], done_id.as_str());
    assert_eq!(target.requests().len(), 2, "B's call ran on its own");
    // A still sees its own, and replays its own.
    let replay = sc(&a.call(
        7,
        "http_request",
        json!({"credential": "api", "method": "POST", "url": url, "idempotency_key": "k1"}),
    ));
    assert_eq!(
        (replay["action_id"].as_str(), replay["replayed"].as_bool()),
        (Some(done_id.as_str()), Some(true))
    );
    assert_eq!(target.requests().len(), 2, "a replay sends nothing");
    let r = sc(&a.call(8, "cancel_action", json!({"action_id": waiting_id})));
    assert_eq!(r["state"], "withdrawn", "{r}");
    a.finish(Duration::from_secs(10));
    b.finish(Duration::from_secs(10));
}

#[test]
fn an_action_past_its_expiry_reads_expired() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("expiry");
    v.configure("[approvals]\nexpiry_seconds = 1\n");
    v.run_pp(
        &[
            "add",
            "http",
            "gated",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
    let mut a = session(&v);
    let p = sc(&a.call(1, "http_request", json!({"credential": "gated", "method": "GET", "url": format!("{}/x", target.base()), "wait_s": 0})));
    assert_eq!(p["state"], "pending");
    std::thread::sleep(Duration::from_millis(1300));
    let r = sc(&a.call(2, "get_action", json!({"action_id": p["action_id"]})));
    assert_eq!(r["state"], "expired", "{r}");
    assert!(target.requests().is_empty());
    a.finish(Duration::from_secs(10));
}

#[test]
fn a_flood_of_refused_calls_is_journaled_within_a_budget() {
    let mut v = TestVault::init("flood");
    let mut a = session(&v);
    // 200 calls with an unknown argument, 40 in flight at a time (under the cap on concurrent
    // calls), as fast as the session takes them.
    for chunk in 0..5 {
        for i in 0..40 {
            a.send(&json!({"jsonrpc": "2.0", "id": 100 + chunk * 40 + i, "method": "tools/call", "params": {"name": "list_credentials", "arguments": {"x": i}}}));
        }
        // Every call of the chunk answered (in any order) before the next chunk goes out.
        let mut answered = 0;
        while answered < 40 {
            let r = a
                .recv(Duration::from_secs(30))
                .expect("every refused call is answered");
            if r.get("method").is_none() {
                assert_eq!(sc(&r)["error"]["code"], "invalid_argument", "{r}");
                answered += 1;
            }
        }
    }
    a.finish(Duration::from_secs(10));
    let db = v.open_db();
    let count = |kind: &str| -> i64 {
        db.store
            .conn()
            .query_row("SELECT count(*) FROM audit WHERE kind = ?1", [kind], |r| {
                r.get(0)
            })
            .unwrap()
    };
    let journaled = count("call.rejected");
    assert!(
        (20..200).contains(&journaled),
        "{journaled} rows for 200 refusals"
    );
    let end: String = db
        .store
        .conn()
        .query_row(
            "SELECT body FROM audit WHERE kind = 'session.end' ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let end: Value = serde_json::from_str(&end).unwrap();
    let suppressed = end["suppressed_rejections"].as_i64().unwrap();
    assert_eq!(
        journaled + suppressed,
        200,
        "every refusal is journaled or counted: {end}"
    );
    drop(db);
    assert!(v
        .run(&["verify", "--json"], None)
        .ok()
        .stdout
        .contains("\"ok\":true"));
}

#[test]
fn a_session_ended_on_the_agent_socket_acts_no_more() {
    if !run_unprivileged("a_session_ended_on_the_agent_socket_acts_no_more") {
        return;
    }
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("ended");
    v.add_bearer_with("api", &target.base(), SECRET, &["--approval", "never"]);
    let get = json!({"op": "tool", "name": "http_request", "args": {"credential": "api", "method": "GET", "url": format!("{}/x", target.base())}});
    let mut c = RawClient::connect(&v);
    let welcome = c.ask(
        1,
        json!({"op": "hello", "v": agent_vault::agent::protocol::VERSION, "role": "mcp"}),
    );
    let session = welcome["data"]["session"].as_str().unwrap().to_owned();
    // Control: before its end, this connection acts.
    assert_eq!(c.ask(2, get.clone())["kind"], "tool");
    assert_eq!(target.requests().len(), 1);
    assert_eq!(
        c.ask(3, json!({"op": "end", "reason": "done"}))["kind"],
        "ok"
    );
    // Answered only once the end is on disk.
    let ends = |v: &TestVault| -> Vec<String> {
        let db = v.open_db();
        let mut stmt = db
            .store
            .conn()
            .prepare("SELECT body FROM audit WHERE kind = 'session.end' AND session_id = ?1")
            .unwrap();
        stmt.query_map([&session], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert_eq!(
        ends(&v).len(),
        1,
        "session.end was not journaled before the reply"
    );
    // The ended session cannot act again: refused, nothing reaches the target, no action row.
    let refused = c.ask(4, get);
    assert_eq!(refused["kind"], "error", "{refused}");
    assert_eq!(refused["data"]["code"], "protocol", "{refused}");
    assert!(
        refused["data"]["message"]
            .as_str()
            .unwrap()
            .contains("ended"),
        "{refused}"
    );
    assert_eq!(
        target.requests().len(),
        1,
        "a call after the end reached the target"
    );
    let actions: i64 = v
        .open_db()
        .store
        .conn()
        .query_row("SELECT count(*) FROM actions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(actions, 1);
    // The disconnect after the end journals nothing more for it (the agent has stopped, so it
    // has handled the connection's close).
    drop(c);
    v.run(&["lock"], None).ok();
    let ends = ends(&v);
    assert_eq!(ends.len(), 1, "{ends:?}");
    let end: Value = serde_json::from_str(&ends[0]).unwrap();
    assert_eq!(end["reason"], "done");
    assert!(v
        .run_pp(&["verify", "--json"], None)
        .ok()
        .stdout
        .contains("\"ok\":true"));
}
