//! Team mode through the real binary against a real `bao server -dev`: `vault openbao login`
//! (checked at once, signed, stored encrypted), credentials whose secret is a live reference
//! (`--secret-from openbao:MOUNT/PATH#FIELD`) read at dispatch and kept only in the agent's memory
//! for `[openbao] secret_cache_seconds`, an approval bound to the KV version it showed, and the
//! faults (sealed, refused login, missing field) ending `failed_before_send` with zero bytes at
//! the target.
mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::bao::Bao;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::*;

const V1: &str = "DECOY_bao_v1/tok+77aa=1e";
const V2: &str = "DECOY_bao_v2/tok+88bb=2f";
const POLICY: &str = r#"path "secret/data/team/*" { capabilities = ["read"] }"#;

/// A vault logged in to `bao` with AppRole, the agent keeping secrets `cache_s` seconds.
fn team_vault(tag: &str, bao: &Bao, cache_s: u64) -> TestVault {
    let (role_id, secret_id) = bao.approle("agent", POLICY, "5m");
    let mut v = TestVault::init(tag);
    v.configure(&format!("[openbao]\nsecret_cache_seconds = {cache_s}\n"));
    let out = v
        .run(
            &[
                "openbao",
                "login",
                "--address",
                &bao.address,
                "--role-id",
                &role_id,
                "--secret-id-stdin",
                "--passphrase-stdin",
            ],
            Some(&format!("{PASSPHRASE}\n{secret_id}\n")),
        )
        .ok();
    assert!(
        out.stdout.contains("Logged in to OpenBao"),
        "{}",
        out.stdout
    );
    assert_no_leak("openbao login output", out.stdout.as_bytes(), &secret_id);
    v
}

fn add_from_bao(
    v: &mut TestVault,
    name: &str,
    target: &HttpTarget,
    reference: &str,
    approval: &str,
) {
    v.run_pp(
        &[
            "add",
            "http",
            name,
            "--host",
            &target.base(),
            "--bearer",
            "--secret-from",
            reference,
            "--approval",
            approval,
        ],
        None,
    )
    .ok();
}

fn get(p: &mut McpProc, id: i64, credential: &str, url: &str, wait_s: u64) -> Value {
    let r = p.call(
        id,
        "http_request",
        json!({"credential": credential, "method": "GET", "url": url, "wait_s": wait_s}),
    );
    assert!(r.get("error").is_none(), "JSON-RPC error: {r}");
    r["result"].clone()
}

