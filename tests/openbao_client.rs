//! The OpenBao client (`agent_vault::openbao`) against a real `bao server -dev` on loopback
//! (tests/support/bao.rs): AppRole login, renewal and lookup; a KV v2 read carries the value and
//! its version, and the next read after a new version carries the new one; check-and-set refuses
//! a stale version and leaves the secret as it was; the SSH CA signs a user certificate that
//! `ssh-keygen -L` reads as signed by that CA for that principal; a sealed server, a refused
//! login (wrong or expired secret_id), a denied path, a missing path and a missing field each
//! give their own error; an unreachable server fails within the deadline; and no error or Debug
//! output holds a token, a secret_id or a KV value.
mod support;

use agent_vault::openbao::{Client, Config, Error, Login, Refusal, Token};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use support::bao::Bao;
use support::TempDir;

const POLICY: &str = r#"
path "secret/data/team/*" { capabilities = ["create", "read", "update"] }
path "secret/metadata/team/*" { capabilities = ["read"] }
path "ssh/sign/dev" { capabilities = ["update"] }
"#;

fn client(bao: &Bao) -> Client {
    Client::new(&Config::new(&bao.address)).unwrap()
}

/// A server with the `agent` AppRole (tokens live 60 s) and a token from logging in with it.
fn logged_in(bao: &Bao) -> (Client, Login) {
    let (role_id, secret_id) = bao.approle("agent", POLICY, "60s");
    let c = client(bao);
    let login = c
        .login_approle("approle", &role_id, &SecretString::from(secret_id))
        .unwrap();
    (c, login)
}

#[test]
fn approle_login_renews_and_looks_up_its_token() {
    let bao = Bao::start();
    eprintln!("bao server -dev was ready in {:?}", bao.ready_in);
    let (c, login) = logged_in(&bao);
    assert_eq!(login.lease, Duration::from_secs(60));
    assert!(login.renewable);
    assert!(login.policies.contains(&"agent".to_owned()), "{login:?}");
    assert!(!login.accessor.is_empty());

    let info = c.lookup_self(&login.token).unwrap();
    assert!(
        info.ttl <= Duration::from_secs(60) && info.ttl >= Duration::from_secs(50),
        "{info:?}"
    );
    assert!(info.policies.contains(&"agent".to_owned()));
    assert_eq!(info.display_name, "approle");
    assert!(info.expire_time.is_some());

    // Renewing asks for 5 minutes: the same token, a longer lease (within the role's 10 min max).
    let renewed = c
        .renew_self(&login.token, Some(Duration::from_secs(300)))
        .unwrap();
    assert_eq!(renewed.token.expose_secret(), login.token.expose_secret());
    assert_eq!(renewed.lease, Duration::from_secs(300));
    assert!(c.lookup_self(&login.token).unwrap().ttl > Duration::from_secs(250));
}

#[test]
fn kv_read_carries_the_value_and_its_version_and_then_the_next_version() {
    let bao = Bao::start();
    let (c, login) = logged_in(&bao);
    assert_eq!(
        bao.kv_put("team/api", json!({"token": "first-value", "user": "ci"})),
        1
    );
    let s = c
        .kv_read(&login.token, "secret", "team/api", "token", None)
        .unwrap();
    assert_eq!(
        (s.value.expose_secret(), s.version, s.field.as_str()),
        ("first-value", 1, "token")
    );

    assert_eq!(
        bao.kv_put("team/api", json!({"token": "second-value", "user": "ci"})),
        2
    );
    let s = c
        .kv_read(&login.token, "secret", "team/api", "token", None)
        .unwrap();
    assert_eq!((s.value.expose_secret(), s.version), ("second-value", 2));
    // An older version stays readable by number (an approval names the version it was given for).
    let old = c
        .kv_read(&login.token, "secret", "team/api", "token", Some(1))
        .unwrap();
    assert_eq!((old.value.expose_secret(), old.version), ("first-value", 1));
}

