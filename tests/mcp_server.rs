//! `vault mcp` end to end: lifecycle and versions, concurrency, cancellation, EOF, locked and
//! missing vaults, idempotency, progress, shutdown (SIGTERM, a frozen agent), and a clean stdout
//! whatever the logging or failure.
mod support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use support::mcp::{assert_protocol_stdout, McpProc};
use support::uid::run_unprivileged;
use support::*;

const DECOY: &str = "DECOY_mcp_server_tok_2b7c1";

fn vault_with_api(tag: &str) -> TestVault {
    let mut v = TestVault::init(tag);
    v.add_bearer("api", "api.example.com", DECOY);
    v
}

fn journal_kinds(v: &TestVault) -> Vec<(String, Option<String>, String)> {
    let vault = v.open_db();
    let mut stmt = vault
        .store
        .conn()
        .prepare("SELECT kind, session_id, body FROM audit ORDER BY seq")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn version_negotiation_and_lifecycle() {
    let v = vault_with_api("versions");
    for (asked, got) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut p = McpProc::spawn(v.command(&["mcp"]));
        let r = p.request(json!(1), "initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}));
        assert_eq!(r["result"]["protocolVersion"], got, "asked {asked}");
        assert_eq!(r["result"]["serverInfo"]["name"], "agent-vault");
        assert_eq!(r["result"]["capabilities"]["tools"]["listChanged"], false);
        let again = p.request(json!(2), "initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}));
        assert_eq!(
            again["error"]["code"], -32600,
            "a second initialize is refused"
        );
        let tools = p.request(json!(3), "tools/list", json!({}));
        assert_eq!(tools["result"]["tools"].as_array().unwrap().len(), 6);
        assert_eq!(p.request(json!(4), "ping", json!({}))["result"], json!({}));
        let (code, _, _) = p.finish(Duration::from_secs(10));
        assert_eq!(code, 0);
    }
}

/// The whole `tools/list` answer, as the raw line a client reads, stays within 8 KiB in both
/// protocol generations: every client puts it in the model's context at each session start. Was
/// 27,014 bytes (one result schema with per-property descriptions, four times over); see
/// `tools_list_bytes` in benches/mcp_startup.rs (and BENCHMARKS.md once the report runs).
const TOOLS_LIST_MAX_BYTES: usize = 8192;

/// The raw `tools/list` answer line of a fresh `vault mcp`, after `initialize` when `meta` is None.
fn tools_list_line(v: &TestVault, meta: Option<Value>) -> String {
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    let params = match meta {
        None => {
            p.initialize();
            json!({})
        }
        Some(m) => json!({"_meta": m}),
    };
    p.send(&json!({"jsonrpc": "2.0", "id": "size", "method": "tools/list", "params": params}));
    let (code, lines, _) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    let line = lines
        .into_iter()
        .find(|l| l.contains("\"size\""))
        .expect("a tools/list answer");
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        answer["result"]["tools"].as_array().unwrap().len(),
        6,
        "{line}"
    );
    line
}

#[test]
fn the_tools_list_answer_stays_within_8_kib() {
    let v = vault_with_api("toolsize");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}});
    for (era, meta) in [("2025-11-25", None), ("2026-07-28", Some(meta))] {
        let line = tools_list_line(&v, meta);
        println!("tools/list ({era}): {} bytes", line.len());
        assert!(
            line.len() <= TOOLS_LIST_MAX_BYTES,
            "tools/list ({era}) is {} bytes, over {TOOLS_LIST_MAX_BYTES}: shorten a description \
             or schema in schema/tools/ rather than raise the limit",
            line.len()
        );
    }
}

#[test]
fn the_stateless_generation_discovers_and_calls_with_meta() {
    let v = vault_with_api("modern");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "modern-client", "version": "2"}});
    let d = p.request(json!("d"), "server/discover", json!({"_meta": meta}));
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(d["result"]["resultType"], "complete");
    let t = p.request(json!(1), "tools/list", json!({"_meta": meta}));
    assert_eq!(t["result"]["resultType"], "complete");
    let c = p.request(
        json!(2),
        "tools/call",
        json!({"name": "list_credentials", "arguments": {}, "_meta": meta}),
    );
    assert_eq!(
        c["result"]["structuredContent"]["credentials"][0]["name"],
        "api"
    );
    assert_eq!(c["result"]["resultType"], "complete");
    // Once modern, a request without _meta is refused, and initialize is answered with -32022.
    assert_eq!(
        p.request(json!(3), "tools/list", json!({}))["error"]["code"],
        -32602
    );
    let i = p.request(json!(4), "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}));
    assert_eq!(i["error"]["code"], -32022);
    assert_eq!(i["error"]["data"]["supported"], json!(["2026-07-28"]));
    p.finish(Duration::from_secs(10));
    let kinds = journal_kinds(&v);
    let start = kinds
        .iter()
        .find(|k| k.0 == "session.start")
        .expect("session.start journaled");
    assert!(start.2.contains("modern-client"), "{}", start.2);
}

