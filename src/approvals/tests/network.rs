//! `network` actions on a real store: a host waits for a card, runs once on the person's signed
//! approval (never on a forced state or a policy), a session grant covers exactly its host and
//! port for its session, a denial runs nothing, and the journal verifies held to the key.
use super::*;
use crate::wire::journal::Basis;

fn ask<'a>(session: &'a str, host: &'a str, port: u16) -> NetworkAsk<'a> {
    NetworkAsk {
        session_id: session,
        client: "claude (network)",
        profile: "default",
        host,
        port,
        expiry: HOUR,
    }
}

fn submit_net(s: &mut Store, session: &str, host: &str, port: u16) -> Submitted {
    submit_network(s, &current_trust(), ask(session, host, port)).unwrap()
}

/// Claims `a`, which must pass: the basis its dispatch row names. Then finishes it.
fn tunnel(s: &mut Store, a: &Action) -> Basis {
    let Claim::Tunnel(d) = claim_now(s, &a.id) else {
        panic!("{} must dispatch", a.summary)
    };
    assert_eq!(d.state, State::Dispatched);
    let outcome = crate::exec::Outcome {
        state: State::Completed,
        result: serde_json::json!({"sent": 10, "received": 20}),
        reason: None,
    };
    finish(s, &a.id, &outcome).unwrap();
    dispatch_basis(s, &a.id)
}

fn verifies_held(s: &Store, key: &ApproverKey) {
    let public = key.public();
    let report = crate::audit::verify_store(s.conn(), "vlt_t", &[], Some(&public)).unwrap();
    assert!(report.ok(), "{:?}", report.failure);
}