#[test]
fn check_and_set_refuses_a_stale_version_and_leaves_the_secret_as_it_was() {
    let bao = Bao::start();
    let (c, login) = logged_in(&bao);
    let t = &login.token;
    let head = |seq: &str| [("sequence", seq.to_owned())];
    let write = |seq: &str, cas| {
        let fields = head(seq);
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        c.kv_write(t, "secret", "team/journal-head", &fields, cas)
    };
    assert_eq!(write("10", Some(0)).unwrap(), 1);
    // cas 0 means "only if it does not exist yet": it does now.
    match write("5", Some(0)) {
        Err(Error::CasMismatch { path, cas: 0 }) => {
            assert_eq!(path, "secret/data/team/journal-head")
        }
        other => panic!("expected CasMismatch, got {other:?}"),
    }
    let meta = c.kv_metadata(t, "secret", "team/journal-head").unwrap();
    assert_eq!(meta.current_version, 1);
    assert_eq!(write("20", Some(meta.current_version)).unwrap(), 2);
    // A writer that read version 1 and writes after version 2 exists is refused.
    let e = write("15", Some(1)).unwrap_err();
    assert!(matches!(e, Error::CasMismatch { cas: 1, .. }), "{e:?}");
    assert!(e.to_string().contains("Read its metadata again"), "{e}");
    assert_eq!(
        c.kv_metadata(t, "secret", "team/journal-head")
            .unwrap()
            .current_version,
        2
    );
    let now = c
        .kv_read(t, "secret", "team/journal-head", "sequence", None)
        .unwrap();
    assert_eq!((now.value.expose_secret(), now.version), ("20", 2));
}

#[test]
fn the_ssh_ca_signs_a_user_certificate_for_the_principal() {
    let bao = Bao::start();
    let ca = bao.ssh_ca("dev", "deploy");
    let (c, login) = logged_in(&bao);
    let dir = TempDir::new("bao-ssh");
    let key = dir.path().join("id_ed25519");
    let st = Command::new("/usr/bin/ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let cert = c
        .ssh_sign(
            &login.token,
            "ssh",
            "dev",
            &public,
            &["deploy"],
            Duration::from_secs(120),
        )
        .unwrap();
    assert!(
        cert.certificate
            .starts_with("ssh-ed25519-cert-v01@openssh.com "),
        "{cert:?}"
    );

    let cert_file = dir.path().join("id_ed25519-cert.pub");
    std::fs::write(&cert_file, format!("{}\n", cert.certificate)).unwrap();
    let shown = Command::new("/usr/bin/ssh-keygen")
        .arg("-L")
        .arg("-f")
        .arg(&cert_file)
        .output()
        .unwrap();
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("Type: ssh-ed25519-cert-v01@openssh.com user certificate"),
        "{shown}"
    );
    let ca_file = dir.path().join("ca.pub");
    std::fs::write(&ca_file, format!("{ca}\n")).unwrap();
    let ca_fp = Command::new("/usr/bin/ssh-keygen")
        .arg("-lf")
        .arg(&ca_file)
        .output()
        .unwrap();
    let ca_fp = String::from_utf8(ca_fp.stdout).unwrap();
    let ca_fp = ca_fp.split_whitespace().nth(1).unwrap();
    assert!(
        shown.contains(&format!("Signing CA: ED25519 {ca_fp}")),
        "{shown}\nCA {ca_fp}"
    );
    let serial = u64::from_str_radix(&cert.serial, 16).unwrap();
    assert!(
        shown.contains(&format!("Serial: {serial}")),
        "{shown}\nserial {}",
        cert.serial
    );
    let principals: Vec<&str> = shown
        .split("Principals:")
        .nth(1)
        .unwrap()
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("                "))
        .map(str::trim)
        .collect();
    assert_eq!(principals, ["deploy"], "{shown}");

    // A principal the role does not allow: OpenBao's own words, and no certificate.
    let e = c
        .ssh_sign(
            &login.token,
            "ssh",
            "dev",
            &public,
            &["root"],
            Duration::from_secs(120),
        )
        .unwrap_err();
    match &e {
        Error::Http {
            status: 400,
            message,
            ..
        } => assert!(message.contains("valid_principals"), "{e}"),
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn a_sealed_server_is_named_as_sealed() {
    let bao = Bao::start();
    let (c, login) = logged_in(&bao);
    bao.kv_put("team/api", json!({"token": "v"}));
    bao.seal();
    let e = c
        .kv_read(&login.token, "secret", "team/api", "token", None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Sealed { address } if address == &bao.address),
        "{e:?}"
    );
    assert!(e.to_string().contains("bao operator unseal"), "{e}");
    let e = c
        .login_approle("approle", "any", &SecretString::from("any-secret"))
        .unwrap_err();
    assert!(matches!(e, Error::Sealed { .. }), "{e:?}");
    let status = c.seal_status().unwrap();
    assert!(status.sealed && status.initialized, "{status:?}");
    assert_eq!(status.version, "2.7.2");
}

