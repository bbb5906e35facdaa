//! Unit tests of credential validation and the add / edit / rm service.
use super::*;
use crate::store::Store;

#[test]
fn hosts_normalize_and_ambiguous_encodings_are_refused() {
    let ok = |s: &str| parse_host(s, "https").unwrap();
    assert_eq!(
        ok("API.Example.com"),
        ("https".into(), "api.example.com".into(), 443)
    );
    assert_eq!(
        ok("https://api.example.com:8443/"),
        ("https".into(), "api.example.com".into(), 8443)
    );
    assert_eq!(
        ok("http://127.0.0.1:8080"),
        ("http".into(), "127.0.0.1".into(), 8080)
    );
    assert_eq!(ok("http://[::1]:9"), ("http".into(), "::1".into(), 9));
    assert_eq!(
        ok("[::ffff:10.0.0.1]"),
        ("https".into(), "10.0.0.1".into(), 443)
    );
    for bad in [
        "http://api.example.com",  // plain http off loopback
        "user:pw@api.example.com", // userinfo
        "https://api.example.com/v1",
        "2130706433",
        "0x7f000001",
        "127.1",
        "ftp://x.example",
        "api.example.com:0",
        "api.example.com:99999",
        "exa mple.com",
        "-bad.example",
        "",
        "127.0.0.1:8080", // loopback: the scheme must be said
        "localhost",
        "[::1]:9",
    ] {
        assert!(parse_host(bad, "https").is_err(), "{bad} should be refused");
    }
}

#[test]
fn paths_methods_names_and_injection_rules() {
    assert!(check_path_prefix("/v1/").is_ok());
    for bad in ["v1", "/v1/../admin", "/./x", "/a?b", "/a%2f", "/a b"] {
        assert!(check_path_prefix(bad).is_err(), "{bad}");
    }
    assert_eq!(parse_methods("post, get,GET").unwrap(), vec!["GET", "POST"]);
    assert!(parse_methods("GET,CONNECT").is_err());
    assert!(check_name("name", "prod-web.1_a").is_ok());
    for bad in ["", "-x", "a b", "a/b", &"x".repeat(65)] {
        assert!(check_name("name", bad).is_err(), "{bad}");
    }
    let header = |name: &str, format: &str| {
        HttpAuth::Header {
            name: name.into(),
            format: format.into(),
        }
        .check()
    };
    assert!(header("Authorization", "Token {secret}").is_ok());
    assert!(header("Host", "{secret}").is_err());
    assert!(header("X-Key", "no placeholder").is_err());
    assert!(header("X-Key", "{secret}{secret}").is_err());
    assert!(header("Bad Name", "{secret}").is_err());
    assert!(HttpAuth::Basic {
        username: "a:b".into()
    }
    .check()
    .is_err());
    assert!(HttpAuth::Query {
        param: "api_key".into()
    }
    .check()
    .is_ok());
    assert!(HttpAuth::Query {
        param: "a&b".into()
    }
    .check()
    .is_err());
    assert!(ssh::check_host_key(&format!("SHA256:{}", "a".repeat(43))).is_ok());
    assert!(ssh::check_host_key("MD5:aa").is_err());
}

#[test]
fn secrets_with_line_breaks_never_reach_a_header() {
    assert!(Secret::new(b"abc\r\nX-Evil: 1".to_vec())
        .check(true)
        .is_err());
    assert!(Secret::new(Vec::new()).check(false).is_err());
    assert!(Secret::new(vec![b'a'; MAX_SECRET_BYTES + 1])
        .check(false)
        .is_err());
    assert_eq!(
        format!("{:?}", Secret::new(b"hunter2".to_vec())),
        "Secret(<redacted>)"
    );
}

#[test]
fn a_key_login_stores_only_the_whole_key_it_names() {
    use russh::keys::ssh_key::private::Ed25519Keypair;
    use russh::keys::{HashAlg, PrivateKey};
    let key = |seed: u8| PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]));
    let pem = |k: &PrivateKey| {
        let text = k.to_openssh(russh::keys::ssh_key::LineEnding::LF).unwrap();
        Secret::new(text.as_bytes().to_vec())
    };
    let (a, b) = (key(1), key(2));
    let auth = SshAuth::Key {
        algorithm: "ssh-ed25519".into(),
        fingerprint: a.public_key().fingerprint(HashAlg::Sha256).to_string(),
    };
    assert!(ssh::check_key_secret(&auth, &pem(&a)).is_ok());
    // Another key, the first line of this one (what `--secret-file` stored), or text: refused.
    assert!(ssh::check_key_secret(&auth, &pem(&b)).is_err());
    let first_line = b"-----BEGIN OPENSSH PRIVATE KEY-----".to_vec();
    assert!(ssh::check_key_secret(&auth, &Secret::new(first_line)).is_err());
    assert!(ssh::check_key_secret(&SshAuth::Password, &Secret::new(b"pw".to_vec())).is_ok());
}

fn store(tag: &str) -> Store {
    crate::store::test_store(&format!("cred-{tag}"), "vlt_t")
}

