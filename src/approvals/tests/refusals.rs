//! What must never dispatch: forged, replayed, misapplied, stale, expired, denied or paused
//! approvals; policies and grants only with the approver's signature; the lifecycle table.
use super::*;

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
        &normalized_of(&s, &b),
        &b.expires_at,
        &Verdict::Approve,
        crate::wire::ApprovalMethod::Passphrase,
        HOUR,
    );
    assert!(matches!(
        decide(&mut s, &trust(&key), &forged, None),
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
    crate::credentials::edit_as_approver(
        &mut s,
        &key,
        "vlt_t",
        ("default", "api"),
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
        crate::audit::append_row(
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
        "https://api.example.com/g1/more",
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
            url: "https://api.example.com/g1/other".into(),
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
            unresolved: None,
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

/// A decision nonce is spent once, across actions, even once its decision row is gone: the
/// approver's valid signature over a second action does not dispatch it when its nonce is one an
/// `action.dispatched` row already names (`nonce_spent`, through the partial index
/// `audit_dispatch_nonce` of schema/0007). The control, the same decision with a fresh nonce,
/// dispatches.
#[test]
fn a_decision_whose_nonce_a_dispatch_already_spent_is_refused() {
    let (mut s, c, key) = setup_keyed("spent");
    let new = |s: &mut Store, path: &str| {
        let url = format!("https://api.example.com/{path}");
        created(submit_get(s, &c, &url, None, HOUR))
    };
    let a = new(&mut s, "a");
    approve(&mut s, &key, &a, Verdict::Approve).unwrap();
    let Claim::Go(_) = claim_now(&mut s, &a.id) else {
        panic!("a valid approval must dispatch")
    };
    let spent: String = s
        .conn()
        .query_row(
            "SELECT nonce FROM decisions WHERE action_id = ?1",
            [&a.id],
            |r| r.get(0),
        )
        .unwrap();
    // The approver's decision for `b`, re-signed with `nonce` and recorded by hand.
    let decide_with = |s: &mut Store, b: &Action, nonce: Option<&str>, id: &str| {
        let fresh = sign_decision(
            &key,
            "vlt_t",
            &b.id,
            &b.action_hash,
            &normalized_of(s, b),
            &b.expires_at,
            &Verdict::Approve,
            crate::wire::ApprovalMethod::Passphrase,
            HOUR,
        );
        let mut payload: crate::wire::DecisionPayload =
            serde_json::from_str(&fresh.decision.payload).unwrap();
        if let Some(n) = nonce {
            payload.nonce = n.to_owned();
        }
        let signed = signing::sign(&key, &payload);
        s.conn()
            .execute(
                "INSERT INTO decisions (id, action_id, decision, nonce, payload, signature, created_at) VALUES (?1, ?2, 'approve', ?3, ?4, ?5, 'x')",
                rusqlite::params![id, b.id, payload.nonce, signed.payload, signed.signature],
            )
            .unwrap();
        force_approved(s, &b.id);
    };
    // Someone with the database key removes the spent decision's row (the table's own unique
    // nonce would refuse the copy otherwise): only the journal still shows the nonce spent.
    s.conn()
        .execute("DELETE FROM decisions WHERE action_id = ?1", [&a.id])
        .unwrap();
    let b = new(&mut s, "b");
    decide_with(&mut s, &b, Some(&spent), "dec_spent");
    match claim_now(&mut s, &b.id) {
        Claim::Refused(r) => assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("no valid, unused signed approval"),
            "{r:?}"
        ),
        other => panic!("a spent nonce dispatched again: {other:?}"),
    }
    let d = new(&mut s, "d");
    decide_with(&mut s, &d, None, "dec_fresh");
    assert!(
        matches!(claim_now(&mut s, &d.id), Claim::Go(_)),
        "the same decision with its own nonce dispatches"
    );
}