#[test]
fn a_wrong_or_expired_secret_id_and_a_denied_path_are_forbidden() {
    let bao = Bao::start();
    let (role_id, _) = bao.approle("agent", POLICY, "60s");
    let c = client(&bao);
    let e = c
        .login_approle(
            "approle",
            &role_id,
            &SecretString::from("not-the-secret-id"),
        )
        .unwrap_err();
    assert!(
        matches!(&e, Error::Forbidden { refusal: Refusal::Login, path } if path == "auth/approle/login"),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .contains("Ask the OpenBao admin for a new secret_id"),
        "{e}"
    );

    let short = bao.secret_id("agent", Some("1s"));
    std::thread::sleep(Duration::from_millis(2100));
    let e = c
        .login_approle("approle", &role_id, &SecretString::from(short))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Forbidden {
                refusal: Refusal::Login,
                ..
            }
        ),
        "{e:?}"
    );

    // A good login, then a path outside the role's policy.
    let login = c
        .login_approle(
            "approle",
            &role_id,
            &SecretString::from(bao.secret_id("agent", None)),
        )
        .unwrap();
    bao.kv_put("other/db", json!({"password": "p"}));
    let e = c
        .kv_read(&login.token, "secret", "other/db", "password", None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Forbidden { refusal: Refusal::Permission, path } if path == "secret/data/other/db"),
        "{e:?}"
    );
}

#[test]
fn a_missing_field_is_named_and_a_missing_path_is_not_found() {
    let bao = Bao::start();
    let (c, login) = logged_in(&bao);
    bao.kv_put("team/api", json!({"user": "ci", "token": "v"}));
    let e = c
        .kv_read(&login.token, "secret", "team/api", "password", None)
        .unwrap_err();
    match &e {
        Error::MissingField {
            path,
            version,
            field,
            fields,
        } => {
            assert_eq!(
                (path.as_str(), *version, field.as_str()),
                ("secret/data/team/api", 1, "password")
            );
            assert_eq!(fields, &["token", "user"]);
        }
        other => panic!("expected MissingField, got {other:?}"),
    }
    assert!(e.to_string().contains("no field `password`"), "{e}");

    let e = c
        .kv_read(&login.token, "secret", "team/nothing", "token", None)
        .unwrap_err();
    assert!(
        matches!(&e, Error::NotFound { path, .. } if path == "secret/data/team/nothing"),
        "{e:?}"
    );
    let e = c
        .kv_read(&login.token, "secret", "team/api", "token", Some(7))
        .unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e:?}");
}

#[test]
fn an_unreachable_server_fails_fast_and_a_silent_one_within_the_deadline() {
    // Nothing listens on the port: refused at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let c = Client::new(&Config::new(&format!("http://127.0.0.1:{port}"))).unwrap();
    let token = Token::new(SecretString::from("tok-unused"));
    let t0 = Instant::now();
    let e = c
        .kv_read(&token, "secret", "team/api", "token", None)
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(
        matches!(&e, Error::Unreachable { why, .. } if why.contains("refused")),
        "{e:?}"
    );
    assert!(e.to_string().contains("Check that the server runs"), "{e}");

    // A port that accepts (the kernel's backlog) but never answers: the overall deadline ends it.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut config = Config::new(&format!("http://{}", silent.local_addr().unwrap()));
    config.timeout = Duration::from_millis(800);
    let c = Client::new(&config).unwrap();
    let t0 = Instant::now();
    let e = c
        .kv_read(&token, "secret", "team/api", "token", None)
        .unwrap_err();
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(3),
        "{took:?}"
    );
    assert!(
        matches!(&e, Error::Unreachable { why, .. } if why.contains("deadline")),
        "{e:?}"
    );
}

