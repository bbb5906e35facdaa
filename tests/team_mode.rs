//! Team mode's secrets through the real binary against a real `bao server -dev`: `vault openbao login`
//! (checked at once, signed, stored encrypted), credentials whose secret is a live reference
//! (`--secret-from openbao:MOUNT/PATH#FIELD`) read at dispatch and kept only in the agent's memory
//! for `[openbao] secret_cache_seconds`, an approval bound to the KV version it showed, and the
//! faults (sealed, refused login, missing field) ending `failed_before_send` with zero bytes at
//! the target. SSH certificates and the journal's head: `tests/team_ssh_head.rs`.
mod support;

use serde_json::json;
use std::time::Duration;
use support::bao::Bao;
use support::mcp::McpProc;
use support::target::HttpTarget;
use support::team::{add_from_bao, get, login};
use support::*;

const V1: &str = "DECOY_bao_v1/tok+77aa=1e";
const V2: &str = "DECOY_bao_v2/tok+88bb=2f";
const POLICY: &str = r#"path "secret/data/team/*" { capabilities = ["read"] }"#;

/// A vault logged in to `bao` with AppRole, the agent keeping secrets `cache_s` seconds.
fn team_vault(tag: &str, bao: &Bao, cache_s: u64) -> TestVault {
    let (role_id, secret_id) = bao.approle("agent", POLICY, "5m");
    let mut v = TestVault::init(tag);
    v.configure(&format!("[openbao]\nsecret_cache_seconds = {cache_s}\n"));
    login(&mut v, &bao.address, &role_id, &secret_id);
    v
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

/// The vault has no OpenBao login: `vault openbao status` says so, and a reference to a secret
/// in OpenBao is refused when added.
fn assert_not_logged_in(v: &mut TestVault, target: &HttpTarget) {
    let status = v.run(&["openbao", "status"], None).ok();
    assert!(status.stdout.contains("Not logged in"), "{}", status.stdout);
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
    let (role_id, secret_id) = bao.approle("agent", POLICY, "5m");
    let mut v = TestVault::init("team-badlogin");
    // A wrong secret_id, and a wrong role (a role_id OpenBao does not know): refused alike.
    for (role, secret) in [
        (role_id.as_str(), "not-the-secret-id"),
        ("no-such-role-id", secret_id.as_str()),
    ] {
        let out = v
            .run(
                &[
                    "openbao",
                    "login",
                    "--address",
                    &bao.address,
                    "--role-id",
                    role,
                    "--secret-id-stdin",
                    "--passphrase-stdin",
                ],
                Some(&format!("{PASSPHRASE}\n{secret}\n")),
            )
            .code(1);
        assert!(
            out.stderr.contains("refused the AppRole login")
                && out.stderr.contains("nothing was stored"),
            "{}",
            out.stderr
        );
        assert_no_leak("a refused login's error", out.stderr.as_bytes(), secret);
    }
    // Without a login a reference is refused when added.
    let target = HttpTarget::start(V1);
    assert_not_logged_in(&mut v, &target);

    // A secret_id that works when given but is used up (or expired: OpenBao answers both alike)
    // before the agent logs in: refused, said so. One use: the command's own check.
    bao.kv_put("team/api", json!({"token": V1}));
    let short = bao.admin("auth/approle/role/agent/secret-id", json!({"num_uses": 1}))["data"]
        ["secret_id"]
        .as_str()
        .unwrap()
        .to_owned();
    login(&mut v, &bao.address, &role_id, &short);
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

/// A token that expires between two calls is renewed or replaced by a fresh AppRole login (the
/// second call still runs); over TLS the server is checked against `--ca-file`; and a token given
/// as it is (`--token-stdin`) is used until it ends.
#[test]
fn tokens_are_kept_alive_tls_is_checked_and_a_given_token_works() {
    let bao = Bao::start_tls();
    bao.kv_put("team/api", json!({"token": V1}));
    let (role_id, secret_id) = bao.approle("agent", POLICY, "2s");
    let target = HttpTarget::start(V1);
    let mut v = TestVault::init("team-tokens");
    v.configure("[openbao]\nsecret_cache_seconds = 0\n");
    let login_args = |ca: Option<&str>| {
        let mut a = vec![
            "openbao".to_owned(),
            "login".into(),
            "--address".into(),
            bao.address.clone(),
            "--role-id".into(),
            role_id.clone(),
            "--secret-id-stdin".into(),
            "--passphrase-stdin".into(),
        ];
        if let Some(ca) = ca {
            a.extend(["--ca-file".into(), ca.to_owned()]);
        }
        a
    };
    // The platform does not trust the dev server's CA: refused, nothing stored.
    let args = login_args(None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = v
        .run(&args, Some(&format!("{PASSPHRASE}\n{secret_id}\n")))
        .code(1);
    assert!(
        out.stderr.contains("TLS") && out.stderr.contains("CA file"),
        "{}",
        out.stderr
    );
    let ca = bao.ca_file().display().to_string();
    let args = login_args(Some(&ca));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    v.run(&args, Some(&format!("{PASSPHRASE}\n{secret_id}\n")))
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
    let url = format!("{}/echo", target.base());
    for (id, pause) in [(1, 0), (2, 2500), (3, 1200), (4, 1200)] {
        std::thread::sleep(Duration::from_millis(pause));
        let r = get(&mut p, id, "api", &format!("{url}?n={id}"), 20);
        assert_eq!(
            r["structuredContent"]["state"], "completed",
            "call {id}: {r}"
        );
    }
    drop(p);

    // A token given as it is.
    let (_, t) = bao.api(
        "POST",
        "auth/token/create",
        Some(json!({"policies": ["agent"], "ttl": "10m"})),
    );
    let token = t["auth"]["client_token"].as_str().unwrap().to_owned();
    let out = v
        .run(
            &[
                "openbao",
                "login",
                "--address",
                &bao.address,
                "--ca-file",
                &ca,
                "--token-stdin",
                "--passphrase-stdin",
            ],
            Some(&format!("{PASSPHRASE}\n{token}\n")),
        )
        .ok();
    assert!(out.stdout.contains("the token works"), "{}", out.stdout);
    let mut p = McpProc::spawn(v.command(&["mcp"]));
    p.initialize();
    let r = get(&mut p, 1, "api", &format!("{url}?n=token"), 20);
    assert_eq!(r["structuredContent"]["state"], "completed", "{r}");
    drop(p);
    assert_eq!(target.requests().len(), 5);
    for f in files_under(&v.vault_dir()) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert_no_leak(&f.display().to_string(), &bytes, V1);
        assert_no_leak(&f.display().to_string(), &bytes, &token);
        assert_no_leak(&f.display().to_string(), &bytes, &secret_id);
    }
}

/// The attacker: a second process of the vault's own non-root uid speaks the agent's protocol on
/// its socket and asks it to log in to a server of the attacker's (to collect the secret_id it
/// would send, or to feed it secrets), and to log out. Without the approver's signature both are
/// refused: the attacker's server is never contacted, nothing is stored or journaled.
#[test]
fn a_same_uid_process_cannot_point_the_vault_at_its_own_server() {
    if !support::uid::run_unprivileged(
        "a_same_uid_process_cannot_point_the_vault_at_its_own_server",
    ) {
        return;
    }
    // The attacker's server counts every connection for the whole test, not one accept() at
    // the end (a connection a moment later would be missed).
    let lure = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let lure_address = format!("http://{}", lure.local_addr().unwrap());
    let lured = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = lured.clone();
    std::thread::spawn(move || {
        for _ in lure.incoming() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut v = TestVault::init("team-forged");
    let before = support::journal::kinds(&v);
    // The forged login is a genuine one in every part but its signature: this vault's id (any
    // same-uid process reads it), a fresh nonce and time, the commitment over the secret it
    // sends, in canonical form. Only the approver's signature can stop it (and
    // `.ci/mutants`' `request_signature` shows the test goes red without that check).
    let vault_id = std::fs::read_to_string(v.vault_dir().join("vault.id")).unwrap();
    let nonce = hex::encode(rand_bytes());
    let commitment = {
        let mut h = blake3::Hasher::new_derive_key("agent-vault openbao login commitment v1");
        h.update(nonce.as_bytes());
        h.update(b"a-secret-id");
        h.finalize().to_hex().to_string()
    };
    let payload = format!(
        r#"{{"commitment":"{commitment}","issued_at":"{}","login":{{"address":"{lure_address}","auth":{{"method":"approle","mount":"approle","role_id":"r"}},"journal_mount":"secret"}},"nonce":"{nonce}","op":"openbao_login","v":1,"vault_id":"{}"}}"#,
        agent_vault::wire::ts::format_millis(jiff::Timestamp::now()),
        vault_id.trim()
    );
    let forged = json!({"payload": payload, "signature": "00".repeat(64)});
    let requests = [
        json!({"op": "openbao_login", "request": forged, "secret": hex::encode("a-secret-id")}),
        json!({"op": "openbao_login", "request": {"payload": "{}", "signature": ""}, "secret": "00"}),
        json!({"op": "openbao_logout", "request": forged}),
    ];
    for (i, req) in requests.iter().enumerate() {
        let mut c = support::raw::RawClient::cli(&v);
        let reply = c.try_ask(2 + i as u64, req.clone());
        assert!(
            reply.as_ref().is_none_or(|r| r["kind"] == "error"),
            "{req} was answered {reply:?}"
        );
    }
    assert_not_logged_in(&mut v, &HttpTarget::start(V1));
    // A last look after the agent had time to act on anything it took.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(
        lured.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the agent contacted the attacker's server"
    );
    let after = support::journal::kinds(&v);
    assert!(
        after[before.len()..]
            .iter()
            .all(|k| !k.starts_with("openbao.")),
        "{:?}",
        &after[before.len()..]
    );
}

/// 16 bytes from the OS (a nonce no earlier request used).
fn rand_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .unwrap();
    b
}
