//! Team mode's SSH certificates and the journal's head, through the real binary against a real
//! `bao server -dev`: `ssh_exec` logging in with a certificate from OpenBao's SSH CA to an sshd
//! that trusts only that CA, and a vault directory restored to an older copy refused by `vault
//! verify` and `vault unlock` against the head OpenBao holds.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::bao::Bao;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::team::{add_from_bao, get, login};
use support::*;

const V1: &str = "DECOY_bao_head_v1/tok+99cc=3a";

/// `ssh_exec` with a credential that holds no key: sshd trusts only OpenBao's CA (no authorized
/// key at all), the agent logs in with a certificate signed for this action, sshd's log shows
/// the certificate accepted, and the journal names its serial and validity.
#[test]
fn ssh_logs_in_with_a_certificate_from_the_team_ca() {
    let bao = Bao::start();
    let ca = bao.ssh_ca("deploy", "root");
    let (role_id, secret_id) = bao.approle(
        "agent",
        r#"path "ssh/sign/deploy" { capabilities = ["update"] }"#,
        "5m",
    );
    let ca_file = TempDir::new("ca");
    let ca_path = ca_file.path().join("ca.pub");
    std::fs::write(&ca_path, format!("{ca}\n")).unwrap();
    let sshd = support::sshd::Sshd::start_with(
        "",
        &format!("TrustedUserCAKeys {}\nLogLevel VERBOSE", ca_path.display()),
    );
    let mut v = TestVault::init("team-ssh");
    login(&mut v, &bao.address, &role_id, &secret_id);
    v.run_pp(
        &[
            "add",
            "ssh",
            "web",
            "--host",
            "127.0.0.1",
            "--port",
            &sshd.port.to_string(),
            "--user",
            "root",
            "--host-key",
            &sshd.host_key_fingerprint,
            "--cert-from",
            "openbao:ssh/sign/deploy",
            "--approval",
            "never",
        ],
        None,
    )
    .ok();
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    for id in 1..=2 {
        // Two commands (the same write twice would be replayed, not run).
        let command = format!("echo team-$((40+{id}))");
        let r = p.call(
            id,
            "ssh_exec",
            json!({"credential": "web", "command": command, "wait_s": 30}),
        );
        let s = &r["result"]["structuredContent"];
        assert_eq!(s["state"], "completed", "{r}");
        assert!(s.to_string().contains(&format!("team-{}", 40 + id)), "{r}");
    }
    // sshd's session processes write their lines a moment later.
    wait_until(
        Duration::from_secs(10),
        "two certificate logins in sshd's log",
        || sshd.log().matches("Accepted publickey for root").count() >= 2,
    );
    let log = sshd.log();
    assert_eq!(
        log.matches("Accepted publickey for root").count(),
        2,
        "one certificate login per action: {log}"
    );
    assert!(
        log.contains("ED25519-CERT"),
        "sshd accepted a certificate: {log}"
    );
    let export = v.dir.path().join("journal.jsonl");
    v.run(&["export-audit", export.to_str().unwrap()], None)
        .ok();
    let rows = std::fs::read_to_string(&export).unwrap();
    let certs: Vec<Value> = rows
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["kind"] == "openbao.cert")
        .collect();
    assert_eq!(certs.len(), 2, "{rows}");
    for c in &certs {
        let b = match &c["body"] {
            Value::String(text) => serde_json::from_str::<Value>(text).unwrap(),
            other => other.clone(),
        };
        assert!(b["serial"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        let (after, before) = (
            b["valid_after"].as_u64().unwrap(),
            b["valid_before"].as_u64().unwrap(),
        );
        assert!(
            before > after && before - after <= 300,
            "a short-lived certificate: {c}"
        );
        assert_eq!(b["principal"], "root");
    }
    drop(p);
    v.run(&["verify"], None).ok();
    let key = support::journal::approver_key(&mut v);
    let held = [
        "verify",
        "--file",
        export.to_str().unwrap(),
        "--approver-key",
        &key,
    ];
    v.run(&held, None).ok();
}

const HEAD_POLICY: &str = r#"
path "secret/data/team/*" { capabilities = ["read"] }
path "secret/data/agent-vault/*" { capabilities = ["create", "read", "update"] }
path "secret/metadata/agent-vault/*" { capabilities = ["read"] }
"#;

/// The head OpenBao holds for the only vault that wrote one: (seq, hash).
fn remote_head(bao: &Bao) -> (i64, String) {
    let (_, list) = bao.api("GET", "secret/metadata/agent-vault?list=true", None);
    let id = list["data"]["keys"][0]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();
    let (_, v) = bao.api(
        "GET",
        &format!("secret/data/agent-vault/{id}/journal-head"),
        None,
    );
    let head = v["data"]["data"]["head"].as_str().unwrap().to_owned();
    let (seq, hash) = head.split_once(':').unwrap();
    (seq.parse().unwrap(), hash.to_owned())
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A vault directory restored to an older copy after more actions: `vault unlock` and `vault
/// verify` refuse it (exit 3), naming the head OpenBao holds, though its own chain and its own
/// anchors.jsonl still verify.
#[test]
fn a_restored_older_vault_is_refused_against_the_remote_head() {
    let bao = Bao::start();
    bao.kv_put("team/api", json!({"token": V1}));
    let (role_id, secret_id) = bao.approle("agent", HEAD_POLICY, "5m");
    let target = HttpTarget::start(V1);
    let mut v = TestVault::init("team-head");
    login(&mut v, &bao.address, &role_id, &secret_id);
    add_from_bao(
        &mut v,
        "api",
        &target,
        "openbao:secret/team/api#token",
        "never",
    );
    let session = |v: &TestVault, n: i64| {
        let mut p = McpProc::spawn(v.command(&["mcp"]));
        p.initialize();
        let r = get(
            &mut p,
            1,
            "api",
            &format!("{}/echo?n={n}", target.base()),
            20,
        );
        assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
        p.close_stdin();
        p.finish(Duration::from_secs(10));
    };
    session(&v, 1);
    v.run(&["lock"], None).ok();
    let (old_seq, _) = remote_head(&bao);
    let backup = TempDir::new("team-head-backup");
    copy_dir(&v.vault_dir(), &backup.path().join("vault"));

    v.run(
        &["unlock", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    session(&v, 2);
    v.run(&["lock"], None).ok();
    let (seq, hash) = remote_head(&bao);
    assert!(
        seq > old_seq,
        "the remote head moved forward: {old_seq} -> {seq}"
    );

    // The older copy comes back, anchors.jsonl with it.
    std::fs::remove_dir_all(v.vault_dir()).unwrap();
    copy_dir(&backup.path().join("vault"), &v.vault_dir());
    let out = v
        .run(
            &["verify", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .code(3);
    assert!(
        out.stdout.contains(&format!("seq {seq} hash {hash}")),
        "{}",
        out.stdout
    );
    let out = v
        .run(
            &["unlock", "--passphrase-stdin"],
            Some(&format!("{PASSPHRASE}\n")),
        )
        .code(3);
    assert!(
        out.stdout.contains(&format!("seq {seq} hash {hash}")),
        "{}",
        out.stdout
    );
    // Locked again, and OpenBao's head was not moved back.
    assert_eq!(remote_head(&bao), (seq, hash));
    let status = v.run(&["status"], None);
    assert_eq!(status.code, 4, "locked again: {status:?}");
}
