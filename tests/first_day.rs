//! The first day, second round (issue 48): each trap a new user met, from the README to a first
//! approved action, played as they met it: in a terminal where the screen is the evidence, or
//! through the command whose words promised more or less than the code does.
mod support;

use serde_json::json;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

/// `vault scan` suggests `--secret-stdin` for a token found in `~/.npmrc`; a person pastes the
/// token at the terminal. It is asked for with a prompt and never shown: not on the screen, not
/// in the scrollback (the whole pty transcript is searched), and the vault stores exactly it.
#[test]
fn a_secret_pasted_at_a_terminal_for_secret_stdin_is_never_shown() {
    const TYPED: &str = "DECOY_typed_npm_token_4d2c";
    let target = HttpTarget::start("unused");
    let mut v = TestVault::init("typed-secret");
    let r = v.run_tty(
        &[
            "add",
            "http",
            "npm",
            "--host",
            &target.base(),
            "--bearer",
            "--approval",
            "never",
            "--secret-stdin",
        ],
        &[
            ("not shown", &format!("{TYPED}\r")),
            ("passphrase", &format!("{PASSPHRASE}\r")),
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("Paste the secret"),
        "no prompt: {}",
        r.stdout
    );
    assert_no_leak("the terminal", r.stdout.as_bytes(), TYPED);
    assert_no_leak("the terminal", r.stderr.as_bytes(), TYPED);
    // What was stored is what was pasted: the target receives it.
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/echo", target.base());
    let got = p.call(
        1,
        "http_request",
        json!({"credential": "npm", "method": "GET", "url": url}),
    );
    assert_eq!(
        got["result"]["structuredContent"]["state"], "completed",
        "{got}"
    );
    assert_eq!(
        target.requests()[0]["headers"]["authorization"],
        format!("Bearer {TYPED}")
    );
    p.finish(std::time::Duration::from_secs(10));
}

/// A typo is not a disaster: one wrong passphrase in `vault approve` at a terminal is asked for
/// again (it ended approve with exit 4 and spoke of restoring the key file from a backup).
#[test]
fn a_mistyped_passphrase_in_vault_approve_is_asked_for_again() {
    let mut v = TestVault::init("typo-passphrase");
    let r = v.run_tty(
        &["approve"],
        &[
            ("passphrase", "not the passphrase\r"),
            ("Wrong passphrase", &format!("{PASSPHRASE}\r")),
            ("No action waits", "q"),
        ],
    );
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(!r.stdout.contains("backup"), "{}", r.stdout);
}

/// Ctrl-C at the PIN prompt quits `vault approve`, as it does everywhere else, and decides
/// nothing: the action still waits and nothing reached the target (it cancelled the card only).
#[test]
fn ctrl_c_at_the_pin_prompt_quits_and_decides_nothing() {
    let target = HttpTarget::start("unused");
    let mut v = TestVault::init("ctrl-c-pin");
    v.add_bearer("api", &target.base(), "DECOY_ctrl_c_tok_77aa");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": format!("{}/x", target.base()), "wait_s": 0}}}));
    let waiting = v.wait_pending(1);
    let r = v.run_tty_timed(
        &["approve"],
        &[
            ("passphrase", &format!("{PASSPHRASE}\r"), 0.2),
            ("[a]pprove once", "a", 0.8),
            ("PIN to approve", "\u{3}", 0.2),
        ],
    );
    assert_eq!(
        r.code, 0,
        "vault approve did not quit on Ctrl-C: {}{}",
        r.stdout, r.stderr
    );
    assert!(
        r.stdout.contains("Quit: nothing was decided"),
        "{}",
        r.stdout
    );
    let still = v.wait_pending(1);
    assert_eq!(still[0]["action_id"], waiting[0]["action_id"]);
    assert_eq!(target.requests().len(), 0, "the DELETE ran");
    p.finish(std::time::Duration::from_secs(10));
}

/// A grant of a session that has ended can never be used again: `vault status` and `vault
/// grants` no longer count it as in force (they did, until its hour was up).
#[test]
fn a_grant_of_an_ended_session_is_not_in_force() {
    let target = HttpTarget::start("unused");
    let mut v = TestVault::init("ended-grant");
    v.add_bearer("api", &target.base(), "DECOY_ended_grant_tok_19c0");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "GET", "url": format!("{}/repos/a/b", target.base()), "wait_s": 30}}}));
    let act = v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    v.run(
        &[
            "approve",
            "--id",
            &act,
            "--approve-session",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    p.until_id(&json!(2), std::time::Duration::from_secs(30));
    let grants = |v: &mut TestVault| -> (u64, usize) {
        let status: serde_json::Value =
            serde_json::from_str(v.run(&["status", "--json"], None).ok().stdout.trim()).unwrap();
        let listed: Vec<serde_json::Value> =
            serde_json::from_str(v.run(&["grants", "--json"], None).ok().stdout.trim()).unwrap();
        (status["grants"].as_u64().unwrap(), listed.len())
    };
    assert_eq!(
        grants(&mut v),
        (1, 1),
        "the grant is in force while its session runs"
    );
    p.finish(std::time::Duration::from_secs(10));
    assert_eq!(
        grants(&mut v),
        (0, 0),
        "the ended session's grant still counts"
    );
}

/// `vault doctor` says one thing about `ptrace_scope`: where the terminal check warns that
/// ptrace reaches the terminal, the `ptrace_scope` check warns too (it said ok about the same
/// setting).
#[test]
fn doctor_says_one_thing_about_ptrace_scope() {
    let mut v = TestVault::init("doctor-ptrace");
    let doc: serde_json::Value =
        serde_json::from_str(v.run(&["doctor", "--json"], None).stdout.trim()).unwrap();
    let check = |name: &str| -> serde_json::Value {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check: {doc}"))
    };
    let (terminal, scope) = (check("this terminal"), check("ptrace_scope"));
    let open = matches!(agent_vault::sys::ptrace_scope(), None | Some(0));
    assert_eq!(scope["warning"], open, "{scope}");
    if terminal["detail"].as_str().unwrap().contains("(ptrace)") {
        assert_eq!(scope["warning"], true, "{terminal} / {scope}");
    }
}

/// `vault log` calls a scripted approval (`vault approve --id`, the passphrase) what it is, not
/// a card, and its RAN ON column holds a whole id in a piped table without pushing WHAT out of
/// line; `--json` says how the decision was made.
#[test]
fn vault_log_names_a_scripted_approval_and_keeps_its_columns() {
    let target = HttpTarget::start("unused");
    let mut v = TestVault::init("log-script");
    v.add_bearer("api", &target.base(), "DECOY_log_script_tok_5b1e");
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": format!("{}/x", target.base()), "wait_s": 30}}}));
    let act = v.wait_pending(1)[0]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    v.run(
        &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    p.until_id(&json!(2), std::time::Duration::from_secs(30));
    p.finish(std::time::Duration::from_secs(10));
    let table = v.run(&["log"], None).ok().stdout;
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    let row = lines.find(|l| l.contains("DELETE")).unwrap();
    assert!(row.contains("script dec_"), "{table}");
    assert!(!row.contains("card "), "{table}");
    let what = header.find("WHAT").unwrap();
    assert_eq!(
        row.char_indices()
            .nth(what)
            .map(|(i, _)| &row[i..])
            .unwrap_or(""),
        &row[row.find("DELETE").unwrap()..],
        "WHAT is out of line:\n{table}"
    );
    let json: serde_json::Value = serde_json::from_str(
        v.run(&["log", "--json"], None)
            .ok()
            .stdout
            .lines()
            .find(|l| l.contains("DELETE"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["basis"]["method"], "passphrase", "{json}");
}

/// `vault sessions` shows whether each session was contained, as a column of its table (only
/// `--json` said it).
#[test]
fn vault_sessions_has_a_contained_column() {
    let mut v = TestVault::init("sessions-contained");
    let project = v.dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    for contained in [false, true] {
        let mut c = if contained {
            let mut c = v.command(&["run", "--", bin(), "mcp"]);
            c.current_dir(&project);
            c
        } else {
            v.command(&["mcp"])
        };
        c.env_remove("VAULT_PASSPHRASE_FILE");
        let mut p = McpProc::spawn(c);
        p.initialize();
        p.call(1, "list_credentials", json!({}));
        p.finish(std::time::Duration::from_secs(20));
    }
    let table = v.run(&["sessions"], None).ok().stdout;
    let header = table.lines().next().unwrap();
    assert!(header.contains("CONTAINED"), "{table}");
    // One session of each: a `yes` and a `no` under CONTAINED.
    let at = header.find("CONTAINED").unwrap();
    let mut marks: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.get(at..)?.split_whitespace().next())
        .collect();
    marks.sort();
    assert_eq!(marks, ["no", "yes"], "{table}");
}

/// Running `vault setup claude` and then `vault setup claude --scope project` in a folder, as the
/// README shows both, puts `agent-vault` in two of Claude Code's scopes: it warns of conflicting
/// scopes, and which entry wins can change. `vault setup` says so at once and which to keep.
#[test]
fn vault_setup_says_when_claude_code_would_find_two_entries() {
    let v = TestVault::init("setup-scopes");
    let home = v.dir.path().join("home");
    let project = v.dir.path().join("project");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    let setup = |scope: &str| -> String {
        let mut c = v.command(&["setup", "claude", "--scope", scope]);
        c.current_dir(&project)
            .env("HOME", &home)
            .env_remove("CLAUDE_CONFIG_DIR")
            // No claude on PATH: its health check is not what this test is about.
            .env("PATH", "/usr/bin:/bin");
        let out = c.output().unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = setup("user");
    assert!(!first.contains("scopes here"), "{first}");
    let second = setup("project");
    assert!(
        second.contains("Claude Code now finds agent-vault in 2 scopes here")
            && second.contains("claude mcp remove agent-vault -s user"),
        "{second}"
    );
}
