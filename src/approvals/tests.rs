//! Lifecycle tests on a real SQLCipher file: submit, idempotency, withdraw, expiry, journal rows.
use super::*;
use crate::credentials::{self, Approval};
use crate::keys::ApproverKey;
use crate::policy::{validate_http, HttpArgs};
use crate::store::set_meta;

fn setup(tag: &str) -> (Store, Credential) {
    let (s, c, _) = setup_keyed(tag);
    (s, c)
}

/// A store initialized like `vault init` does (vault id, approver public key in meta and in the
/// journal's first row), with one http credential `api`.
fn setup_keyed(tag: &str) -> (Store, Credential, ApproverKey) {
    let mut s = crate::store::test_store(&format!("appr-{tag}"), "vlt_t");
    let key = ApproverKey::generate();
    let tx = s.write().unwrap();
    set_meta(&tx, "approver_public_key", &key.public_hex()).unwrap();
    crate::audit::append(
        &tx,
        "vault.init",
        None,
        None,
        &serde_json::json!({"vault_id": "vlt_t", "approver_public_key": key.public_hex()}),
    )
    .unwrap();
    tx.commit().unwrap();
    let c = credentials::add(&mut s, credentials::test_bearer("api", "tok")).unwrap();
    (s, c, key)
}

/// Changes the `api` credential's approval (its version goes up, its policy signature is dropped).
fn set_approval(s: &mut Store, approval: Approval) -> Credential {
    crate::credentials::edit(
        s,
        "default",
        "api",
        crate::credentials::Edit {
            approval: Some(approval),
            ..Default::default()
        },
    )
    .unwrap()
}

fn submit_get<'a>(
    s: &mut Store,
    c: &'a Credential,
    url: &str,
    key: Option<&'a str>,
    expiry: Duration,
) -> Submitted {
    let req = validate_http(
        c,
        HttpArgs {
            credential: "api".into(),
            method: "GET".into(),
            url: url.into(),
            ..HttpArgs::default()
        },
    )
    .unwrap();
    submit(
        s,
        Submission {
            session_id: "ses_1",
            client: "test-client",
            profile: "default",
            credential: c,
            request: &req,
            idempotency_key: key,
            expiry,
            replay_window: Duration::from_secs(600),
        },
    )
    .unwrap()
}

#[test]
fn the_same_call_while_pending_is_the_same_action() {
    let (mut s, c) = setup("idem");
    let Submitted::Created(a) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(a.state, State::Pending);
    assert!(a.id.starts_with("act_"));
    let Submitted::Existing(b) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(a.id, b.id);
    let Submitted::Created(other) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        Some("k2"),
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_ne!(other.id, a.id);
    assert_eq!(list_pending(&s).unwrap().len(), 2);
    assert!(matches!(
        get(&s, "other-profile", &a.id),
        Err(ApprovalError::NotFound(_))
    ));
}