#[test]
fn no_secret_value_is_in_an_error_or_a_debug_output() {
    const DECOY: &str = "decoy-7f3a9c1e-never-shown";
    let bao = Bao::start();
    let (role_id, _) = bao.approle("agent", POLICY, "60s");
    let c = client(&bao);
    let mut shown = Vec::new();
    let mut show = |what: &str, text: String| shown.push((what.to_owned(), text));

    // A secret_id that is the decoy: refused.
    let e = c
        .login_approle("approle", &role_id, &SecretString::from(DECOY))
        .unwrap_err();
    show("login error", format!("{e} {e:?}"));
    // A token that is the decoy: denied everywhere.
    let fake = Token::new(SecretString::from(DECOY));
    show("token debug", format!("{fake:?}"));
    for e in [
        c.kv_read(&fake, "secret", "team/api", "token", None)
            .unwrap_err(),
        c.kv_write(&fake, "secret", "team/api", &[("token", DECOY)], Some(0))
            .unwrap_err(),
        c.lookup_self(&fake).unwrap_err(),
        c.renew_self(&fake, None).unwrap_err(),
    ] {
        show("token error", format!("{e} {e:?}"));
    }

    // A real token: a KV value that is the decoy, read, and asked for with a missing field and
    // a stale check-and-set write.
    let login = c
        .login_approle(
            "approle",
            &role_id,
            &SecretString::from(bao.secret_id("agent", None)),
        )
        .unwrap();
    let real_token = login.token.expose_secret().to_owned();
    show(
        "login debug",
        format!("{login:?} {:?}", c.lookup_self(&login.token).unwrap()),
    );
    bao.kv_put("team/api", json!({"token": DECOY}));
    let read = c
        .kv_read(&login.token, "secret", "team/api", "token", None)
        .unwrap();
    assert_eq!(read.value.expose_secret(), DECOY);
    show("kv debug", format!("{read:?}"));
    let e = c
        .kv_read(&login.token, "secret", "team/api", "other", None)
        .unwrap_err();
    show("missing field", format!("{e} {e:?}"));
    let e = c
        .kv_write(
            &login.token,
            "secret",
            "team/api",
            &[("token", DECOY)],
            Some(0),
        )
        .unwrap_err();
    show("cas error", format!("{e} {e:?}"));
    bao.seal();
    let e = c
        .kv_read(&login.token, "secret", "team/api", "token", None)
        .unwrap_err();
    show("sealed", format!("{e} {e:?} {c:?}"));

    assert!(shown.len() >= 10);
    for (what, text) in &shown {
        assert!(!text.contains(DECOY), "{what} shows the decoy: {text}");
        assert!(
            !text.contains(&real_token),
            "{what} shows the token: {text}"
        );
    }
}

#[test]
fn tls_verifies_the_server_against_the_platform_roots_or_the_ca_file() {
    let bao = Bao::start_tls();
    assert!(bao.address.starts_with("https://127.0.0.1:"));
    // No CA file: the platform's roots do not know the dev server's CA.
    let e = client(&bao).seal_status().unwrap_err();
    assert!(
        matches!(&e, Error::Tls { why, .. } if why.contains("certificate was not accepted")),
        "{e:?}"
    );
    assert!(e.to_string().contains("CA file"), "{e}");

    // Its CA file: verified, and the API answers.
    let mut config = Config::new(&bao.address);
    config.ca_file = Some(bao.ca_file());
    let c = Client::new(&config).unwrap();
    assert!(!c.seal_status().unwrap().sealed);
    let token = Token::new(SecretString::from(bao.root_token.clone()));
    bao.kv_put("team/api", json!({"token": "over-tls"}));
    let s = c
        .kv_read(&token, "secret", "team/api", "token", None)
        .unwrap();
    assert_eq!(s.value.expose_secret(), "over-tls");

    // A CA file with no certificate in it is refused before any request.
    let dir = TempDir::new("bao-ca");
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    config.ca_file = Some(empty);
    let e = Client::new(&config).unwrap_err();
    assert!(
        matches!(&e, Error::CaFile { why, .. } if why.contains("no PEM certificate")),
        "{e:?}"
    );
}
