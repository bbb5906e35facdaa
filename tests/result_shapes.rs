//! Every result shape the product can produce, held to its tool's `outputSchema` as a client
//! using the official TypeScript MCP SDK holds it. The real binary runs real scenarios (a loopback
//! HTTP target, a real `sshd`, `vault approve`, `pause`, `lock`, a killed agent, a short expiry,
//! an empty directory); each tool result is collected and fed to
//! `tests/clients/validate_results.mjs`, which takes the schemas from `tools/list` of a real
//! `vault mcp` and validates with the SDK's validator and strict Ajv. The test also asserts that
//! the results exercised every `ToolErrorCode` and every `State` a result can carry, so a code or
//! state added without a scenario here fails.
mod support;

#[path = "result_shapes/lifecycle.rs"]
mod lifecycle;

use agent_vault::approvals::State;
use agent_vault::mcp::ToolErrorCode;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::shapes::*;
use support::ssh::{add_ssh, keygen};
use support::sshd::Sshd;
use support::target::{ClosedPort, HttpTarget};
use support::*;

/// How long a call that waits for its answer may take.
const WAIT: Duration = Duration::from_secs(40);

const SECRET: &str = "DECOY_result_shapes_tok_3f9a1c";

/// Codes no scenario can produce, and why.
const NOT_PRODUCIBLE_CODES: &[(ToolErrorCode, &str)] = &[(
    ToolErrorCode::Internal,
    "only a failing store or agent answers it (no scenario without fault injection)",
)];

/// States no result can be seen in, and why.
const NOT_PRODUCIBLE_STATES: &[(State, &str)] = &[(
    State::Received,
    "a policy-allowed action is created and claimed in one writer job: no reader sees it",
)];

#[test]
fn every_result_shape_fits_its_output_schema_in_the_typescript_sdk() {
    let target = HttpTarget::start(SECRET);
    let mut shapes = Shapes::default();
    let mut v = TestVault::init("shapes");
    let (closed, _closed_port) = add_credentials(&mut v, &target);
    answered_calls(&v, &target, closed, &mut shapes);
    human_decisions(&mut v, &target, &mut shapes);
    refusals(&mut v, &target, &mut shapes);
    ssh(&mut v, &mut shapes);
    lifecycle::switches_and_limits(&mut v, &target, &mut shapes);
    lifecycle::agent_killed(&mut v, &target, &mut shapes);
    lifecycle::expiry_and_no_vault(&mut shapes);

    let summary = shapes.validate(&v.vault_dir(), SECRET);
    println!("validated {} results: {summary}", shapes.len());

    let want_codes: BTreeSet<String> = ToolErrorCode::ALL
        .iter()
        .filter(|c| !NOT_PRODUCIBLE_CODES.iter().any(|(n, _)| n == *c))
        .map(|c| c.as_str().to_owned())
        .collect();
    let missing: Vec<&String> = want_codes.difference(&shapes.codes).collect();
    assert!(
        missing.is_empty(),
        "no result carried the error codes {missing:?}: add a scenario that produces each (or \
         list it in NOT_PRODUCIBLE_CODES with why); exercised: {:?}",
        shapes.codes
    );
    let want_states: BTreeSet<String> = State::ALL
        .iter()
        .filter(|s| !NOT_PRODUCIBLE_STATES.iter().any(|(n, _)| n == *s))
        .map(|s| s.as_str().to_owned())
        .collect();
    let missing: Vec<&String> = want_states.difference(&shapes.states).collect();
    assert!(
        missing.is_empty(),
        "no result carried the states {missing:?}: add a scenario that produces each (or list \
         it in NOT_PRODUCIBLE_STATES with why); exercised: {:?}",
        shapes.states
    );
    let unknown: Vec<&String> = shapes
        .codes
        .iter()
        .filter(|c| ToolErrorCode::parse(c).is_none())
        .chain(shapes.states.iter().filter(|s| State::parse(s).is_none()))
        .collect();
    assert!(
        unknown.is_empty(),
        "values outside the Rust lists: {unknown:?}"
    );
    for (code, why) in NOT_PRODUCIBLE_CODES {
        assert!(
            !shapes.codes.contains(code.as_str()),
            "{code} was produced after all: drop it from NOT_PRODUCIBLE_CODES"
        );
        println!("not produced: code {code}: {why}");
    }
    for (state, why) in NOT_PRODUCIBLE_STATES {
        assert!(
            !shapes.states.contains(state.as_str()),
            "{state} was produced after all: drop it from NOT_PRODUCIBLE_STATES"
        );
        println!("not produced: state {state}: {why}");
    }
}

