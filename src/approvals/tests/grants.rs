//! Session grants on a real store: what a grant covers at submission (`gate`) and at dispatch
//! (`check`), that its scope must be the one its card showed, revocation (signed, fresh, single
//! use, at once), uses counted from the journal, the journal verifying, and replay only of
//! writes.
use super::*;
use crate::wire::journal::Basis;
use crate::wire::{GrantPayload, GrantScope, Payload};

const B: &str = "https://api.example.com";

/// Submits an HTTP request of `session` (with `body`, if any) on `c`.
fn submit_http(
    s: &mut Store,
    c: &Credential,
    session: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Submitted {
    let req = validate_http(
        c,
        HttpArgs {
            credential: "api".into(),
            method: method.into(),
            url: format!("{B}{path}"),
            body: body.map(str::to_owned),
            ..HttpArgs::default()
        },
    )
    .unwrap();
    submit(
        s,
        &current_trust(),
        Submission {
            session_id: session,
            client: "test-client",
            profile: "default",
            credential: c,
            request: &req,
            idempotency_key: None,
            expiry: HOUR,
            replay_window: HOUR,
            unresolved: None,
        },
    )
    .unwrap()
}

fn state_of(s: &mut Store, c: &Credential, method: &str, path: &str, body: Option<&str>) -> State {
    created(submit_http(s, c, "ses_1", method, path, body)).state
}

/// `a` dispatched and finished `completed`; the basis its dispatch row names.
fn run(s: &mut Store, a: &Action) -> Basis {
    let Claim::Go(_) = claim_now(s, &a.id) else {
        panic!("{} must dispatch", a.summary)
    };
    finish(
        s,
        &a.id,
        &crate::exec::Outcome {
            state: State::Completed,
            result: serde_json::json!({"http": {"status": 200}}),
            reason: None,
        },
    )
    .unwrap();
    dispatch_basis(s, &a.id)
}

/// Moves `a` to `received` with a chained journal row, as a writer of the database could.
fn force_received(s: &mut Store, a: &Action) {
    let tx = s.write().unwrap();
    tx.execute(
        "UPDATE actions SET state = 'received' WHERE id = ?1",
        [&a.id],
    )
    .unwrap();
    crate::audit::append_row(
        &tx,
        "action.received",
        Some(&a.session_id),
        Some(&a.id),
        &serde_json::json!({"state": "received", "tool": "http_request", "credential": "api",
            "summary": a.summary, "hash": a.action_hash}),
    )
    .unwrap();
    tx.commit().unwrap();
}

fn verifies(s: &Store) {
    let report = crate::audit::verify_store(s.conn(), "vlt_t", &[], None).unwrap();
    assert!(report.ok(), "{:?}", report.failure);
}

#[test]
fn a_reads_grant_runs_reads_under_its_directory_and_nothing_else() {
    let (mut s, c, key) = setup_keyed("grant-reads");
    let a = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "GET",
        "/repos/acme/app/issues",
        None,
    ));
    approve(&mut s, &key, &a, Verdict::ApproveSession).unwrap();
    assert!(matches!(run(&mut s, &a), Basis::Decision { .. }));
    // The grant is journaled with its session, scope and expiry.
    let (session, body): (String, String) = s
        .conn()
        .query_row(
            "SELECT session_id, body FROM audit WHERE kind = 'grant.add'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let added: crate::wire::journal::GrantAdded = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (session.as_str(), added.session.as_str()),
        ("ses_1", "ses_1")
    );
    assert_eq!(
        added.scope,
        GrantScope::HttpReads {
            methods: vec!["GET".into(), "HEAD".into()],
            prefix: "/repos/acme/app/".into()
        }
    );
    // Writes, a read with a body and reads elsewhere need a card.
    for (method, path, body) in [
        ("DELETE", "/repos/acme/prod", None),
        ("DELETE", "/repos/acme/app/issues", None),
        ("POST", "/repos/acme/app/issues", Some("{}")),
        ("PUT", "/repos/acme/app/issues", Some("{}")),
        ("PATCH", "/repos/acme/app/issues", Some("{}")),
        ("GET", "/repos/acme/app/issues", Some("q")),
        ("GET", "/repos/acme/other", None),
        ("GET", "/repos/acme/application", None),
    ] {
        assert_eq!(
            state_of(&mut s, &c, method, path, body),
            State::Pending,
            "{method} {path}"
        );
    }
    // Reads under the directory run on the grant, and each counts as a use.
    let g = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "GET",
        "/repos/acme/app/pulls?state=open",
        None,
    ));
    assert_eq!(g.state, State::Received);
    let grant_id = match run(&mut s, &g) {
        Basis::Grant { grant, .. } => grant,
        other => panic!("{other:?}"),
    };
    let h = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "HEAD",
        "/repos/acme/app/x/y",
        None,
    ));
    assert_eq!(h.state, State::Received);
    run(&mut s, &h);
    let listed = list_grants(&s, &current_trust()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].uses),
        (grant_id.as_str(), 2)
    );
    assert_eq!(listed[0].credential.name, "api");
    // Another session is not covered.
    let other = created(submit_http(
        &mut s,
        &c,
        "ses_2",
        "GET",
        "/repos/acme/app/issues",
        None,
    ));
    assert_eq!(other.state, State::Pending);
    // At dispatch the scope is checked again: a DELETE forced into `received` does not run.
    let d = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "DELETE",
        "/repos/acme/app/issues/1",
        None,
    ));
    force_received(&mut s, &d);
    must_refuse(&mut s, &d.id, "a DELETE on a reads grant");
    // Revoked: a read already received does not run, and the next one needs a card.
    let r = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "GET",
        "/repos/acme/app/z",
        None,
    ));
    assert_eq!(r.state, State::Received);
    let revoked = revoke_grants(
        &mut s,
        &current_trust(),
        &sign_revocation(&key, "vlt_t", Some(&grant_id)),
    )
    .unwrap();
    assert_eq!(revoked.len(), 1);
    must_refuse(&mut s, &r.id, "a read after its grant was revoked");
    assert_eq!(
        state_of(&mut s, &c, "GET", "/repos/acme/app/w", None),
        State::Pending
    );
    assert!(list_grants(&s, &current_trust()).unwrap().is_empty());
    // The journal verifies up to the row forced by hand, which it names.
    let f = crate::audit::verify_store(s.conn(), "vlt_t", &[], None)
        .unwrap()
        .failure
        .unwrap();
    assert_eq!(f.reason, crate::audit::Reason::IllegalTransition, "{f:?}");
    assert!(f.detail.contains(&d.id), "{f:?}");
}

