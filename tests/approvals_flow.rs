//! The human gate through the real binaries: `vault mcp` waits, `vault approve` decides, a real
//! loopback HTTP target counts what reaches it. Approve → completed → replayed; deny → an
//! `Error:` result with the reason; and every way of not approving sends nothing.
mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_flow_tok_41aa9e0c77";

fn setup(tag: &str) -> (TestVault, HttpTarget) {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init(tag);
    v.run_pp(
        &[
            "add",
            "http",
            "api",
            "--host",
            &target.base(),
            "--bearer",
            "--secret-stdin",
        ],
        Some(&format!("{SECRET}\n")),
    )
    .ok();
    (v, target)
}

/// Sends an http_request that waits up to `wait_s`, and returns its action id once pending.
fn ask(p: &mut McpProc, v: &mut TestVault, id: i64, url: &str, wait_s: u64) -> String {
    p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "POST", "url": url, "json": {"n": id}, "wait_s": wait_s}}}));
    v.pending_with(url)["action_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn result_of(p: &mut McpProc, id: i64) -> Value {
    p.until_id(&json!(id), Duration::from_secs(40)).0["result"].clone()
}

#[test]
fn approve_completes_then_replays_and_deny_explains() {
    let (mut v, target) = setup("flow");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/echo", target.base());
    let act = ask(&mut p, &mut v, 1, &url, 30);
    assert!(
        target.requests().is_empty(),
        "nothing is sent while pending"
    );
    let r = v
        .run(
            &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    assert!(r.stdout.contains("approved"), "{}", r.stdout);
    let res = result_of(&mut p, 1);
    let sc = &res["structuredContent"];
    assert_eq!(res["isError"], false, "{res}");
    assert_eq!(sc["state"], "completed");
    assert_eq!(sc["http"]["status"], 200);
    // The target got the credential; the agent got it back scrubbed.
    let reqs = target.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        reqs[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
    let echoed = sc["http"]["body"]["untrusted_json"]["headers"]["authorization"]
        .as_str()
        .unwrap_or_else(|| panic!("{sc}"));
    assert_eq!(echoed, "Bearer [REDACTED:api]");
    assert!(
        sc["http"]["headers"]["untrusted_headers"]
            .get("set-cookie")
            .is_none(),
        "Set-Cookie never reaches the agent"
    );

    // The same call again: the stored result, replayed, nothing sent.
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "POST", "url": url, "json": {"n": 1}, "wait_s": 30}}}));
    let again = result_of(&mut p, 2);
    assert_eq!(again["structuredContent"]["replayed"], true, "{again}");
    assert_eq!(again["structuredContent"]["action_id"], sc["action_id"]);
    assert_eq!(target.requests().len(), 1);

    // Denied with a reason: an Error result that says so; nothing sent.
    let denied = ask(&mut p, &mut v, 3, &format!("{}/items", target.base()), 30);
    v.run(
        &[
            "approve",
            "--id",
            &denied,
            "--deny",
            "--reason",
            "use the staging API",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let d = result_of(&mut p, 3);
    assert_eq!(d["isError"], true);
    let text = d["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Error: ") && text.contains("use the staging API"),
        "{text}"
    );
    assert_eq!(d["structuredContent"]["state"], "denied");
    assert_eq!(target.requests().len(), 1);
    let seen = p.seen.join("\n");
    let (_, _, stderr) = p.finish(Duration::from_secs(10));
    let all = format!("{seen}\n{}\n{stderr}", v.transcript.join("\n"));
    assert_no_leak("agent-visible output", all.as_bytes(), SECRET);
}