#[test]
fn a_host_waits_for_a_card_and_runs_once_on_the_signed_approval_only() {
    let (mut s, _c, key) = setup_keyed("net-card");
    let a = created(submit_net(&mut s, "ses_n", "example.org", 443));
    assert_eq!((a.state, a.tool.as_str()), (State::Pending, "network"));
    assert_eq!(a.summary, "CONNECT example.org:443");
    assert_eq!(a.credential_id, "");
    // The same host again while it waits: a card of its own (an approval opens one connection).
    let same = created(submit_net(&mut s, "ses_n", "example.org", 443));
    assert_ne!(same.id, a.id);
    // Signed: it runs once, on that decision.
    approve(&mut s, &key, &a, Verdict::Approve).unwrap();
    let Claim::Tunnel(open) = claim_now(&mut s, &a.id) else {
        panic!("the approved host must dispatch")
    };
    // While its connection is open, the same host again: a card of its own, never a ride on
    // the dispatched action (found by the tmux test under CI's load).
    let again = created(submit_net(&mut s, "ses_n", "example.org", 443));
    assert_eq!(
        (again.state, open.state),
        (State::Pending, State::Dispatched)
    );
    assert_ne!(again.id, a.id);
    let outcome = crate::exec::Outcome {
        state: State::Completed,
        result: serde_json::json!({"network": {"sent": 1, "received": 1}}),
        reason: None,
    };
    finish(&mut s, &a.id, &outcome).unwrap();
    assert!(matches!(claim_now(&mut s, &a.id), Claim::NotReady(_)));
    // A denial runs nothing.
    let d = created(submit_net(&mut s, "ses_n", "::1", 8080));
    assert_eq!(d.summary, "CONNECT [::1]:8080");
    let denied = approve(&mut s, &key, &d, Verdict::Deny(Some("no".into()))).unwrap();
    assert_eq!(denied.state, State::Denied);
    assert!(matches!(claim_now(&mut s, &d.id), Claim::NotReady(_)));
    let rows: i64 = s
        .conn()
        .query_row(
            "SELECT count(*) FROM audit WHERE kind = 'action.dispatched'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
    verifies_held(&s, &key);
    let f = created(submit_net(&mut s, "ses_n", "forced.example", 443));
    // Moved to `approved` without the approver's signature (a writer of the database): refused.
    force_approved(&mut s, &f.id);
    let Claim::Refused(r) = claim_now(&mut s, &f.id) else {
        panic!("a forced approval dispatched")
    };
    assert!(r.reason.unwrap().contains("signed approval"));
}

#[test]
fn a_session_grant_covers_exactly_its_host_and_port_in_its_session() {
    let (mut s, _c, key) = setup_keyed("net-grant");
    let a = created(submit_net(&mut s, "ses_n", "registry.npmjs.org", 443));
    approve(&mut s, &key, &a, Verdict::ApproveSession).unwrap();
    assert!(matches!(tunnel(&mut s, &a), Basis::Decision { .. }));
    let again = created(submit_net(&mut s, "ses_n", "registry.npmjs.org", 443));
    assert_eq!(again.state, State::Received);
    assert!(matches!(tunnel(&mut s, &again), Basis::Grant { .. }));
    for (session, host, port) in [
        ("ses_n", "registry.npmjs.org", 80),
        ("ses_n", "evil.registry.npmjs.org", 443),
        ("ses_other", "registry.npmjs.org", 443),
    ] {
        let other = created(submit_net(&mut s, session, host, port));
        assert_eq!(other.state, State::Pending, "{session} {host}:{port}");
    }
    verifies_held(&s, &key);
    // Moved to `received` without a grant that covers it (a writer of the database, with a
    // chained row): refused at the claim, nothing dispatched.
    let stray = created(submit_net(&mut s, "ses_n", "elsewhere.example", 443));
    let tx = s.write().unwrap();
    tx.execute(
        "UPDATE actions SET state = 'received' WHERE id = ?1",
        [&stray.id],
    )
    .unwrap();
    crate::audit::append_row(
        &tx,
        "action.received",
        Some("ses_n"),
        Some(&stray.id),
        &serde_json::json!({"state": "received", "tool": "network", "credential": "",
            "summary": stray.summary, "hash": stray.action_hash}),
    )
    .unwrap();
    tx.commit().unwrap();
    let Claim::Refused(r) = claim_now(&mut s, &stray.id) else {
        panic!("a forced `received` dispatched")
    };
    assert!(
        r.reason.as_deref().unwrap_or("").contains("no approval"),
        "{r:?}"
    );
}

#[test]
fn the_allow_list_is_the_approvers_fresh_and_single_use_and_only_its_signature_counts() {
    let (mut s, _c, key) = setup_keyed("net-allow");
    let trust = current_trust();
    assert!(allowed(&s, &trust).unwrap().is_empty());
    let hosts = vec![
        "registry.npmjs.org".to_owned(),
        "*.crates.io:443".to_owned(),
    ];
    let signed = sign_allowed(&key, "vlt_t", hosts.clone());
    assert_eq!(set_allowed(&mut s, &trust, &signed).unwrap(), hosts);
    assert_eq!(allowed(&s, &trust).unwrap(), hosts);
    // The same signed list again: refused (single use by its nonce).
    assert!(set_allowed(&mut s, &trust, &signed).is_err());
    // Signed by another key: refused, and nothing changes.
    let other = ApproverKey::generate();
    let forged = sign_allowed(&other, "vlt_t", vec!["evil.example".into()]);
    assert!(matches!(
        set_allowed(&mut s, &trust, &forged),
        Err(ApprovalError::WrongApprover)
    ));
    assert_eq!(allowed(&s, &trust).unwrap(), hosts);
    // A writer of the database who swaps the stored list for one signed by another key adds
    // nothing: the list read back is re-checked against the approver's key.
    let tx = s.write().unwrap();
    crate::store::set_meta(
        &tx,
        "network_allow",
        &serde_json::to_string(&forged).unwrap(),
    )
    .unwrap();
    tx.commit().unwrap();
    assert!(allowed(&s, &trust).unwrap().is_empty());
}
