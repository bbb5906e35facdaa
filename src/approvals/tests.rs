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

/// What the agent trusts: the approver key of the vault `setup_keyed` made. Tests that need no
/// signature use a throwaway key (only `each` policies and pending actions are involved).
fn trust(key: &ApproverKey) -> Trust {
    Trust::new("vlt_t", key)
}

thread_local! {
    static KEY: std::cell::RefCell<Option<ApproverKey>> = const { std::cell::RefCell::new(None) };
}

/// The trust of the store most recently made by `setup_keyed` in this thread.
fn current_trust() -> Trust {
    KEY.with(|k| trust(k.borrow().as_ref().expect("setup_keyed ran")))
}

/// The approver signs `verdict` for `a` (as `vault approve` does) and the store records it.
fn approve(
    s: &mut Store,
    key: &ApproverKey,
    a: &Action,
    verdict: Verdict,
) -> Result<Action, ApprovalError> {
    let signed = sign_decision(
        key,
        "vlt_t",
        &a.id,
        &a.action_hash,
        (&a.credential_id, a.credential_version),
        &a.expires_at,
        &verdict,
        Duration::from_secs(3600),
    );
    decide(s, &trust(key), &signed)
}

/// What an attacker holding the database key can do without the approver key: move an action to
/// `approved` with a proper, chained journal row.
fn force_approved(s: &mut Store, id: &str) {
    let tx = s.write().unwrap();
    transition(&tx, id, State::Approved, Change::default()).unwrap();
    tx.commit().unwrap();
}

fn claim_now(s: &mut Store, id: &str) -> Claim {
    claim(s, &current_trust(), id).unwrap()
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
    KEY.with(|k| *k.borrow_mut() = ApproverKey::from_seed_hex(&key.seed_hex()));
    (s, c, key)
}

/// Signs the `api` credential's current policy as `vault add/edit` does.
fn sign_api(s: &mut Store, key: &ApproverKey) -> Credential {
    let c = credentials::get(s, "default", "api").unwrap();
    let sig = credentials::policy_signature(key, "vlt_t", &c);
    credentials::sign_policy(s, &trust(key), &c.id, &sig).unwrap()
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
        &current_trust(),
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
        get(&mut s, "ses_other", &a.id),
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
    assert!(matches!(
        withdraw(&mut s, "ses_other", &a.id, "another session"),
        Err(ApprovalError::NotFound(_))
    ));
    let w = withdraw(&mut s, "ses_1", &a.id, "client cancelled").unwrap();
    assert_eq!(w.state, State::Withdrawn);
    assert!(matches!(
        withdraw(&mut s, "ses_1", &a.id, "again"),
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
    for a in list_recent(&s, "ses_1", 50).unwrap() {
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
    match claim_now(s, id) {
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
        matches!(claim_now(&mut s, &a.id), Claim::NotReady(_)),
        "pending is not dispatchable"
    );
    approve(&mut s, &key, &a, Verdict::Approve).unwrap();
    let Claim::Go(auth) = claim_now(&mut s, &a.id) else {
        panic!("a valid approval must dispatch")
    };
    assert_eq!(auth.action_id(), a.id);
    assert_eq!(auth.secret().expose(), b"tok");
    assert!(
        matches!(claim_now(&mut s, &a.id), Claim::NotReady(_)),
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
    force_approved(&mut s, &a.id);
    s.conn()
        .execute(
            "INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES ('dec_f', ?1, 'approve', 'n1', ?2, ?3, 'x')",
            rusqlite::params![a.id, format!(r#"{{"action_hash":"{}","action_id":"{}","decision":"approve","expires_at":"2999-01-01T00:00:00.000Z","nonce":"n1","v":1,"vault_id":"vlt_t"}}"#, a.action_hash, a.id), "00".repeat(64)],
        )
        .unwrap();
    match claim_now(&mut s, &a.id) {
        Claim::Refused(r) => assert!(r
            .reason
            .unwrap()
            .contains("no valid, unused signed approval")),
        other => panic!("forged signature: {other:?}"),
    }
    // 2. A decision signed by another key (someone who made their own key pair).
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        HOUR,
    ));
    let forged = sign_decision(
        &ApproverKey::generate(),
        "vlt_t",
        &b.id,
        &b.action_hash,
        (&b.credential_id, b.credential_version),
        &b.expires_at,
        &Verdict::Approve,
        HOUR,
    );
    assert!(matches!(
        decide(&mut s, &trust(&key), &forged),
        Err(ApprovalError::BadDecision(_))
    ));
    assert_eq!(get(&mut s, "ses_1", &b.id).unwrap().state, State::Pending);
    // 3. An old decision replayed for a new action; 4. a decision for A applied to B.
    let c1 = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/c1",
        None,
        HOUR,
    ));
    approve(&mut s, &key, &c1, Verdict::Approve).unwrap();
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
    force_approved(&mut s, &c2.id);
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
    approve(&mut s, &key, &d, Verdict::Approve).unwrap();
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
    approve(&mut s, &key, &e, Verdict::Approve).unwrap();
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
        approve(&mut s, &key, &a, Verdict::Approve),
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
    let denied = approve(&mut s, &key, &b, Verdict::Deny(Some("not today".into()))).unwrap();
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
    approve(&mut s, &key, &p, Verdict::Approve).unwrap();
    assert_eq!(
        pause(&mut s, "incident").unwrap(),
        1,
        "pausing denies what waits, approved included"
    );
    must_refuse(&mut s, &p.id, "paused");
    assert!(matches!(
        resume(
            &mut s,
            &trust(&key),
            &sign_resume(&ApproverKey::generate(), "vlt_t")
        ),
        Err(ApprovalError::WrongApprover)
    ));
    let r = sign_resume(&key, "vlt_t");
    assert!(resume(&mut s, &trust(&key), &r).unwrap());
    // A resume request is single use.
    pause(&mut s, "again").unwrap();
    assert!(resume(&mut s, &trust(&key), &r).is_err());
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
    c = sign_api(&mut s, &key);
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/2",
        None,
        HOUR,
    ));
    assert_eq!(b.state, State::Received);
    assert!(matches!(claim_now(&mut s, &b.id), Claim::Go(_)));
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
    // Even with a chained journal row, `received` without a signed policy is refused.
    let g = created(submit_get(
        &mut s,
        &c3,
        "https://api.example.com/4",
        None,
        HOUR,
    ));
    {
        let tx = s.write().unwrap();
        tx.execute(
            "UPDATE actions SET state = 'received' WHERE id = ?1",
            [&g.id],
        )
        .unwrap();
        crate::audit::append(
            &tx,
            "action.received",
            Some("ses_1"),
            Some(&g.id),
            &serde_json::json!({}),
        )
        .unwrap();
        tx.commit().unwrap();
    }
    match claim_now(&mut s, &g.id) {
        Claim::Refused(a) => assert!(
            a.reason.unwrap().contains("requires an approval"),
            "forged received"
        ),
        other => panic!("forged received with a journal row: {other:?}"),
    }
}