#[test]
fn a_waiting_call_blocks_nothing_and_cancellation_withdraws_it() {
    let v = vault_with_api("concurrency");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let args = json!({"credential": "api", "method": "GET", "url": "https://api.example.com/slow", "wait_s": 30});
    p.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "http_request", "arguments": args, "_meta": {"progressToken": "tok-10"}}}));
    let t0 = Instant::now();
    let ping = p.request(json!(11), "ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    let list = p.request(json!(12), "tools/list", json!({}));
    assert!(list["result"]["tools"].is_array());
    let creds = p.call(13, "list_credentials", json!({}));
    assert_eq!(creds["result"]["isError"], false);
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "other requests waited for the pending call"
    );
    // The waiting call is visible as pending (its task may still be queuing it) and sends progress.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut n = 100;
    let actions = loop {
        n += 1;
        let recent = p.call(n, "list_recent_actions", json!({}));
        let actions = recent["result"]["structuredContent"]["actions"]
            .as_array()
            .unwrap()
            .clone();
        if !actions.is_empty() {
            break actions;
        }
        assert!(
            Instant::now() < deadline,
            "the waiting call never queued its action"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["state"], "pending");
    let id = actions[0]["action_id"].as_str().unwrap().to_owned();
    let progress = |l: &String| l.contains("notifications/progress") && l.contains("tok-10");
    while !p.seen.iter().any(progress) {
        assert!(
            p.recv(Duration::from_secs(6)).is_some(),
            "no progress notification arrived"
        );
    }
    // Cancel it: no response for id 10, and the action is withdrawn.
    p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10, "reason": "user pressed stop"}}));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let g = p.call(15, "get_action", json!({"action_id": id}));
        if g["result"]["structuredContent"]["state"] == "withdrawn" {
            assert_eq!(g["result"]["isError"], true);
            assert_eq!(
                g["result"]["structuredContent"]["error"]["code"],
                "withdrawn"
            );
            break;
        }
        assert!(Instant::now() < deadline, "not withdrawn: {g}");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Every line vault mcp wrote is searched: those the polling above read (and set aside)
    // as well as those left after the end.
    let before_end = p.seen.clone();
    let (code, rest, _) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert!(
        !p_seen_has_id(&before_end, 10) && !p_seen_has_id(&rest, 10),
        "a cancelled request gets no response"
    );
    assert!(
        p_seen_has_id(&before_end, 15),
        "the polling's own responses are among the lines searched"
    );
}

fn p_seen_has_id(lines: &[String], id: i64) -> bool {
    lines.iter().any(|l| {
        serde_json::from_str::<Value>(l)
            .map(|v| v["id"] == id)
            .unwrap_or(false)
    })
}

#[test]
fn idempotent_calls_share_one_action_and_eof_withdraws_and_journals() {
    let v = vault_with_api("eof");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let args = json!({"credential": "api", "method": "POST", "url": "https://api.example.com/items", "json": {"n": 1}, "wait_s": 0});
    let a = p.call(1, "http_request", args.clone());
    let b = p.call(2, "http_request", args.clone());
    let (sa, sb) = (
        &a["result"]["structuredContent"],
        &b["result"]["structuredContent"],
    );
    assert_eq!(sa["state"], "pending");
    assert_eq!(a["result"]["isError"], false);
    assert!(sa["next"].as_str().unwrap().contains("get_action"));
    assert_eq!(
        sa["action_id"], sb["action_id"],
        "the same call while pending is the same action"
    );
    let mut keyed = args.clone();
    keyed["idempotency_key"] = json!("second-item");
    let c = p.call(3, "http_request", keyed);
    assert_ne!(
        c["result"]["structuredContent"]["action_id"],
        sa["action_id"]
    );
    assert_eq!(sa["created"]["weekday"].as_str().unwrap().len(), 3);
    let (code, _, stderr) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert_no_leak("stderr", stderr.as_bytes(), DECOY);
    let kinds = journal_kinds(&v);
    let names: Vec<&str> = kinds.iter().map(|k| k.0.as_str()).collect();
    let tail: Vec<&str> = names.iter().rev().take(6).rev().copied().collect();
    assert_eq!(
        tail,
        [
            "session.start",
            "action.pending",
            "action.pending",
            "action.withdrawn",
            "action.withdrawn",
            "session.end"
        ]
    );
    let session = kinds
        .iter()
        .find(|k| k.0 == "session.start")
        .unwrap()
        .1
        .clone()
        .unwrap();
    assert!(kinds
        .iter()
        .filter(|k| k.0.starts_with("action.") || k.0.starts_with("session."))
        .all(|k| k.1.as_deref() == Some(&session)));
    for (_, _, body) in &kinds {
        assert_no_leak("journal", body.as_bytes(), DECOY);
    }
}

