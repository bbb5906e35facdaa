//! The memory of every `vault` process that holds or is about to hold key material, read by a
//! same-uid shell the way an attacker would (`support::memory`): `vault approve` while a card
//! waits (it holds the master key and the approver key), and `vault unlock`, `add`, `edit`,
//! `resume` and `init` while they wait at a terminal passphrase prompt (the passphrase is typed
//! into them next). None may be opened through `/proc/PID/mem` or attached with `ptrace`, and no
//! readable memory may hold the master key (raw or hex), the approver's seed (raw or hex), the
//! passphrase or the secret being added. Run as root (CI), each test re-runs itself as the
//! unprivileged `vaulttest`, so the attacker and the vault's processes share that uid.
mod support;

use agent_vault::keys::Passphrase;
use agent_vault::paths::VaultPaths;
use agent_vault::vault::Vault;
use serde_json::json;
use std::time::Duration;
use support::mcp::McpProc;
use support::memory::{find_any, ptrace_attach, read_memory};
use support::pty::PtySession;
use support::target::HttpTarget;
use support::uid::run_unprivileged;
use support::*;

const SECRET: &str = "DECOY_keymem_tok_e84b2c";
const NEW_SECRET: &str = "DECOY_keymem_new_19d7fa";

/// What must not be found in a `vault` process's memory: (name, bytes).
fn needles(v: &TestVault) -> Vec<(String, Vec<u8>)> {
    let keys = Vault::keys(
        &VaultPaths::new(v.vault_dir()),
        &Passphrase::from_string(PASSPHRASE.into()),
    )
    .unwrap();
    let master = keys.master.expose().to_vec();
    let seed = hex::decode(keys.approver.seed_hex().as_str()).unwrap();
    vec![
        ("the master key".into(), master.clone()),
        (
            "the master key in hex".into(),
            hex::encode(&master).into_bytes(),
        ),
        ("the approver seed".into(), seed.clone()),
        (
            "the approver seed in hex".into(),
            hex::encode(&seed).into_bytes(),
        ),
        ("the passphrase".into(), PASSPHRASE.as_bytes().to_vec()),
        ("the new secret".into(), NEW_SECRET.as_bytes().to_vec()),
    ]
}

/// What a same-uid shell gets from `pid` (`what` names it): one line per way in.
fn inspect(what: &str, pid: u32, needles: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut found = Vec::new();
    if std::fs::File::open(format!("/proc/{pid}/mem")).is_ok() {
        found.push(format!("{what} (pid {pid}): /proc/{pid}/mem opens"));
    }
    let memory = read_memory(pid).unwrap_or_default();
    if !memory.is_empty() {
        found.push(format!("{what}: {} bytes of its memory read", memory.len()));
    }
    let forms: Vec<&[u8]> = needles.iter().map(|(_, b)| &b[..]).collect();
    for (hit, (name, _)) in find_any(&memory, &forms).into_iter().zip(needles) {
        if hit {
            found.push(format!("{what}: its memory holds {name}"));
        }
    }
    if ptrace_attach(pid).is_ok() {
        found.push(format!("{what}: ptrace(PTRACE_ATTACH) succeeds"));
    }
    found
}

/// Control: the same inspection does see into an ordinary process of this uid.
fn control() {
    let mut p = PtySession::spawn(std::process::Command::new("cat"), None);
    let seen = inspect("cat", p.pid(), &[]);
    assert!(
        seen.iter().any(|f| f.contains("bytes of its memory read")),
        "the inspection reads nothing even of an ordinary process: {seen:?}"
    );
    p.finish(Duration::ZERO);
}

#[track_caller]
fn assert_none(findings: &[String]) {
    assert!(findings.is_empty(), "\n{}", findings.join("\n"));
}

/// Waits until an action is pending.
fn wait_pending(v: &mut TestVault) {
    v.wait_pending(1);
}

#[test]
fn vault_approve_showing_a_card_is_unreadable() {
    if !run_unprivileged("vault_approve_showing_a_card_is_unreadable") {
        return;
    }
    control();
    let target = HttpTarget::start(SECRET);
    let mut v = TestVault::init("keymem-approve");
    v.add_bearer("api", &target.base(), SECRET);
    let needles = needles(&v);
    let mut mcp = McpProc::spawn(v.command(&["mcp"]));
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "http_request", "arguments": {"credential": "api", "method": "GET", "url": format!("{}/x", target.base()), "wait_s": 60}}}));
    wait_pending(&mut v);
    let mut approve = PtySession::spawn(v.command(&["approve"]), None);
    assert!(
        approve.wait_for("passphrase", Duration::from_secs(20)),
        "no passphrase prompt: {}",
        approve.output()
    );
    std::thread::sleep(Duration::from_millis(300));
    approve.send(&format!("{PASSPHRASE}\n"));
    assert!(
        approve.wait_for("[a]pprove once", Duration::from_secs(30)),
        "no card: {}",
        approve.output()
    );
    // The card is up: the keys are in this process now, as long as it waits for a key.
    let findings = inspect("vault approve", approve.pid(), &needles);
    approve.send("q");
    let code = approve.finish(Duration::from_secs(10));
    assert_eq!(code, Some(0), "vault approve: {}", approve.output());
    assert!(target.requests().is_empty(), "nothing was approved");
    drop(mcp);
    assert_none(&findings);
}

#[test]
fn commands_waiting_at_a_passphrase_prompt_are_unreadable() {
    if !run_unprivileged("commands_waiting_at_a_passphrase_prompt_are_unreadable") {
        return;
    }
    control();
    let mut v = TestVault::init("keymem-prompt");
    v.add_bearer("api", "api.example.com", SECRET);
    v.run(&["pause"], None).ok();
    let needles = needles(&v);
    let fresh = TestVault::empty("keymem-init");
    let new_line = format!("{NEW_SECRET}\n");
    let cases: [(&str, &TestVault, &[&str], Option<&str>); 5] = [
        ("vault unlock", &v, &["unlock", "--restart"], None),
        (
            "vault add",
            &v,
            &[
                "add",
                "http",
                "api2",
                "--host",
                "api.example.com",
                "--bearer",
                "--secret-stdin",
            ],
            Some(&new_line),
        ),
        (
            "vault edit",
            &v,
            &["edit", "api", "--secret-stdin"],
            Some(&new_line),
        ),
        ("vault resume", &v, &["resume"], None),
        ("vault init", &fresh, &["init"], None),
    ];
    let mut findings = Vec::new();
    for (what, vault, args, stdin) in cases {
        let mut p = PtySession::spawn(vault.command(args), stdin);
        assert!(
            p.wait_for("passphrase", Duration::from_secs(20)),
            "{what}: no passphrase prompt: {}",
            p.output()
        );
        std::thread::sleep(Duration::from_millis(300));
        findings.extend(inspect(what, p.pid(), &needles));
        drop(p);
    }
    assert_none(&findings);
}
