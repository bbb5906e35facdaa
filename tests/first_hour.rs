//! The traps of a newcomer's first hour, each played through the real binary: a loopback target
//! given without a scheme, a TLS credential pointed at a plain-HTTP port and moved with
//! `vault edit --host`, `[s] approve for this session` on the default `each` policy, scripting
//! every passphrase command without a terminal, and `vault doctor` on a locked vault.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const SECRET: &str = "DECOY_first_hour_tok_91d2";

/// A 0600 file holding `SECRET`, for `--secret-file`.
fn secret_file(v: &TestVault) -> String {
    let p = v.vault_dir().with_file_name("first-hour-secret");
    std::fs::write(&p, format!("{SECRET}\n")).unwrap();
    p.to_str().unwrap().to_owned()
}

fn get(p: &mut McpProc, id: i64, cred: &str, url: &str, wait_s: u64) -> Value {
    let r = p.call(
        id,
        "http_request",
        json!({"credential": cred, "method": "GET", "url": url, "wait_s": wait_s}),
    );
    r["result"]["structuredContent"].clone()
}

/// Sends a GET of `/path` (JSON-RPC id and credential as given) without waiting for it, decides
/// its pending action with `vault approve --id … VERDICT` (scripted), checks the confirmation
/// names the session grant's end, and waits for the call to complete.
fn approve_for_session(
    p: &mut McpProc,
    v: &mut TestVault,
    (id, cred): (i64, &str),
    target: &HttpTarget,
    path: &str,
    verdict: &str,
) {
    p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "http_request",
        "arguments": {"credential": cred, "method": "GET", "url": format!("{}/{path}", target.base()), "wait_s": 30}}}));
    let act = v.pending_with(&format!("/{path}"))["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = v
        .run(
            &["approve", "--id", &act, verdict, "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    assert!(
        r.stdout.contains("for this session until"),
        "the confirmation names the grant's end: {}",
        r.stdout
    );
    let (done, _) = p.until_id(&json!(id), Duration::from_secs(30));
    assert_eq!(
        done["result"]["structuredContent"]["state"], "completed",
        "{done}"
    );
}

#[test]
fn a_loopback_host_needs_its_scheme_and_edit_moves_the_binding() {
    let target = HttpTarget::start(SECRET);
    let hostport = format!("127.0.0.1:{}", target.port);
    let mut v = TestVault::init("first-loopback");
    let file = secret_file(&v);
    let add = |host: &str| {
        vec![
            "add".to_owned(),
            "http".into(),
            "echo".into(),
            "--host".into(),
            host.to_owned(),
            "--bearer".into(),
            "--secret-file".into(),
            file.clone(),
            "--approval".into(),
            "never".into(),
            "--passphrase-stdin".into(),
        ]
    };
    let pp = format!("{PASSPHRASE}\n");
    // Without a scheme, a loopback host is refused, naming both spellings; nothing is stored.
    let args = add(&hostport);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = v.run(&args, Some(&pp)).code(2);
    assert!(
        r.stderr.contains(&format!("http://{hostport}"))
            && r.stderr.contains(&format!("https://{hostport}")),
        "{}",
        r.stderr
    );
    assert!(!v.run(&["list"], None).ok().stdout.contains("echo"));
    // The trap itself: https:// to a plain-HTTP port fails before anything is sent, and says so.
    let args = add(&format!("https://{hostport}"));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    v.run(&args, Some(&pp)).ok();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("https://{hostport}/one");
    let sc = get(&mut p, 1, "echo", &url, 30);
    assert_eq!(sc["state"], "failed_before_send", "{sc}");
    // It says what happened and what the person can run.
    let message = sc["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("plain HTTP"), "{sc}");
    assert!(
        message.contains(&format!("vault edit echo --host http://{hostport}")),
        "{sc}"
    );
    assert!(
        target.requests().is_empty(),
        "no request reached the target"
    );
    // `vault edit --host` moves the binding (signed; the version goes up) and the call works.
    let r = v
        .run(
            &[
                "edit",
                "echo",
                "--host",
                &format!("http://{hostport}"),
                "--passphrase-stdin",
            ],
            Some(&pp),
        )
        .ok();
    assert!(r.stdout.contains("version 2"), "{}", r.stdout);
    let sc = get(&mut p, 2, "echo", &format!("http://{hostport}/two"), 30);
    assert_eq!(sc["state"], "completed", "{sc}");
    let seen = target.requests();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["path"], "/two");
    // The old URL no longer matches the binding: refused before anything is queued.
    let sc = get(&mut p, 3, "echo", &url, 30);
    assert_ne!(sc["state"], "completed", "{sc}");
    assert_eq!(target.requests().len(), 1);
    p.finish(Duration::from_secs(10));
    let all = v.transcript.join("\n");
    assert_no_leak("first-hour output", all.as_bytes(), SECRET);
}

#[test]
fn approve_for_this_session_applies_on_the_default_policy_and_says_until_when() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("first-session");
    v.add_bearer("api", &target.base(), SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    approve_for_session(
        &mut p,
        &mut v,
        (1, "api"),
        &target,
        "one",
        "--approve-session",
    );
    // The next call of the same session on the same credential, within the grant's scope (a
    // read of `/one` covers what lies under it), runs without a card.
    let sc = get(&mut p, 2, "api", &format!("{}/one/two", target.base()), 3);
    assert_eq!(sc["state"], "completed", "{sc}");
    assert_eq!(target.requests().len(), 2);
    // Another session is not covered by it.
    let mut other = McpProc::spawn(v.command(&["mcp"]));
    other.initialize();
    let sc = get(
        &mut other,
        1,
        "api",
        &format!("{}/one/three", target.base()),
        1,
    );
    assert_eq!(sc["state"], "pending", "{sc}");
    assert_eq!(
        target.requests().len(),
        2,
        "nothing ran for the other session"
    );
    other.finish(Duration::from_secs(10));
    // On a `session` credential, approving once (`a`) covers the session, and says so.
    v.add_bearer_with("sess", &target.base(), SECRET, &["--approval", "session"]);
    approve_for_session(&mut p, &mut v, (3, "sess"), &target, "four", "--approve");
    let sc = get(
        &mut p,
        4,
        "sess",
        &format!("{}/four/five", target.base()),
        3,
    );
    assert_eq!(sc["state"], "completed", "{sc}");
    assert_eq!(target.requests().len(), 4);
    p.finish(Duration::from_secs(10));
}

#[test]
fn every_passphrase_command_is_scriptable_without_a_terminal() {
    let mut v = TestVault::init("first-script");
    let file = secret_file(&v);
    let pp = format!("{PASSPHRASE}\n");
    // With the agent running and with it locked: add, edit, rm take --passphrase-stdin.
    for round in ["unlocked", "locked"] {
        if round == "locked" {
            v.run(&["lock"], None).ok();
        }
        let add = [
            "add",
            "http",
            "api",
            "--host",
            "api.example.com",
            "--bearer",
            "--secret-file",
            &file,
            "--passphrase-stdin",
        ];
        v.run(&add, Some(&pp)).ok();
        v.run(
            &["edit", "api", "--methods", "GET", "--passphrase-stdin"],
            Some(&pp),
        )
        .ok();
        let listed = v.run(&["list", "--passphrase-stdin"], Some(&pp)).ok();
        assert!(listed.stdout.contains("api"), "{round}: {}", listed.stdout);
        v.run(&["rm", "api", "--passphrase-stdin"], Some(&pp)).ok();
    }
    // The secret and the passphrase cannot both come from stdin: a usage error that says how.
    let r = v
        .run(
            &[
                "add",
                "http",
                "api",
                "--host",
                "api.example.com",
                "--bearer",
                "--secret-stdin",
                "--passphrase-stdin",
            ],
            Some(&pp),
        )
        .code(2);
    assert!(r.stderr.contains("--secret-file"), "{}", r.stderr);
    // No terminal and no passphrase source, with an agent running: a usage error (2), not
    // "locked" (4), and the advice names flags this command has.
    v.run(&["unlock", "--passphrase-stdin"], Some(&pp)).ok();
    let r = v
        .run(
            &[
                "add",
                "http",
                "api",
                "--host",
                "api.example.com",
                "--bearer",
                "--secret-file",
                &file,
            ],
            None,
        )
        .code(2);
    assert!(
        r.stderr.contains("--passphrase-stdin") && r.stderr.contains("VAULT_PASSPHRASE_FILE"),
        "{}",
        r.stderr
    );
    // Locked, a wrong passphrase from VAULT_PASSPHRASE_FILE names the file and the other ways.
    v.run(&["lock"], None).ok();
    let wrong = v.vault_dir().with_file_name("wrong-passphrase");
    std::fs::write(&wrong, "not the passphrase\n").unwrap();
    let mut c = v.command(&["list"]);
    c.env("VAULT_PASSPHRASE_FILE", &wrong);
    let r = v.run_command(&mut c, None).code(4);
    assert!(
        r.stderr.contains("VAULT_PASSPHRASE_FILE") && r.stderr.contains(wrong.to_str().unwrap()),
        "{}",
        r.stderr
    );
}

#[test]
fn doctor_calls_a_locked_vault_locked_not_failed_and_still_checks_the_store() {
    let mut v = TestVault::init("first-doctor");
    v.run(&["lock"], None).ok();
    let r = v.run(&["doctor"], None).ok();
    assert!(
        r.stdout.contains("locked (vault unlock to serve tools)"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("FAIL"), "{}", r.stdout);
    // Given the passphrase, the store's checks run while locked.
    let r = v
        .run(
            &["doctor", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .ok();
    for check in ["schema", "journal", "pause switch"] {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with("ok") && l.contains(check)),
            "{check}: {}",
            r.stdout
        );
    }
}

#[test]
fn papercuts_say_what_they_mean() {
    let mut v = TestVault::init("first-papercuts");
    let pp = format!("{PASSPHRASE}\n");
    // `export-audit -` writes the journal to stdout (the summary to stderr), and it verifies.
    let r = v.run(&["export-audit", "-"], None).ok();
    assert!(r.stdout.starts_with("{\"v\":2,\"prev\":\""), "{}", r.stdout);
    assert!(r.stderr.contains("journal rows to stdout"), "{}", r.stderr);
    assert!(!v.vault_dir().join("-").exists() && !std::path::Path::new("-").exists());
    let file = v.vault_dir().with_file_name("exported.jsonl");
    std::fs::write(&file, &r.stdout).unwrap();
    let key = support::journal::approver_key(&mut v);
    let held = [
        "verify",
        "--file",
        file.to_str().unwrap(),
        "--approver-key",
        &key,
    ];
    v.run(&held, None).ok();
    // A missing --secret-file says the OS error once.
    let r = v
        .run(
            &[
                "add",
                "http",
                "x",
                "--host",
                "https://api.example.com",
                "--bearer",
                "--secret-file",
                "/nonexistent/secret",
                "--passphrase-stdin",
            ],
            Some(&pp),
        )
        .code(1);
    assert_eq!(r.stderr.matches("No such file").count(), 1, "{}", r.stderr);
    // An unknown session is named as unknown, not "no activity yet".
    let r = v.run(&["log", "--session", "ses_nope"], None).code(1);
    assert!(r.stderr.contains("no session \"ses_nope\""), "{}", r.stderr);
    // One duration syntax: what `unlock --for` takes, `log --since` takes.
    for age in ["2hours", "90s", "1h30m", "3d", "3 days"] {
        v.run(&["log", "--since", age], None).ok();
    }
    v.run(&["log", "--since", "soon"], None).code(1);
}

#[test]
fn config_shows_each_value_its_source_and_what_the_running_agent_uses() {
    let mut v = TestVault::init("first-config");
    // No file: every key is its default, the idle lock included.
    let r = v.run(&["config"], None).ok();
    assert!(r.stdout.contains("does not exist"), "{}", r.stdout);
    assert!(
        r.stdout.contains("idle_seconds = 3600") && r.stdout.contains("default"),
        "{}",
        r.stdout
    );
    // A key set in the file, read by a restarted agent: its source is the file.
    v.configure("[approvals]\nexpiry_seconds = 120\n");
    let r = v.run(&["config", "--json"], None).ok();
    let j: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let key = |name: &str| {
        j["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["key"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(key("approvals.expiry_seconds")["value"], 120);
    assert_eq!(key("approvals.expiry_seconds")["source"], "config.toml");
    assert_eq!(key("approvals.wait_seconds")["source"], "default");
    assert!(key("approvals.expiry_seconds")["agent_value"].is_null());
    // Changed after the agent started: both values, and what applies the new one.
    std::fs::write(
        v.vault_dir().join("config.toml"),
        "[approvals]\nexpiry_seconds = 300\n",
    )
    .unwrap();
    let r = v.run(&["config"], None).ok();
    assert!(
        r.stdout.contains("expiry_seconds = 300")
            && r.stdout.contains("the running agent uses 120"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("`vault unlock`"), "{}", r.stdout);
}

#[test]
fn log_has_a_header_a_reverse_order_and_fits_the_width() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("first-log");
    v.add_bearer_with("api", &target.base(), SECRET, &["--approval", "never"]);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let long = "x".repeat(300);
    for (id, path) in [(1, "first".to_owned()), (2, format!("second-{long}"))] {
        let sc = get(&mut p, id, "api", &format!("{}/{path}", target.base()), 30);
        assert_eq!(sc["state"], "completed", "{sc}");
    }
    p.finish(Duration::from_secs(10));
    // Wide enough for the short URL whole (the columns before WHAT take about 120, more with a
    // slow call's TOOK), not for the long one.
    let mut c = v.command(&["log"]);
    c.env("COLUMNS", "200");
    let r = v.run_command(&mut c, None).ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[0].starts_with("TIME") && lines[0].contains("STATE"),
        "{}",
        r.stdout
    );
    assert!(
        lines[1].contains("/first") && lines[2].contains("xxx"),
        "{}",
        r.stdout
    );
    assert!(
        lines.iter().all(|l| l.chars().count() <= 200),
        "{}",
        r.stdout
    );
    assert!(
        lines[2].contains('…'),
        "the long URL is cut in the middle: {}",
        r.stdout
    );
    let r = v.run(&["log", "--reverse"], None).ok();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines[1].contains("/second-") && lines[2].contains("/first"),
        "{}",
        r.stdout
    );
    // Piped without COLUMNS, nothing is cut.
    assert!(r.stdout.contains(&long), "{}", r.stdout);
}

#[test]
fn a_profile_with_no_credentials_is_named_on_the_servers_stderr() {
    let mut v = TestVault::init("first-profile");
    v.add_bearer("api", "https://api.example.com", SECRET);
    let mut p = McpProc::spawn(v.command(&["mcp", "--profile", "defualt"]));
    p.initialize();
    let r = p.call(1, "list_credentials", json!({}));
    assert_eq!(r["result"]["isError"], false, "{r}");
    let (_, _, stderr) = p.finish(Duration::from_secs(10));
    assert!(
        stderr.contains("profile \"defualt\" has no credentials")
            && stderr.contains("the profiles that have some: default"),
        "{stderr}"
    );
    // The right profile says nothing of the kind.
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.call(1, "list_credentials", json!({}));
    let (_, _, stderr) = p.finish(Duration::from_secs(10));
    assert!(!stderr.contains("has no credentials"), "{stderr}");
}

#[test]
fn a_locked_vault_is_said_in_the_servers_log_at_initialize() {
    let mut v = TestVault::init("first-locked-mcp");
    v.run(&["lock"], None).ok();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let r = p.call(1, "list_credentials", json!({}));
    assert_eq!(
        r["result"]["structuredContent"]["error"]["code"], "locked",
        "{r}"
    );
    let (_, _, stderr) = p.finish(Duration::from_secs(10));
    assert!(
        stderr.contains("the vault is locked") && stderr.contains("vault unlock"),
        "{stderr}"
    );
}