fn bearer_of(target: &HttpTarget, n: usize) -> String {
    target.requests()[n]["headers"]["authorization"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every file of the vault directory, and the journal's rows, are free of both versions.
fn assert_nowhere_on_disk(v: &TestVault) {
    for f in files_under(&v.vault_dir()) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert_no_leak(&f.display().to_string(), &bytes, V1);
        assert_no_leak(&f.display().to_string(), &bytes, V2);
    }
}

#[test]
fn a_get_carries_the_kv_secret_and_a_new_version_after_the_window() {
    let bao = Bao::start();
    bao.kv_put("team/api", json!({"token": V1}));
    let target = HttpTarget::start(V1);
    let mut v = team_vault("team-get", &bao, 2);
    add_from_bao(
        &mut v,
        "api",
        &target,
        "openbao:secret/team/api#token",
        "never",
    );
    let listed = v.run(&["list"], None).ok();
    assert!(
        listed
            .stdout
            .contains("secret from openbao:secret/team/api#token"),
        "{}",
        listed.stdout
    );

    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let url = format!("{}/echo", target.base());
    let r = get(&mut p, 1, "api", &url, 20);
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(bearer_of(&target, 0), format!("Bearer {V1}"));

    // A new version in OpenBao: inside the window the cached one is still sent, after it the new.
    assert_eq!(bao.kv_put("team/api", json!({"token": V2})), 2);
    let r = get(&mut p, 2, "api", &format!("{url}?n=2"), 20);
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(
        bearer_of(&target, 1),
        format!("Bearer {V1}"),
        "inside the cache window"
    );
    std::thread::sleep(Duration::from_millis(2300));
    let r = get(&mut p, 3, "api", &format!("{url}?n=3"), 20);
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    assert_eq!(
        bearer_of(&target, 2),
        format!("Bearer {V2}"),
        "after the window"
    );
    let text = r.to_string();
    assert_no_leak("tool result", text.as_bytes(), V2);

    // The journal names the version each action sent.
    let log = v.run(&["log", "--json"], None).ok();
    assert!(
        log.stdout.contains("OpenBao secret version 1"),
        "{}",
        log.stdout
    );
    assert!(
        log.stdout.contains("OpenBao secret version 2"),
        "{}",
        log.stdout
    );
    let status = v.run(&["openbao", "status"], None).ok();
    assert!(status.stdout.contains(&bao.address), "{}", status.stdout);
    assert!(
        status.stdout.contains("token valid for"),
        "{}",
        status.stdout
    );
    drop(p);
    v.run(&["verify"], None).ok();
    assert_nowhere_on_disk(&v);
    let _ = v.run(&["lock"], None);
    assert_nowhere_on_disk(&v);
}

#[test]
fn an_approval_sends_the_version_its_card_showed() {
    let bao = Bao::start();
    bao.kv_put("team/api", json!({"token": V1}));
    let target = HttpTarget::start(V1);
    let mut v = team_vault("team-approve", &bao, 0);
    add_from_bao(
        &mut v,
        "api",
        &target,
        "openbao:secret/team/api#token",
        "each",
    );
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let r = get(&mut p, 1, "api", &format!("{}/echo", target.base()), 0);
    assert_eq!(r["structuredContent"]["state"], "pending", "{r}");
    let act = r["structuredContent"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = v.run(&["pending", "--json"], None).ok();
    assert!(
        shown.stdout.contains("OpenBao secret version 1"),
        "the queue names the version: {}",
        shown.stdout
    );
    // The secret moves on while the card waits; the approval still sends what it showed.
    bao.kv_put("team/api", json!({"token": V2}));
    v.run(
        &["approve", "--id", &act, "--approve", "--passphrase-stdin"],
        Some(&format!("{PASSPHRASE}\n")),
    )
    .ok();
    let done = p.call(2, "get_action", json!({"action_id": act, "wait_s": 20}));
    assert_eq!(
        done["result"]["structuredContent"]["state"], "completed",
        "{done}"
    );
    assert_eq!(target.requests().len(), 1);
    assert_eq!(bearer_of(&target, 0), format!("Bearer {V1}"));
    drop(p);
    assert_nowhere_on_disk(&v);
}

/// The reason a failed call gives, with zero requests at the target.
fn failed(p: &mut McpProc, id: i64, credential: &str, target: &HttpTarget) -> String {
    let before = target.requests().len();
    let r = get(p, id, credential, &format!("{}/echo", target.base()), 20);
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["state"], "failed_before_send", "{r}");
    assert_eq!(
        target.requests().len(),
        before,
        "nothing reached the target: {r}"
    );
    r.to_string()
}

#[test]
fn faults_fail_before_send_and_say_what_to_do() {
    let bao = Bao::start();
    bao.kv_put("team/api", json!({"token": V1}));
    let target = HttpTarget::start(V1);
    let mut v = team_vault("team-faults", &bao, 0);
    add_from_bao(
        &mut v,
        "nofield",
        &target,
        "openbao:secret/team/api#nope",
        "never",
    );
    add_from_bao(
        &mut v,
        "nopath",
        &target,
        "openbao:secret/team/absent#token",
        "never",
    );
    add_from_bao(
        &mut v,
        "api",
        &target,
        "openbao:secret/team/api#token",
        "never",
    );
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();

    let why = failed(&mut p, 1, "nofield", &target);
    assert!(
        why.contains("openbao_missing") && why.contains("`nope`") && why.contains("token"),
        "{why}"
    );
    let why = failed(&mut p, 2, "nopath", &target);
    assert!(why.contains("openbao_missing"), "{why}");
    let ok = get(&mut p, 3, "api", &format!("{}/echo", target.base()), 20);
    assert_eq!(ok["structuredContent"]["state"], "completed", "{ok}");

    // A path the token's policy does not allow: 403, said as such.
    add_from_bao(
        &mut v,
        "other",
        &target,
        "openbao:secret/other/api#token",
        "never",
    );
    let why = failed(&mut p, 4, "other", &target);
    assert!(
        why.contains("openbao_forbidden") && why.contains("policies"),
        "{why}"
    );

    bao.seal();
    let why = failed(&mut p, 5, "api", &target);
    assert!(
        why.contains("openbao_sealed") && why.contains("unseal"),
        "{why}"
    );
    drop(bao);
    let why = failed(&mut p, 6, "api", &target);
    assert!(why.contains("openbao_unreachable"), "{why}");
    drop(p);
    assert_eq!(
        target.requests().len(),
        1,
        "only the one good call reached the target"
    );
    assert_nowhere_on_disk(&v);
}

#[test]
fn a_login_that_does_not_work_is_not_stored() {
    let bao = Bao::start();
    let (role_id, _) = bao.approle("agent", POLICY, "5m");
    let mut v = TestVault::init("team-badlogin");
    let out = v
        .run(
            &[
                "openbao",
                "login",
                "--address",
                &bao.address,
                "--role-id",
                &role_id,
                "--secret-id-stdin",
                "--passphrase-stdin",
            ],
            Some(&format!("{PASSPHRASE}\nnot-the-secret-id\n")),
        )
        .code(1);
    assert!(
        out.stderr.contains("refused the AppRole login")
            && out.stderr.contains("nothing was stored"),
        "{}",
        out.stderr
    );
    let status = v.run(&["openbao", "status"], None).ok();
    assert!(status.stdout.contains("Not logged in"), "{}", status.stdout);
    // Without a login a reference is refused when added.
    let target = HttpTarget::start(V1);
    let refused = v
        .run_pp(
            &[
                "add",
                "http",
                "api",
                "--host",
                &target.base(),
                "--bearer",
                "--secret-from",
                "openbao:secret/team/api#token",
            ],
            None,
        )
        .code(1);
    assert!(
        refused.stderr.contains("not logged in to OpenBao"),
        "{}",
        refused.stderr
    );

    // A secret_id that works when given but is used up (or expired: OpenBao answers both alike)
    // before the agent logs in: refused, said so. One use: the command's own check.
    bao.kv_put("team/api", json!({"token": V1}));
    let short = bao.admin("auth/approle/role/agent/secret-id", json!({"num_uses": 1}))["data"]
        ["secret_id"]
        .as_str()
        .unwrap()
        .to_owned();
    v.run(
        &[
            "openbao",
            "login",
            "--address",
            &bao.address,
            "--role-id",
            &role_id,
            "--secret-id-stdin",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n{short}\n")),
    )
    .ok();
    add_from_bao(
        &mut v,
        "api",
        &target,
        "openbao:secret/team/api#token",
        "never",
    );
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let why = failed(&mut p, 1, "api", &target);
    assert!(
        why.contains("openbao_forbidden") && why.contains("secret_id"),
        "{why}"
    );
    let status = v.run(&["openbao", "status"], None).code(1);
    assert!(status.stdout.contains("last error"), "{}", status.stdout);
    let status = v.run(&["status"], None).ok();
    assert!(
        status.stdout.contains("the last call FAILED"),
        "{}",
        status.stdout
    );
    let doctor = v.run(&["doctor"], None).code(1);
    assert!(
        doctor.stdout.contains("OpenBao") && doctor.stdout.contains("secret_id"),
        "{}",
        doctor.stdout
    );
    // Logged out: the call says how to log in, and nothing is sent.
    v.run_pp(&["openbao", "logout"], None).ok();
    let why = failed(&mut p, 2, "api", &target);
    assert!(why.contains("vault openbao login"), "{why}");
    drop(p);
    assert_eq!(target.requests().len(), 0);
    let log = v.run(&["log", "--json"], None).ok();
    assert_no_leak("journal", log.stdout.as_bytes(), &short);
}

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
    v.run(
        &[
            "openbao",
            "login",
            "--address",
            &bao.address,
            "--role-id",
            &role_id,
            "--secret-id-stdin",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n{secret_id}\n")),
    )
    .ok();
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
    v.run(&["verify", "--file", export.to_str().unwrap()], None)
        .ok();
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
    v.run(
        &[
            "openbao",
            "login",
            "--address",
            &bao.address,
            "--role-id",
            &role_id,
            "--secret-id-stdin",
            "--passphrase-stdin",
        ],
        Some(&format!("{PASSPHRASE}\n{secret_id}\n")),
    )
    .ok();
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