#[test]
fn withdraw_expire_and_journal() {
    let (mut s, c) = setup("life");
    let Submitted::Created(a) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/a",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    let w = withdraw(&mut s, "default", &a.id, "client cancelled").unwrap();
    assert_eq!(w.state, State::Withdrawn);
    assert!(matches!(
        withdraw(&mut s, "default", &a.id, "again"),
        Err(ApprovalError::NotPending { .. })
    ));
    let Submitted::Created(e) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        Duration::ZERO,
    ) else {
        panic!()
    };
    let expired = expire_due(&mut s).unwrap();
    assert_eq!(
        expired.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(),
        [e.id.as_str()]
    );
    let Submitted::Created(_) = submit_get(
        &mut s,
        &c,
        "https://api.example.com/c",
        None,
        Duration::from_secs(60),
    ) else {
        panic!()
    };
    assert_eq!(
        withdraw_session(&mut s, "ses_1", "client went away").unwrap(),
        1
    );
    let kinds: Vec<String> = s
        .conn()
        .prepare("SELECT kind FROM audit WHERE action_id IS NOT NULL ORDER BY seq")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        kinds,
        [
            "action.pending",
            "action.withdrawn",
            "action.pending",
            "action.expired",
            "action.pending",
            "action.withdrawn"
        ]
    );
    // The journal's last transition equals every action's state.
    for a in list_recent(&s, "default", None, 50).unwrap() {
        let last: String = s
            .conn()
            .query_row(
                "SELECT kind FROM audit WHERE action_id = ?1 ORDER BY seq DESC LIMIT 1",
                [&a.id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(last, format!("action.{}", a.state));
    }
}

fn created(s: Submitted) -> Action {
    match s {
        Submitted::Created(a) => a,
        other => panic!("expected a new action, got {other:?}"),
    }
}

fn must_refuse(s: &mut Store, id: &str, why: &str) {
    match claim(s, id).unwrap() {
        Claim::Go(_) => panic!("{why}: dispatch was authorized"),
        Claim::Refused(a) => assert_eq!(a.state, State::FailedBeforeSend, "{why}"),
        Claim::NotReady(a) => assert!(!matches!(a.state, State::Dispatched), "{why}: {a:?}"),
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn a_signed_approval_authorizes_exactly_once() {
    let (mut s, c, key) = setup_keyed("go");
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/ok",
        None,
        HOUR,
    ));
    assert!(
        matches!(claim(&mut s, &a.id).unwrap(), Claim::NotReady(_)),
        "pending is not dispatchable"
    );
    decide(&mut s, &key, &a.id, Verdict::Approve, HOUR).unwrap();
    let Claim::Go(auth) = claim(&mut s, &a.id).unwrap() else {
        panic!("a valid approval must dispatch")
    };
    assert_eq!(auth.action_id(), a.id);
    assert_eq!(auth.secret().expose(), b"tok");
    assert!(
        matches!(claim(&mut s, &a.id).unwrap(), Claim::NotReady(_)),
        "a second claim gets nothing"
    );
    let done = finish(
        &mut s,
        &a.id,
        &crate::exec::Outcome {
            state: State::Completed,
            result: serde_json::json!({"http": {"status": 200}}),
            reason: None,
        },
    )
    .unwrap();
    assert_eq!(done.state, State::Completed);
    // The same call again within the window is replayed, not re-run.
    assert!(matches!(
        submit_get(&mut s, &c, "https://api.example.com/ok", None, HOUR),
        Submitted::Replayed(_)
    ));
}

#[test]
fn forged_replayed_misapplied_and_stale_approvals_never_dispatch() {
    let (mut s, c, key) = setup_keyed("forge");
    // 1. A forged decision row with a bad signature, state flipped to approved by hand.
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/a",
        None,
        HOUR,
    ));
    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = ?1",
            [&a.id],
        )
        .unwrap();
    s.conn()
        .execute(
            "INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES ('dec_f', ?1, 'approve', 'n1', ?2, ?3, 'x')",
            rusqlite::params![a.id, format!(r#"{{"action_hash":"{}","action_id":"{}","decision":"approve","expires_at":"2999-01-01T00:00:00.000Z","nonce":"n1","v":1,"vault_id":"vlt_t"}}"#, a.action_hash, a.id), "00".repeat(64)],
        )
        .unwrap();
    must_refuse(&mut s, &a.id, "forged signature");
    // 2. A decision signed by another key (someone who made their own key pair).
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        HOUR,
    ));
    assert!(matches!(
        decide(
            &mut s,
            &ApproverKey::generate(),
            &b.id,
            Verdict::Approve,
            HOUR
        ),
        Err(ApprovalError::WrongApprover)
    ));
    assert_eq!(get(&s, "default", &b.id).unwrap().state, State::Pending);
    // 3. An old decision replayed for a new action; 4. a decision for A applied to B.
    let c1 = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/c1",
        None,
        HOUR,
    ));
    decide(&mut s, &key, &c1.id, Verdict::Approve, HOUR).unwrap();
    let c2 = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/c2",
        None,
        HOUR,
    ));
    s.conn()
        .execute(
            "UPDATE decisions SET action_id = ?1 WHERE action_id = ?2",
            [&c2.id, &c1.id],
        )
        .unwrap();
    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = ?1",
            [&c2.id],
        )
        .unwrap();
    must_refuse(&mut s, &c2.id, "decision for another action");
    must_refuse(&mut s, &c1.id, "its decision was moved away");
    // 5. The action changed after approval (URL rewritten in the row).
    let d = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/d",
        None,
        HOUR,
    ));
    decide(&mut s, &key, &d.id, Verdict::Approve, HOUR).unwrap();
    let tampered: String = s
        .conn()
        .query_row(
            "SELECT normalized FROM actions WHERE id = ?1",
            [&d.id],
            |r| r.get(0),
        )
        .unwrap();
    s.conn()
        .execute(
            "UPDATE actions SET normalized = ?2 WHERE id = ?1",
            [&d.id, &tampered.replace("/d", "/admin")],
        )
        .unwrap();
    must_refuse(&mut s, &d.id, "changed after approval");
    // 6. The credential changed after approval.
    let e = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/e",
        None,
        HOUR,
    ));
    decide(&mut s, &key, &e.id, Verdict::Approve, HOUR).unwrap();
    crate::credentials::edit(
        &mut s,
        "default",
        "api",
        crate::credentials::Edit {
            path_prefix: Some("/v2/".into()),
            ..Default::default()
        },
    )
    .unwrap();
    must_refuse(&mut s, &e.id, "credential changed");
}

