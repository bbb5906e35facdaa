//! Tests that `cargo mutants` asked for (issue 49): each pins a behaviour whose mutant lived
//! through the rest of the suite. The pause switch reads the last pause row, not any row; the
//! store's approver key must be the key the person holds and agree with the journal's first row;
//! an `AuthorizedAction` carries its own hash, the team-mode source of its secret and the
//! secret supplied later, and never prints the secret.
use super::*;
use crate::wire::OpenBaoRef;

#[test]
fn a_resume_after_a_pause_reads_as_not_paused() {
    let (mut s, _c, key) = setup_keyed("surv-pause");
    assert_eq!(paused(s.conn()).unwrap(), None);
    pause(&mut s, "look").unwrap();
    assert_eq!(paused(s.conn()).unwrap().as_deref(), Some("look"));
    let trust = current_trust();
    assert!(super::super::resume(&mut s, &trust, &sign_resume(&key, "vlt_t")).unwrap());
    // The last row is the resume, whose body is not a pause's: not paused, and no error.
    assert_eq!(paused(s.conn()).unwrap(), None);
}

#[test]
fn the_store_must_hold_the_persons_approver_key_as_its_first_row_says() {
    let (s, _c, key) = setup_keyed("surv-store");
    let trust = current_trust();
    trust.check_store(s.conn()).unwrap();
    // Another approver key: refused.
    let other = Trust::new("vlt_t", &ApproverKey::generate());
    assert!(other.check_store(s.conn()).is_err());
    // The same key, another vault: refused.
    let elsewhere = Trust::new("vlt_other", &key);
    assert!(elsewhere.check_store(s.conn()).is_err());
    // meta swapped for another key that the journal's first row does not name: refused, even
    // for a trust that holds the swapped-in key.
    let swapped = ApproverKey::generate();
    let tx = s.conn();
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'approver_public_key'",
        [swapped.public_hex()],
    )
    .unwrap();
    assert!(trust.check_store(s.conn()).is_err());
    assert!(Trust::new("vlt_t", &swapped).check_store(s.conn()).is_err());
}

fn authorized(c: &Credential, version: Option<u64>) -> AuthorizedAction {
    let mut req = validate_http(
        c,
        HttpArgs {
            credential: "api".into(),
            method: "GET".into(),
            url: "https://api.example.com/x".into(),
            ..HttpArgs::default()
        },
    )
    .unwrap();
    req.set_secret_version(version);
    AuthorizedAction::new(
        "act_1".into(),
        "hash-of-act-1".into(),
        c.clone(),
        req,
        crate::credentials::Secret::new(b"tok-local".to_vec()),
    )
}

#[test]
fn an_authorized_action_carries_its_hash_its_secrets_source_and_never_prints_the_secret() {
    let (_s, c) = setup("surv-auth");
    let local = authorized(&c, None);
    assert_eq!(local.action_hash(), "hash-of-act-1");
    assert_eq!(local.action_id(), "act_1");
    assert_eq!(local.from_openbao(), None);
    assert_eq!(local.secret().expose(), b"tok-local");
    let shown = format!("{local:?}");
    assert!(
        shown.contains("act_1") && shown.contains("hash-of-act-1"),
        "{shown}"
    );
    assert!(
        shown.contains("<redacted>") && !shown.contains("tok-local"),
        "{shown}"
    );

    let mut team = c.clone();
    let r = OpenBaoRef {
        mount: "kv".into(),
        path: "app".into(),
        field: "token".into(),
    };
    if let crate::wire::Target::Http(t) = &mut team.target {
        t.secret_from = Some(r.clone());
    }
    let mut remote = authorized(&team, Some(3));
    assert_eq!(remote.from_openbao(), Some(&FromOpenBao::Kv(r, 3)));
    remote.supply_secret(crate::credentials::Secret::new(
        b"tok-from-openbao".to_vec(),
    ));
    assert_eq!(remote.secret().expose(), b"tok-from-openbao");
}