#[test]
fn add_edit_remove_journal_every_change_and_never_the_secret() {
    let mut s = store("svc");
    let key = crate::keys::ApproverKey::generate();
    let decoy = "DECOY-svc-4e1f0a";
    add_as_approver(&mut s, &key, "vlt_t", test_bearer("api", decoy)).unwrap();
    assert!(matches!(
        add_as_approver(&mut s, &key, "vlt_t", test_bearer("api", "x")),
        Err(CredentialError::Exists { .. })
    ));
    let edited = edit_as_approver(
        &mut s,
        &key,
        "vlt_t",
        ("default", "api"),
        Edit {
            approval: Some(Approval::Writes),
            secret: Some(Secret::new(b"DECOY-new-77".to_vec())),
            ..Edit::default()
        },
    )
    .unwrap();
    assert_eq!(edited.version, 2);
    assert_eq!(edited.approval, Approval::Writes);
    assert!(matches!(
        edit_as_approver(&mut s, &key, "vlt_t", ("default", "api"), Edit::default()),
        Err(CredentialError::NothingToChange)
    ));
    let row = crate::store::CredentialRow::find(s.conn(), "default", "api")
        .unwrap()
        .unwrap();
    assert_eq!(row.secret(s.conn()).unwrap().as_slice(), b"DECOY-new-77");
    assert!(matches!(
        get(&s, "other", "api"),
        Err(CredentialError::NotFound { .. })
    ));
    let trust = crate::approvals::Trust::new("vlt_t", &key);
    let listed = list(&s, &trust, None).unwrap();
    assert!(listed[0].signed && listed[0].effective() == Approval::Writes);
    remove_as_approver(&mut s, &key, "vlt_t", ("default", "api")).unwrap();
    assert!(list(&s, &trust, None).unwrap().is_empty());
    let kinds: Vec<(String, String)> = s
        .conn()
        .prepare("SELECT kind, body FROM audit ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let names: Vec<&str> = kinds.iter().map(|k| k.0.as_str()).collect();
    assert_eq!(
        names,
        ["credential.add", "credential.edit", "credential.rm"]
    );
    assert!(
        kinds[1].1.contains(r#""changed":["approval","secret"]"#),
        "{}",
        kinds[1].1
    );
    for (_, body) in &kinds {
        assert!(
            !body.contains("DECOY"),
            "a secret reached the journal: {body}"
        );
    }
}

/// Every change needs the approver's signature over exactly the state it leads to; without it (a
/// same-uid process with the socket but no passphrase), or over another state, nothing changes.
#[test]
fn changes_without_the_approvers_signature_change_nothing() {
    let mut s = store("unsigned");
    let key = crate::keys::ApproverKey::generate();
    let other = crate::keys::ApproverKey::generate();
    let trust = crate::approvals::Trust::new("vlt_t", &key);
    let rows = |s: &Store| -> i64 {
        s.conn()
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap()
    };
    // Add: unsigned, signed by another key, or signed for another binding.
    let new = test_bearer("api", "tok");
    let mut wider = as_added(&new);
    if let Target::Http(h) = &mut wider.target {
        h.path_prefix = "/".into();
        h.host = "evil.example".into();
    }
    for sig in [
        String::new(),
        policy_signature(&other, "vlt_t", &as_added(&new)),
        policy_signature(&key, "vlt_t", &wider),
        policy_signature(&key, "vlt_other", &as_added(&new)),
    ] {
        let new = NewCredential {
            id: new.id.clone(),
            ..test_bearer("api", "tok")
        };
        assert!(matches!(
            add(&mut s, &trust, new, &sig),
            Err(CredentialError::Unsigned(_))
        ));
    }
    assert_eq!(rows(&s), 0);
    let c = add_as_approver(&mut s, &key, "vlt_t", new).unwrap();
    let before = rows(&s);
    // Edit: every binding, unsigned or signed for another result; then a stale version.
    for change in [
        Edit {
            path_prefix: Some("/admin/".into()),
            ..Edit::default()
        },
        Edit {
            methods: Some(Some(vec!["DELETE".into()])),
            ..Edit::default()
        },
        Edit {
            allow_headers: Some(vec!["x-http-method-override".into()]),
            ..Edit::default()
        },
        Edit {
            approval: Some(Approval::Never),
            ..Edit::default()
        },
        Edit {
            secret: Some(Secret::new(b"attacker-token".to_vec())),
            ..Edit::default()
        },
    ] {
        let e = edit(&mut s, &trust, "default", "api", 1, change, "00");
        assert!(matches!(e, Err(CredentialError::Unsigned(_))), "{e:?}");
    }
    let mut signed_other = c.clone();
    apply(
        &mut signed_other,
        &Edit {
            approval: Some(Approval::Writes),
            ..Edit::default()
        },
    )
    .unwrap();
    let sig = policy_signature(&key, "vlt_t", &signed_other);
    let never = Edit {
        approval: Some(Approval::Never),
        ..Edit::default()
    };
    assert!(matches!(
        edit(&mut s, &trust, "default", "api", 1, never, &sig),
        Err(CredentialError::Unsigned(_))
    ));
    let writes = Edit {
        approval: Some(Approval::Writes),
        ..Edit::default()
    };
    assert!(matches!(
        edit(&mut s, &trust, "default", "api", 7, writes, &sig),
        Err(CredentialError::Stale { .. })
    ));
    // Remove: unsigned, another credential's, another version's.
    let forged = crate::approvals::Signed {
        payload: "{}".into(),
        signature: "00".into(),
    };
    assert!(matches!(
        remove(&mut s, &trust, "default", "api", &forged),
        Err(CredentialError::Unsigned(_))
    ));
    let mut old = c.clone();
    old.version = 0;
    let stale = sign_removal(&key, "vlt_t", &old);
    assert!(matches!(
        remove(&mut s, &trust, "default", "api", &stale),
        Err(CredentialError::Stale { .. })
    ));
    assert_eq!(rows(&s), before, "nothing was journaled");
    assert_eq!(get(&s, "default", "api").unwrap(), c, "nothing changed");
}