/// `api` (every action needs a card), `auto` (signed `never`) on the target, and `closed`
/// (`never`) bound to a loopback port nothing listens on, held while the port lives; returns a
/// URL of `closed`, and the port.
fn add_credentials(v: &mut TestVault, target: &HttpTarget) -> (String, ClosedPort) {
    v.add_bearer_with("api", &target.base(), SECRET, &[]);
    v.add_bearer_with("auto", &target.base(), SECRET, &["--approval", "never"]);
    let port = ClosedPort::new();
    v.add_bearer_with("closed", &port.base(), SECRET, &["--approval", "never"]);
    (format!("{}/x", port.base()), port)
}

/// Calls that run at once (`never`): completed with a JSON and a text body, replayed,
/// failed_before_send, indeterminate (a target slower than `timeout_s`), and an action seen
/// `dispatched` by `list_recent_actions` and `get_action` while another call runs it.
fn answered_calls(v: &TestVault, target: &HttpTarget, closed: String, shapes: &mut Shapes) {
    let base = target.base();
    let mut s = Session::start(v);
    let r = s.call("list_credentials", json!({}));
    shapes.add("list_credentials", "list_credentials", &r);
    let r = s.call(
        "http_request",
        get("auto", format!("{base}/echo?n=1"), json!({})),
    );
    assert!(
        shapes.add("completed, JSON body", "http_request", &r)["http"]["body"]["untrusted_json"]
            .is_object()
    );
    let r = s.call(
        "http_request",
        get("auto", format!("{base}/leak"), json!({})),
    );
    let c = shapes.add("completed, text body", "http_request", &r);
    assert!(c["http"]["body"]["untrusted_text"].is_string(), "{c}");
    // A write (reads are never replayed): the same POST again is replayed.
    let keyed = get(
        "auto",
        format!("{base}/echo?n=2"),
        json!({"idempotency_key": "shape-1", "method": "POST", "json": {"n": 2}}),
    );
    let r = s.call("http_request", keyed.clone());
    shapes.add_as("completed, keyed", "http_request", &r, "state", "completed");
    let r = s.call("http_request", keyed);
    assert_eq!(shapes.add("replayed", "http_request", &r)["replayed"], true);
    let r = s.call("http_request", get("closed", closed, json!({})));
    shapes.add_as(
        "nothing listens",
        "http_request",
        &r,
        "state",
        "failed_before_send",
    );
    let slow = get("auto", format!("{base}/slow?s=4"), json!({"timeout_s": 1}));
    let r = s.call("http_request", slow);
    shapes.add_as(
        "target too slow",
        "http_request",
        &r,
        "state",
        "indeterminate",
    );

    // Dispatched: one call runs a slow action while the same session looks at it.
    let running = s.send(
        "http_request",
        get("auto", format!("{base}/slow?s=3"), json!({"timeout_s": 20})),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let id = loop {
        let r = s.call("list_recent_actions", json!({"limit": 5}));
        let found = r["structuredContent"]["actions"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["state"] == "dispatched").cloned());
        if let Some(a) = found {
            shapes.add("list_recent_actions, dispatched", "list_recent_actions", &r);
            break a["action_id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "never saw the action dispatched: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let r = s.call("get_action", json!({"action_id": id, "wait_s": 0}));
    shapes.add_as(
        "get_action, dispatched",
        "get_action",
        &r,
        "state",
        "dispatched",
    );
    let r = s.result(running, WAIT);
    shapes.add_as(
        "completed after a wait",
        "http_request",
        &r,
        "state",
        "completed",
    );
    s.p.finish(Duration::from_secs(10));
}

/// A person in the loop: pending (http_request, get_action), cancelled (cancel_action, then
/// withdrawn by get_action, then not_pending), approved but not yet run (not_pending, listed),
/// run by get_action, and denied by `vault approve --deny`.
fn human_decisions(v: &mut TestVault, target: &HttpTarget, shapes: &mut Shapes) {
    let base = target.base();
    let mut s = Session::start(v);
    let now = |path: &str| get("api", format!("{base}{path}"), json!({"wait_s": 0}));
    let r = s.call("http_request", now("/cancel-me"));
    let id = expect_pending(shapes, "pending", &r);
    let r = s.call("get_action", json!({"action_id": id}));
    shapes.add_as("get_action, pending", "get_action", &r, "state", "pending");
    let r = s.call("cancel_action", json!({"action_id": id}));
    shapes.add_as("cancelled", "cancel_action", &r, "state", "withdrawn");
    let r = s.call("get_action", json!({"action_id": id}));
    shapes.add_as(
        "get_action, withdrawn",
        "get_action",
        &r,
        "code",
        "withdrawn",
    );
    let r = s.call("cancel_action", json!({"action_id": id}));
    shapes.add_as(
        "cancel a withdrawn action",
        "cancel_action",
        &r,
        "code",
        "not_pending",
    );

    let r = s.call("http_request", now("/approve-me"));
    let id = expect_pending(shapes, "pending, to approve", &r);
    decide(v, &id, "--approve");
    let r = s.call("cancel_action", json!({"action_id": id}));
    let c = shapes.add_as(
        "cancel an approved",
        "cancel_action",
        &r,
        "code",
        "not_pending",
    );
    expect(&c, "state", "approved");
    let r = s.call("list_recent_actions", json!({}));
    shapes.add("list_recent_actions, approved", "list_recent_actions", &r);
    let r = s.call("get_action", json!({"action_id": id, "wait_s": 20}));
    shapes.add_as("get_action runs it", "get_action", &r, "state", "completed");

    let asked = s.send(
        "http_request",
        get("api", format!("{base}/deny-me"), json!({})),
    );
    let id = await_pending(v, 1).remove(0);
    decide(v, &id, "--deny");
    let r = s.result(asked, WAIT);
    shapes.add_as("denied", "http_request", &r, "state", "denied");
    s.p.finish(Duration::from_secs(10));
}

fn expect_pending(shapes: &mut Shapes, label: &str, r: &Value) -> String {
    let p = shapes.add_as(label, "http_request", r, "state", "pending");
    p["action_id"].as_str().unwrap().to_owned()
}

/// Refused before an action exists: policy_denied, not_found (credential, action),
/// invalid_argument (an unknown argument, a bad idempotency key).
fn refusals(v: &mut TestVault, target: &HttpTarget, shapes: &mut Shapes) {
    let base = target.base();
    let mut s = Session::start(v);
    let r = s.call(
        "http_request",
        get("api", format!("{base}/x?_method=DELETE"), json!({})),
    );
    shapes.add_as("_method", "http_request", &r, "code", "policy_denied");
    let r = s.call("http_request", get("nope", format!("{base}/x"), json!({})));
    shapes.add_as(
        "unknown credential",
        "http_request",
        &r,
        "code",
        "not_found",
    );
    let r = s.call(
        "get_action",
        json!({"action_id": format!("act_{}", "0".repeat(32))}),
    );
    shapes.add_as("unknown action", "get_action", &r, "code", "not_found");
    let r = s.call(
        "cancel_action",
        json!({"action_id": format!("act_{}", "1".repeat(32))}),
    );
    shapes.add_as(
        "cancel an unknown action",
        "cancel_action",
        &r,
        "code",
        "not_found",
    );
    for (tool, args) in [
        ("list_credentials", json!({"bogus": 1})),
        ("list_recent_actions", json!({"limit": 0})),
        ("get_action", json!({"action_id": 7})),
        (
            "http_request",
            get(
                "api",
                format!("{base}/x"),
                json!({"idempotency_key": "a b"}),
            ),
        ),
        ("ssh_exec", json!({"credential": "api"})),
    ] {
        let r = s.call(tool, args);
        shapes.add_as("bad arguments", tool, &r, "code", "invalid_argument");
    }
    s.p.finish(Duration::from_secs(10));
}

/// `ssh_exec` against a real `sshd` (as root, like tests/ssh_executor.rs): completed, with a
/// non-zero exit, and stopped at `timeout_s` (indeterminate, with what was seen).
fn ssh(v: &mut TestVault, shapes: &mut Shapes) {
    let key = keygen(v.dir.path(), "id_shapes", &["-t", "ed25519"], "");
    let sshd = Sshd::start(&key.public);
    let file = key.private.to_str().unwrap().to_owned();
    add_ssh(
        v,
        "box",
        &sshd,
        "root",
        &["--key-file", &file],
        None,
        "never",
        None,
    )
    .ok();
    let mut s = Session::start(v);
    let run = |s: &mut Session, cmd: &str, extra: Value| {
        let mut args = json!({"credential": "box", "command": cmd, "wait_s": 30});
        for (k, val) in extra.as_object().unwrap() {
            args[k] = val.clone();
        }
        s.call("ssh_exec", args)
    };
    let r = run(&mut s, "echo hi; echo there >&2", json!({}));
    let c = shapes.add("ssh completed", "ssh_exec", &r);
    assert_eq!(c["ssh"]["exit_status"], 0, "{c}");
    let r = run(&mut s, "exit 3", json!({}));
    let c = shapes.add("ssh completed, exit 3", "ssh_exec", &r);
    assert_eq!(c["ssh"]["exit_status"], 3, "{c}");
    // Past the timeout and the 5 s grace (sshd ignores TERM for root): no exit status is seen.
    let r = run(&mut s, "sleep 30", json!({"timeout_s": 1}));
    let c = shapes.add_as("ssh timed out", "ssh_exec", &r, "state", "indeterminate");
    assert_eq!(c["ssh"]["stream_end"], "timeout", "{c}");
    s.p.finish(Duration::from_secs(10));
}