#[test]
fn expired_denied_and_paused_never_dispatch() {
    let (mut s, c, key) = setup_keyed("states");
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/x",
        None,
        Duration::ZERO,
    ));
    assert!(matches!(
        decide(&mut s, &key, &a.id, Verdict::Approve, HOUR),
        Err(ApprovalError::NotPending {
            state: State::Expired,
            ..
        })
    ));
    must_refuse(&mut s, &a.id, "expired");
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/y",
        None,
        HOUR,
    ));
    let denied = decide(
        &mut s,
        &key,
        &b.id,
        Verdict::Deny(Some("not today".into())),
        HOUR,
    )
    .unwrap();
    assert_eq!(
        (denied.state, denied.reason.as_deref()),
        (State::Denied, Some("not today"))
    );
    must_refuse(&mut s, &b.id, "denied");
    let p = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/z",
        None,
        HOUR,
    ));
    decide(&mut s, &key, &p.id, Verdict::Approve, HOUR).unwrap();
    assert_eq!(
        pause(&mut s, "incident").unwrap(),
        1,
        "pausing denies what waits, approved included"
    );
    must_refuse(&mut s, &p.id, "paused");
    assert!(matches!(
        resume(&mut s, &ApproverKey::generate()),
        Err(ApprovalError::WrongApprover)
    ));
    assert!(resume(&mut s, &key).unwrap());
}

#[test]
fn policies_other_than_each_need_the_approvers_signature() {
    let (mut s, _, key) = setup_keyed("policy");
    let mut c = set_approval(&mut s, Approval::Never);
    // Unsigned: treated as `each`.
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/1",
        None,
        HOUR,
    ));
    assert_eq!(a.state, State::Pending);
    c = crate::credentials::sign_policy(&mut s, &key, "default", "api").unwrap();
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/2",
        None,
        HOUR,
    ));
    assert_eq!(b.state, State::Received);
    assert!(matches!(claim(&mut s, &b.id).unwrap(), Claim::Go(_)));
    // A forged `received` on a credential that needs approval is refused at dispatch.
    set_approval(&mut s, Approval::Each);
    let c3 = crate::credentials::get(&s, "default", "api").unwrap();
    let f = created(submit_get(
        &mut s,
        &c3,
        "https://api.example.com/3",
        None,
        HOUR,
    ));
    s.conn()
        .execute(
            "UPDATE actions SET state = 'received' WHERE id = ?1",
            [&f.id],
        )
        .unwrap();
    must_refuse(&mut s, &f.id, "forged received");
}

#[test]
fn a_session_grant_covers_only_its_session_and_credential_version() {
    let (mut s, _, key) = setup_keyed("grant");
    set_approval(&mut s, Approval::Session);
    let c = crate::credentials::sign_policy(&mut s, &key, "default", "api").unwrap();
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/g1",
        None,
        HOUR,
    ));
    assert_eq!(a.state, State::Pending);
    decide(&mut s, &key, &a.id, Verdict::ApproveSession, HOUR).unwrap();
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/g2",
        None,
        HOUR,
    ));
    assert_eq!(
        b.state,
        State::Received,
        "the grant covers the next call of the same session"
    );
    // Another session is not covered.
    let req = validate_http(
        &c,
        HttpArgs {
            credential: "api".into(),
            method: "GET".into(),
            url: "https://api.example.com/g3".into(),
            ..HttpArgs::default()
        },
    )
    .unwrap();
    let other = submit(
        &mut s,
        Submission {
            session_id: "ses_2",
            client: "x",
            profile: "default",
            credential: &c,
            request: &req,
            idempotency_key: None,
            expiry: HOUR,
            replay_window: HOUR,
        },
    )
    .unwrap();
    assert_eq!(created(other).state, State::Pending);
}