#[test]
fn no_passphrase_wrong_passphrase_and_piped_yes_approve_nothing() {
    let (mut v, target) = setup("nopass");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let act = ask(&mut p, &mut v, 1, &format!("{}/a", target.base()), 4);
    // No passphrase source at all (no terminal here): refused as a usage error (2), saying how.
    let r = v.run(&["approve", "--id", &act, "--approve"], None).code(2);
    assert!(r.stderr.contains("passphrase"), "{}", r.stderr);
    v.run(
        &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
        Some("wrong passphrase\n"),
    )
    .code(4);
    // `yes | vault approve`: the queue reads keys from the terminal only; piped stdin answers nothing.
    let mut yes = v.command(&["approve"]);
    let r = v.run_command(&mut yes, Some(&"y\na\n".repeat(1000)));
    assert_ne!(r.code, 0);
    assert!(
        r.stderr.contains("needs a terminal") || r.stderr.contains("terminal"),
        "{}",
        r.stderr
    );
    let res = result_of(&mut p, 1);
    assert_eq!(res["structuredContent"]["state"], "pending", "{res}");
    assert!(target.requests().is_empty(), "nothing reached the target");
    p.finish(Duration::from_secs(10));
}

#[test]
fn a_forged_decision_row_and_a_changed_action_are_refused_at_dispatch() {
    let (mut v, target) = setup("forged");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let act = ask(&mut p, &mut v, 1, &format!("{}/forged", target.base()), 1);
    assert_eq!(
        result_of(&mut p, 1)["structuredContent"]["state"],
        "pending"
    );
    {
        // Someone with the database key (no passphrase) writes an approval straight into it.
        // (Only the agent holds that key now; this proves the claim does not trust the rows.)
        let vault = v.open_db();
        let (hash, vid): (String, String) = vault
            .store
            .conn()
            .query_row("SELECT action_hash, (SELECT value FROM meta WHERE key='vault_id') FROM actions WHERE id = ?1", [&act], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        let payload = format!(
            r#"{{"action_hash":"{hash}","action_id":"{act}","decision":"approve","expires_at":"2999-01-01T00:00:00.000Z","issued_at":"2026-01-01T00:00:00.000Z","nonce":"forged","reason":null,"v":1,"vault_id":"{vid}"}}"#
        );
        vault.store.conn().execute(
            "INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES ('dec_forged', ?1, 'approve', 'forged', ?2, ?3, 'now')",
            rusqlite::params![act, payload, "ab".repeat(64)],
        ).unwrap();
        vault
            .store
            .conn()
            .execute(
                "UPDATE actions SET state = 'approved' WHERE id = ?1",
                [&act],
            )
            .unwrap();
    }
    // The agent acts on the row the next time the session asks about the action.
    let res = p.call(9, "get_action", json!({"action_id": act, "wait_s": 5}))["result"].clone();
    assert_eq!(
        res["structuredContent"]["state"], "failed_before_send",
        "{res}"
    );
    assert!(res["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("the journal does not show this action waiting for dispatch"));
    assert!(
        target.requests().is_empty(),
        "a forged approval sent nothing"
    );

    // Approved for real, then the stored request is rewritten before dispatch: refused.
    let act2 = ask(&mut p, &mut v, 2, &format!("{}/original", target.base()), 2);
    let _ = result_of(&mut p, 2); // the call returns pending after 2 s
    v.run(
        &["approve", "--id", &act2, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    {
        let vault = v.open_db();
        vault.store.conn().execute("UPDATE actions SET normalized = replace(normalized, '/original', '/evil') WHERE id = ?1", [&act2]).unwrap();
    }
    let g = p.call(3, "get_action", json!({"action_id": act2, "wait_s": 5}));
    assert_eq!(
        g["result"]["structuredContent"]["state"], "failed_before_send",
        "{g}"
    );
    assert!(target.requests().is_empty());
    p.finish(Duration::from_secs(10));
}

#[test]
fn pause_fails_calls_at_once_and_denies_what_waits() {
    let (mut v, target) = setup("pause");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let _act = ask(&mut p, &mut v, 1, &format!("{}/p", target.base()), 30);
    v.run(&["pause", "--reason", "incident 42"], None).ok();
    let waited = result_of(&mut p, 1);
    assert_eq!(waited["structuredContent"]["state"], "denied", "{waited}");
    assert!(waited["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("incident 42"));
    let t0 = Instant::now();
    let r = p.call(2, "list_credentials", json!({}));
    assert_eq!(r["result"]["structuredContent"]["error"]["code"], "paused");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // An agent cannot lift it without the passphrase (none to give here: a usage error).
    v.run(&["resume"], None).code(2);
    v.run(
        &["resume", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let r = p.call(3, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], false);
    assert!(target.requests().is_empty());
    p.finish(Duration::from_secs(10));
}

#[test]
fn the_interactive_queue_in_a_real_terminal() {
    let (mut v, target) = setup("tty");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let _act = ask(&mut p, &mut v, 1, &format!("{}/echo", target.base()), 40);
    // A decision key counts only once the card has been on screen for half a second.
    let run = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\n"), 0.2),
            ("[a]pprove once", "a", 0.8),
            ("PIN to approve", &format!("{PIN}\r"), 0.2),
            ("Approved act_", "q", 0.2),
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout.contains("POST http://127.0.0.1"),
        "the card shows the request: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("test-client"),
        "the card names the client: {}",
        run.stdout
    );
    let res = result_of(&mut p, 1);
    assert_eq!(res["structuredContent"]["state"], "completed", "{res}");
    assert_eq!(target.requests().len(), 1);
    assert_no_leak("approve screen", run.stdout.as_bytes(), SECRET);
    assert_no_leak("approve screen", run.stdout.as_bytes(), PASSPHRASE);
    p.finish(Duration::from_secs(10));
}

/// Issue 30, item 6: reads are fetched afresh, writes are replayed. On a `never` credential a
/// repeated GET (and HEAD) reaches the target again, while a repeated POST returns the first
/// result (`replayed: true`) and sends nothing; on `each`, a repeated GET waits for a card again.
#[test]
fn a_repeated_read_runs_again_and_a_repeated_write_is_replayed() {
    let (mut v, target) = setup("replay-reads");
    v.add_bearer_with("auto", &target.base(), SECRET, &["--approval", "never"]);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/echo?page=1", target.base());
    let call = |p: &mut McpProc, id: i64, cred: &str, method: &str| {
        let mut args = json!({"credential": cred, "method": method, "url": url, "wait_s": 2});
        if method == "POST" {
            args["json"] = json!({"n": 1});
        }
        p.call(id, "http_request", args)["result"]["structuredContent"].clone()
    };
    let count = |method: &str| {
        target
            .requests()
            .iter()
            .filter(|r| r["method"] == method)
            .count()
    };
    for (i, method) in ["GET", "HEAD"].iter().enumerate() {
        let first = call(&mut p, 10 + i as i64 * 2, "auto", method);
        let again = call(&mut p, 11 + i as i64 * 2, "auto", method);
        assert_eq!(
            (first["state"].as_str(), again["state"].as_str()),
            (Some("completed"), Some("completed")),
            "{again}"
        );
        assert_eq!(again["replayed"], false, "{again}");
        assert_ne!(again["action_id"], first["action_id"]);
        assert_eq!(count(method), 2, "{method} reached the target twice");
    }
    let first = call(&mut p, 20, "auto", "POST");
    let again = call(&mut p, 21, "auto", "POST");
    assert_eq!(first["state"], "completed", "{first}");
    assert_eq!(again["replayed"], true, "{again}");
    assert_eq!(again["action_id"], first["action_id"]);
    assert_eq!(count("POST"), 1, "a replayed POST sends nothing");
    // Under `each`, the same GET approved once needs a card again.
    let act = {
        p.send(&json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": url, "wait_s": 30}}}));
        v.pending_with("/echo?page=1")["action_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    v.run(
        &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    assert_eq!(
        result_of(&mut p, 30)["structuredContent"]["state"],
        "completed"
    );
    assert_eq!(count("GET"), 3);
    let again = call(&mut p, 31, "api", "GET");
    assert_eq!(again["state"], "pending", "{again}");
    assert_ne!(again["action_id"], act.as_str());
    assert_eq!(count("GET"), 3, "nothing ran without the card");
    p.finish(Duration::from_secs(10));
}
