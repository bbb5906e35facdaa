//! Who can approve (SECURITY.md "Who can approve"): the person's `vault approve` runs in a pane
//! of a real tmux server, the usual set-up beside an AI client. An attacker process of the same
//! non-root uid (CI: `vaulttest`), with no passphrase and no PIN, asks for a DELETE through
//! `vault mcp`, finds the pane (`list-panes -a`), reads it (`capture-pane`) and types every key
//! the card names and every short word it shows (`send-keys`, `support/tmux_attacker.py`). The
//! target receives nothing and the action is still waiting or was denied. The control: the
//! person types `a` and the approval PIN into the same pane, and the same kind of action runs.
mod support;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::tmux::Tmux;
use support::uid::{is_root, run_unprivileged};
use support::*;

const SECRET: &str = "DECOY_approver_tok_7d21c9e0";

fn deletes(target: &HttpTarget) -> Vec<Value> {
    target
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "DELETE")
        .collect()
}

/// The action's state as the journal ends it.
fn state_of(v: &mut TestVault, id: &str) -> String {
    let log = v.run_pp(&["log", "--json"], None).ok();
    log.stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["action_id"] == id)
        .map(|e| e["state"].as_str().unwrap_or("?").to_owned())
        .unwrap_or_else(|| panic!("no log entry for {id}:\n{}", log.stdout))
}