#[test]
fn a_write_grant_covers_exactly_its_method_and_path() {
    let (mut s, c, key) = setup_keyed("grant-write");
    let a = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "POST",
        "/v1/items",
        Some("{\"n\":1}"),
    ));
    approve(&mut s, &key, &a, Verdict::ApproveSession).unwrap();
    run(&mut s, &a);
    let again = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "POST",
        "/v1/items?x=1",
        Some("{\"n\":2}"),
    ));
    assert_eq!(
        again.state,
        State::Received,
        "the same method and path, another body"
    );
    assert!(matches!(run(&mut s, &again), Basis::Grant { .. }));
    for (method, path, body) in [
        ("DELETE", "/v1/items", None),
        ("GET", "/v1/items", None),
        ("POST", "/v1/items/1", Some("{}")),
        ("POST", "/v1/other", Some("{}")),
    ] {
        assert_eq!(
            state_of(&mut s, &c, method, path, body),
            State::Pending,
            "{method} {path}"
        );
    }
    verifies(&s);
}

#[test]
fn a_grant_whose_scope_is_not_what_its_card_showed_is_refused() {
    let (mut s, c, key) = setup_keyed("grant-wide");
    let a = created(submit_http(
        &mut s,
        &c,
        "ses_1",
        "DELETE",
        "/repos/acme/app",
        None,
    ));
    let mut signed = sign_decision(
        &key,
        "vlt_t",
        &a.id,
        &a.action_hash,
        &normalized_of(&s, &a),
        &a.expires_at,
        &Verdict::ApproveSession,
        crate::wire::ApprovalMethod::Passphrase,
        HOUR,
    );
    // The approver's key over a wider scope than the card showed (every read of the host).
    let mut g: GrantPayload =
        serde_json::from_str(&signed.grant.as_ref().unwrap().payload).unwrap();
    assert_eq!(g.v, GrantPayload::VERSION);
    g.scope = GrantScope::HttpReads {
        methods: vec!["GET".into(), "HEAD".into()],
        prefix: "/".into(),
    };
    signed.grant = Some(crate::keys::signing::sign(&key, &g));
    match decide(&mut s, &current_trust(), &signed, None) {
        Err(ApprovalError::BadDecision(why)) => assert!(why.contains("scope"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(get(&mut s, "ses_1", &a.id).unwrap().state, State::Pending);
    assert_eq!(state_of(&mut s, &c, "GET", "/x", None), State::Pending);
    assert!(list_grants(&s, &current_trust()).unwrap().is_empty());
}

#[test]
fn revocations_are_the_approvers_fresh_and_single_use() {
    let (mut s, c, key) = setup_keyed("grant-revoke");
    let a = created(submit_http(&mut s, &c, "ses_1", "GET", "/a/b", None));
    approve(&mut s, &key, &a, Verdict::ApproveSession).unwrap();
    let trust = current_trust();
    let id = list_grants(&s, &trust).unwrap()[0].id.clone();
    // Another key, or a stale request, ends nothing.
    let foreign = sign_revocation(&ApproverKey::generate(), "vlt_t", None);
    assert!(matches!(
        revoke_grants(&mut s, &trust, &foreign),
        Err(ApprovalError::WrongApprover)
    ));
    let stale = crate::keys::signing::sign(
        &key,
        &crate::wire::RevocationPayload {
            v: crate::wire::RevocationPayload::VERSION,
            vault_id: "vlt_t".into(),
            grant: None,
            nonce: "n".repeat(32),
            issued_at: jiff::Timestamp::now() - jiff::SignedDuration::from_mins(10),
        },
    );
    assert!(matches!(
        revoke_grants(&mut s, &trust, &stale),
        Err(ApprovalError::BadRevocation(_))
    ));
    assert!(matches!(
        revoke_grants(
            &mut s,
            &trust,
            &sign_revocation(&key, "vlt_t", Some("grt_nope"))
        ),
        Err(ApprovalError::NoGrant(_))
    ));
    assert_eq!(list_grants(&s, &trust).unwrap().len(), 1);
    // `--all`, once: the same signed request again is refused.
    let all = sign_revocation(&key, "vlt_t", None);
    assert_eq!(revoke_grants(&mut s, &trust, &all).unwrap()[0].id, id);
    assert!(matches!(
        revoke_grants(&mut s, &trust, &all),
        Err(ApprovalError::BadRevocation(_))
    ));
    assert_eq!(state_of(&mut s, &c, "GET", "/a/c", None), State::Pending);
    verifies(&s);
}

#[test]
fn a_repeated_write_is_replayed_and_a_repeated_read_is_not() {
    let (mut s, _, key) = setup_keyed("replay");
    set_approval(&mut s, Approval::Never);
    let c = sign_api(&mut s, &key);
    for (method, body) in [("GET", None), ("HEAD", None)] {
        let first = created(submit_http(&mut s, &c, "ses_1", method, "/r", body));
        run(&mut s, &first);
        let again = created(submit_http(&mut s, &c, "ses_1", method, "/r", body));
        assert_ne!(again.id, first.id, "{method} runs again");
    }
    for (method, body) in [
        ("POST", Some("{}")),
        ("PUT", Some("{}")),
        ("PATCH", Some("{}")),
        ("DELETE", None),
        ("OPTIONS", None),
        ("GET", Some("q")),
    ] {
        let first = created(submit_http(&mut s, &c, "ses_1", method, "/w", body));
        run(&mut s, &first);
        match submit_http(&mut s, &c, "ses_1", method, "/w", body) {
            Submitted::Replayed(a) => assert_eq!(a.id, first.id, "{method}"),
            other => panic!("{method} {body:?} must be replayed: {other:?}"),
        }
    }
    verifies(&s);
}

/// The grant queries go through the partial indexes of schema/0008 (each repeats its index's
/// condition exactly).
#[test]
fn the_grant_queries_use_their_partial_indexes() {
    let store = crate::store::test_store("grant-plans", "vlt_test");
    let [rows, uses, nonce] = super::super::grants::journal_sql();
    for (sql, index) in [
        (rows, "audit_grant"),
        (uses, "audit_dispatch_grant"),
        (nonce, "audit_grant_revoke_nonce"),
    ] {
        let mut st = store
            .conn()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap();
        let unbound = vec![rusqlite::types::Null; st.parameter_count()];
        let plan: Vec<String> = st
            .query_map(rusqlite::params_from_iter(unbound), |r| r.get(3))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let plan = plan.join("; ");
        let uses_it = plan
            .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .any(|w| w == index);
        assert!(uses_it, "{sql}: {plan}");
    }
}