#[test]
fn a_locked_or_missing_vault_still_answers_and_says_what_to_run() {
    let mut v = vault_with_api("locked");
    v.run(&["lock"], None).ok();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    assert_eq!(
        p.request(json!(1), "tools/list", json!({}))["result"]["tools"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    let r = p.call(2, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(r["result"]["structuredContent"]["error"]["code"], "locked");
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("vault unlock"));
    // Unlocking while the session runs: the next call works.
    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let r = p.call(3, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    p.finish(Duration::from_secs(10));

    let missing = TestVault::empty("missing");
    let mut p = McpProc::spawn(missing.command(&["mcp"]));
    p.initialize();
    let r = p.call(
        1,
        "get_action",
        json!({"action_id": format!("act_{}", "1".repeat(32))}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"],
        "not_initialized"
    );
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("vault init"));
    p.finish(Duration::from_secs(10));
}

#[test]
fn stdout_is_pure_json_rpc_under_any_logging_and_any_failure() {
    let mut v = vault_with_api("clean");
    let session = format!(
        "{}\n{}\n{}\n{}\n",
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_credentials","arguments":{}}}"#,
    );
    let envs: [&[(&str, &str)]; 4] = [
        &[("VAULT_LOG", "trace")],
        &[("RUST_LOG", "trace")],
        &[
            ("VAULT_LOG", "trace"),
            ("RUST_LOG", "trace"),
            ("NO_COLOR", ""),
        ],
        &[],
    ];
    for env in envs {
        let mut c = v.command(&["mcp"]);
        for (k, val) in env {
            c.env(k, val);
        }
        let r = v.run_command(&mut c, Some(&session));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let msgs = assert_protocol_stdout(&format!("{env:?}"), r.stdout.as_bytes());
        assert_eq!(msgs.len(), 3, "{env:?}: {}", r.stdout);
        assert_no_leak("stderr under trace", r.stderr.as_bytes(), DECOY);
    }
    // Locked, missing vault dir, and a startup failure: stdout holds protocol or nothing.
    v.run(&["lock"], None).ok();
    let r = v.run(&["mcp"], Some(&session));
    assert_protocol_stdout("locked", r.stdout.as_bytes());
    let mut c = v.command(&["mcp"]);
    c.env("VAULT_DIR", v.dir.path().join("does/not/exist"))
        .env("VAULT_LOG", "trace");
    let r = v.run_command(&mut c, Some(&session));
    assert_eq!(
        assert_protocol_stdout("missing", r.stdout.as_bytes()).len(),
        3
    );
    let r = v
        .run(&["mcp", "--profile", "no such profile"], Some(&session))
        .code(2);
    assert!(
        r.stdout.is_empty(),
        "startup failure wrote stdout: {:?}",
        r.stdout
    );
    assert!(r.stderr.contains("profile"), "{}", r.stderr);
}

#[test]
fn config_toml_sets_the_timings_and_a_broken_one_stops_the_server_cleanly() {
    let mut v = vault_with_api("config");
    // The agent reads config.toml when it starts: unlocking again applies a change.
    v.configure("[approvals]\nexpiry_seconds = 1\n");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let r = p.call(1, "http_request", json!({"credential": "api", "method": "GET", "url": "https://api.example.com/x", "wait_s": 3}));
    assert_eq!(r["result"]["structuredContent"]["state"], "expired", "{r}");
    assert_eq!(r["result"]["structuredContent"]["error"]["code"], "expired");
    p.finish(Duration::from_secs(10));

    std::fs::write(
        v.vault_dir().join("config.toml"),
        "[approvals]\nexpiry_secs = 1\n",
    )
    .unwrap();
    let r = v
        .run(
            &["mcp"],
            Some("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n"),
        )
        .code(1);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(
        r.stderr.contains("expiry_secs") && r.stderr.contains("config.toml"),
        "{}",
        r.stderr
    );
}

/// The journal once it holds a row of `kind` (within 10 s).
fn journal_with(v: &TestVault, kind: &str) -> Vec<(String, Option<String>, String)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let rows = journal_kinds(v);
        if rows.iter().any(|k| k.0 == kind) {
            return rows;
        }
        assert!(Instant::now() < deadline, "no {kind} row");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends a GET that waits for a decision (60 s) and returns once its `action.pending` is journaled.
fn send_and_wait_pending(p: &mut McpProc, v: &TestVault) {
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": "https://api.example.com/t", "wait_s": 60}}}));
    journal_with(v, "action.pending");
}

#[test]
fn sigterm_withdraws_what_waits_and_journals_the_end() {
    let v = vault_with_api("sigterm");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    send_and_wait_pending(&mut p, &v);
    let t0 = Instant::now();
    // SAFETY: sending SIGTERM to our own child process.
    unsafe { libc::kill(p.pid() as i32, libc::SIGTERM) };
    let (code, _, _) = p.finish(Duration::from_secs(10));
    assert_eq!(code, 0);
    assert!(
        t0.elapsed() < Duration::from_secs(6),
        "shutdown took {:?}",
        t0.elapsed()
    );
    let kinds: Vec<String> = journal_kinds(&v).into_iter().map(|k| k.0).collect();
    assert_eq!(
        &kinds[kinds.len() - 3..],
        ["action.pending", "action.withdrawn", "session.end"]
    );
    let anchors = std::fs::read_to_string(v.vault_dir().join("anchors.jsonl")).unwrap();
    assert_eq!(
        anchors.lines().count(),
        1,
        "the session's head was anchored"
    );
}

#[test]
fn a_frozen_agent_does_not_hang_shutdown_and_still_journals_the_end() {
    // The one who freezes the agent is a process of its own non-root uid (vaulttest under root).
    if !run_unprivileged("a_frozen_agent_does_not_hang_shutdown_and_still_journals_the_end") {
        return;
    }
    let mut v = vault_with_api("frozen");
    v.configure("[limits]\nshutdown_grace_seconds = 1\n");
    let agent = v.agent_pid().expect("the vault agent runs") as i32;
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    send_and_wait_pending(&mut p, &v);
    let frozen = Frozen::stop(agent);
    let t0 = Instant::now();
    // SAFETY: sending SIGTERM to our own child process.
    unsafe { libc::kill(p.pid() as i32, libc::SIGTERM) };
    let (code, _, stderr) = p.finish(Duration::from_secs(20));
    let took = t0.elapsed();
    let frozen_tail: Vec<String> = journal_kinds(&v).into_iter().map(|k| k.0).collect();
    drop(frozen);
    assert_eq!(code, 0, "{stderr}");
    // Grace (1 s) for the cancelled call, then grace + 3 s for the agent to confirm the end.
    assert!(took < Duration::from_secs(9), "shutdown took {took:?}");
    assert!(
        stderr.contains("did not confirm the session's end"),
        "{stderr}"
    );
    assert_eq!(
        frozen_tail.last().map(String::as_str),
        Some("action.pending")
    );
    // Thawed, the agent reads what was sent before the disconnect: the action is withdrawn and
    // the session ends with the reason vault mcp gave.
    let rows = journal_with(&v, "session.end");
    let kinds: Vec<&str> = rows.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(
        &kinds[kinds.len() - 3..],
        ["action.pending", "action.withdrawn", "session.end"]
    );
    // The reason vault mcp sent before it gave up waiting (SIGTERM and the closed stdin race:
    // either), not the agent's own "disconnected".
    let end: Value = serde_json::from_str(&rows.last().unwrap().2).unwrap();
    assert!(end["reason"] == "signal" || end["reason"] == "eof", "{end}");
    v.run(&["verify"], None).ok();
}

/// A process stopped with SIGSTOP until this is dropped (a failing assertion too: the vault's
/// cleanup talks to the agent, which must not stay frozen).
struct Frozen(i32);

impl Frozen {
    fn stop(pid: i32) -> Self {
        // SAFETY: stopping the agent this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        Self(pid)
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        // SAFETY: resuming the process `stop` stopped.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}