/// Every journal row, as `vault export-audit` writes it.
fn journal_lines(v: &mut TestVault) -> Vec<String> {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = v.vault_dir().join(format!("../export-{n}.jsonl"));
    v.run_pp(&["export-audit", file.to_str().unwrap()], None)
        .ok();
    std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The kind of every journal row, in order.
fn journal_kinds(v: &mut TestVault) -> Vec<String> {
    journal_lines(v)
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|r| r["kind"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// Starts the person's `vault approve` in the pane and types the passphrase into it.
fn start_approver(tmux: &Tmux) {
    tmux.type_text(&format!("{} approve", bin()));
    tmux.press("Enter");
    tmux.wait_for("Vault passphrase", Duration::from_secs(20));
    tmux.type_text(PASSPHRASE);
    tmux.press("Enter");
    tmux.wait_for("No action waits", Duration::from_secs(30));
}

#[test]
fn a_same_uid_process_typing_into_the_approvers_tmux_pane_cannot_approve() {
    if !run_unprivileged("a_same_uid_process_typing_into_the_approvers_tmux_pane_cannot_approve") {
        return;
    }
    assert!(!is_root(), "the attacker must be an unprivileged uid");
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("tmuxattack");
    v.add_bearer("api", &target.base(), SECRET);
    let url = format!("{}/repos/acme/prod", target.base());
    let tmux = Tmux::start(
        "approver",
        &[("VAULT_DIR", v.vault_dir().display().to_string())],
        120,
        40,
    );
    start_approver(&tmux);
    // `vault approve` says, before the first card, that this terminal can be typed into.
    let first = tmux.screen();
    assert!(
        first.contains("can type into this terminal (tmux"),
        "{first}"
    );

    // The attacker: same uid, the agent's environment (VAULT_DIR, the user's tmux), no passphrase.
    let report_path = v.vault_dir().join("../attacker.json");
    let mut attacker = Command::new(system_python())
        .arg(support_file("tmux_attacker.py"))
        .args([bin(), url.as_str(), "12"])
        .arg(&report_path)
        .env("VAULT_DIR", v.vault_dir())
        .env("TMUX_TMPDIR", tmux.tmpdir())
        .env_remove("VAULT_PASSPHRASE_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(attacker.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "done", "the attacker did not finish");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let asked = report["asked"]["action_id"]
        .as_str()
        .unwrap_or_else(|| panic!("the attacker's DELETE was not queued: {report}"));
    assert!(
        report["pane"].is_string(),
        "the attacker did not find the pane: {report}"
    );
    let screens = report["screens"].as_array().unwrap();
    assert!(
        screens
            .iter()
            .any(|s| s.as_str().unwrap().contains("DELETE")),
        "the attacker never saw the card: {report}"
    );
    assert!(
        report["keys"].as_array().unwrap().contains(&json!("a"))
            && report["sends"].as_u64().unwrap() > 20,
        "the attacker typed too little to count: {report}"
    );

    // Nothing reached the target, and the attacker's action was never approved.
    assert_eq!(
        deletes(&target).len(),
        0,
        "a DELETE reached the target: {:?}",
        target.requests()
    );
    let state = state_of(&mut v, asked);
    assert!(
        state == "pending" || state == "denied",
        "the attacker's action is {state}"
    );
    assert!(
        !journal_lines(&mut v)
            .iter()
            .any(|l| l.contains("\"action.approved\"") && l.contains(asked)),
        "an approval of the attacker's action was journaled"
    );
    let _ = attacker.stdin.take().map(|mut s| s.write_all(b"\n"));
    let _ = attacker.wait();

    // The control: the person, in the same pane, approves the same kind of action with the PIN.
    // The attacker's wrong PINs paused the vault, and its `q` ended `vault approve` (its words
    // then went to the shell): the person resumes (the passphrase), clears the pane and starts
    // `vault approve` again, as they would.
    let journal_rows =
        |v: &mut TestVault, kind: &str| journal_kinds(v).iter().filter(|k| *k == kind).count();
    assert!(
        journal_rows(&mut v, "approval.pin_wrong") >= 1,
        "the attacker's typing never reached a PIN prompt"
    );
    v.run(
        &["resume", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    tmux.fresh_shell();
    start_approver(&tmux);
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": url, "wait_s": 60}}}));
    tmux.wait_for("[a]", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("a");
    tmux.wait_for("PIN to approve", Duration::from_secs(10));
    tmux.type_text(PIN);
    tmux.press("Enter");
    let (reply, _) = mcp.until_id(&json!(9), Duration::from_secs(60));
    assert_eq!(
        reply["result"]["structuredContent"]["state"], "completed",
        "{reply}"
    );
    let sent = deletes(&target);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["headers"]["authorization"],
        format!("Bearer {SECRET}")
    );
}

#[test]
fn doctor_says_who_else_can_type_into_the_terminal_and_what_holds() {
    let mut v = TestVault::init("exposure");
    let terminal = |v: &mut TestVault, env: &[(&str, &str)]| -> Value {
        let mut c = v.command(&["doctor", "--json"]);
        for k in ["TMUX", "STY", "DISPLAY", "WAYLAND_DISPLAY"] {
            c.env_remove(k);
        }
        for (k, val) in env {
            c.env(k, val);
        }
        let out = v.run_command(&mut c, None);
        let doc: Value = serde_json::from_str(out.stdout.trim()).unwrap();
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "this terminal")
            .cloned()
            .unwrap_or_else(|| panic!("no terminal check: {doc}"))
    };
    let tmux = terminal(&mut v, &[("TMUX", "/tmp/tmux-1/default,1,0")]);
    let detail = tmux["detail"].as_str().unwrap();
    assert_eq!(tmux["warning"], true, "{tmux}");
    for want in ["send-keys", "bind-key", "PIN", "vault run"] {
        assert!(detail.contains(want), "{want}: {detail}");
    }
    let x11 = terminal(&mut v, &[("DISPLAY", ":0")]);
    assert!(x11["detail"].as_str().unwrap().contains("XTEST"), "{x11}");
    let wayland = terminal(
        &mut v,
        &[("DISPLAY", ":0"), ("WAYLAND_DISPLAY", "wayland-0")],
    );
    assert!(
        !wayland["detail"].as_str().unwrap().contains("XTEST"),
        "{wayland}"
    );
    let pin = v.run(
        &["doctor", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    );
    assert!(
        pin.stdout.contains("approval PIN") && pin.stdout.contains("set: every approval"),
        "{}",
        pin.stdout
    );
}

/// The scripted path (`vault approve --id … --approve` with the passphrase in
/// VAULT_PASSPHRASE_FILE) signs with the passphrase alone, no PIN: whoever reads that file can
/// approve. `vault doctor` warns when the file is readable by anyone but its owner, or sits in a
/// project (a git work tree an AI client reads, commits and pushes); a 0600 file elsewhere is ok.
#[test]
fn doctor_warns_of_a_passphrase_file_others_can_read_or_that_sits_in_a_project() {
    use std::os::unix::fs::PermissionsExt;
    let mut v = TestVault::init("pp-file");
    let check = |v: &mut TestVault, file: &std::path::Path| -> Value {
        let mut c = v.command(&["doctor", "--json"]);
        c.env("VAULT_PASSPHRASE_FILE", file);
        let doc: Value = serde_json::from_str(v.run_command(&mut c, None).stdout.trim()).unwrap();
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["check"] == "passphrase file")
            .cloned()
            .unwrap_or_else(|| panic!("no passphrase file check: {doc}"))
    };
    let write = |path: &std::path::Path, mode: u32| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{PASSPHRASE}\n")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let private = v.dir.path().join("config/passphrase");
    write(&private, 0o600);
    let ok = check(&mut v, &private);
    assert_eq!(
        (ok["ok"].as_bool(), ok["warning"].as_bool()),
        (Some(true), Some(false)),
        "{ok}"
    );
    assert!(
        ok["detail"].as_str().unwrap().contains("without the PIN"),
        "{ok}"
    );
    let shared = v.dir.path().join("config/passphrase-shared");
    write(&shared, 0o644);
    let warn = check(&mut v, &shared);
    let detail = warn["detail"].as_str().unwrap();
    assert_eq!(warn["warning"], true, "{warn}");
    assert!(
        detail.contains("644") && detail.contains("chmod 600"),
        "{detail}"
    );
    // In a project: the git work tree's root is named, even several directories up.
    let project = v.dir.path().join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let inside = project.join("scripts/ci/passphrase");
    write(&inside, 0o600);
    let warn = check(&mut v, &inside);
    let detail = warn["detail"].as_str().unwrap();
    assert_eq!(warn["warning"], true, "{warn}");
    assert!(
        detail.contains("git work tree") && detail.contains(project.to_str().unwrap()),
        "{detail}"
    );
    // Without VAULT_PASSPHRASE_FILE there is nothing to say.
    let doc: Value =
        serde_json::from_str(v.run(&["doctor", "--json"], None).stdout.trim()).unwrap();
    assert!(
        !doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "passphrase file"),
        "{doc}"
    );
}

/// A typo is not tampering: the person mistypes the PIN once on a card in a real tmux pane, then
/// types it right. The action runs, and the journal those rows made verifies, in `vault.db` and
/// as an export (issue 46: `approval.pin_wrong` names the action it was typed for).
#[test]
fn a_mistyped_pin_then_the_right_one_leaves_a_journal_that_verifies() {
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("pintypo");
    v.add_bearer("api", &target.base(), SECRET);
    let url = format!("{}/repos/acme/app", target.base());
    let tmux = Tmux::start(
        "pintypo",
        &[("VAULT_DIR", v.vault_dir().display().to_string())],
        120,
        40,
    );
    start_approver(&tmux);
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "http_request",
        "arguments": {"credential": "api", "method": "DELETE", "url": url, "wait_s": 60}}}));
    tmux.wait_for("[a]", Duration::from_secs(20));
    // A key pressed as a card appears is ignored (the card asks to read it first).
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("a");
    tmux.wait_for("PIN to approve", Duration::from_secs(10));
    tmux.type_text("13579");
    tmux.press("Enter");
    tmux.wait_for("wrong approval PIN", Duration::from_secs(10));
    assert_eq!(deletes(&target).len(), 0, "a wrong PIN approved");
    tmux.wait_for("[a]", Duration::from_secs(20));
    // A key pressed as a card appears is ignored (the card asks to read it first).
    std::thread::sleep(Duration::from_millis(800));
    tmux.press("a");
    tmux.wait_for("PIN to approve", Duration::from_secs(10));
    tmux.type_text(PIN);
    tmux.press("Enter");
    let (reply, _) = mcp.until_id(&json!(3), Duration::from_secs(60));
    assert_eq!(
        reply["result"]["structuredContent"]["state"], "completed",
        "{reply}"
    );
    assert_eq!(deletes(&target).len(), 1);
    let kinds = journal_kinds(&mut v);
    assert_eq!(
        kinds.iter().filter(|k| *k == "approval.pin_wrong").count(),
        1,
        "{kinds:?}"
    );
    let verified = v.run_pp(&["verify"], None);
    assert_eq!(verified.code, 0, "vault verify: {verified:?}");
    let file = v.vault_dir().join("../typo-export.jsonl");
    v.run_pp(&["export-audit", file.to_str().unwrap()], None)
        .ok();
    let key = support::journal::approver_key(&mut v);
    let held = [
        "verify",
        "--file",
        file.to_str().unwrap(),
        "--approver-key",
        &key,
    ];
    let offline = v.run(&held, None);
    assert_eq!(
        offline.code, 0,
        "vault verify --file --approver-key: {offline:?}"
    );
}