#[test]
fn a_session_grant_covers_only_its_session_and_credential_version() {
    let (mut s, _, key) = setup_keyed("grant");
    set_approval(&mut s, Approval::Session);
    let c = sign_api(&mut s, &key);
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/g1",
        None,
        HOUR,
    ));
    assert_eq!(a.state, State::Pending);
    approve(&mut s, &key, &a, Verdict::ApproveSession).unwrap();
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
        &trust(&key),
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

#[test]
fn single_use_and_pause_rest_on_the_journal_not_on_columns() {
    let (mut s, c, key) = setup_keyed("journal");
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/del",
        None,
        HOUR,
    ));
    approve(&mut s, &key, &a, Verdict::Approve).unwrap();
    assert!(matches!(claim_now(&mut s, &a.id), Claim::Go(_)));
    finish(
        &mut s,
        &a.id,
        &crate::exec::Outcome {
            state: State::Completed,
            result: serde_json::json!({}),
            reason: None,
        },
    )
    .unwrap();
    // Someone with the database key resets the columns that used to decide single use.
    s.conn()
        .execute("UPDATE decisions SET used_at = NULL", [])
        .unwrap();
    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = ?1",
            [&a.id],
        )
        .unwrap();
    must_refuse(&mut s, &a.id, "a completed action reset to approved");
    // The dispatched row names the decision and its nonce.
    let basis: String = s
        .conn()
        .query_row(
            "SELECT json_extract(body, '$.basis.nonce') FROM audit WHERE kind = 'action.dispatched' AND action_id = ?1",
            [&a.id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(basis.len(), 32);
    // A pause lifted by deleting the meta row is still a pause: the journal says so.
    let b = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        HOUR,
    ));
    pause(&mut s, "incident").unwrap();
    s.conn()
        .execute("DELETE FROM meta WHERE key = 'paused'", [])
        .unwrap();
    assert_eq!(paused(s.conn()).unwrap().as_deref(), Some("incident"));
    s.conn()
        .execute(
            "UPDATE actions SET state = 'approved' WHERE id = ?1",
            [&b.id],
        )
        .unwrap();
    must_refuse(&mut s, &b.id, "paused, meta row deleted");
}

#[test]
fn transitions_follow_the_lifecycle_table() {
    let (mut s, c, key) = setup_keyed("table");
    let a = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/t",
        None,
        HOUR,
    ));
    let tx = s.write().unwrap();
    for illegal in [State::Dispatched, State::Completed, State::Indeterminate] {
        assert!(
            matches!(
                transition(&tx, &a.id, illegal, Change::default()),
                Err(ApprovalError::NotPending { .. })
            ),
            "pending → {illegal} must be refused"
        );
    }
    drop(tx);
    approve(&mut s, &key, &a, Verdict::Deny(None)).unwrap();
    assert!(approve(&mut s, &key, &a, Verdict::Approve).is_err());
    for st in State::ALL {
        for to in st.successors() {
            assert!(!st.is_terminal(), "{st} is final but has successors");
            assert!(!to.is_initial(), "{to} is initial but reachable");
        }
    }
}
