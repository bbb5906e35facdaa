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

/// The approver signs `verdict` for `a` (as `vault approve --id` does, with the passphrase)
/// and the store records it.
fn approve(
    s: &mut Store,
    key: &ApproverKey,
    a: &Action,
    verdict: Verdict,
) -> Result<Action, ApprovalError> {
    let method = crate::wire::ApprovalMethod::Passphrase;
    approve_by(s, key, a, verdict, method, None)
}

/// `approve` made by `method`, with `pin` beside it (as the card sends it).
fn approve_by(
    s: &mut Store,
    key: &ApproverKey,
    a: &Action,
    verdict: Verdict,
    method: crate::wire::ApprovalMethod,
    pin: Option<&str>,
) -> Result<Action, ApprovalError> {
    let signed = sign_decision(
        key,
        "vlt_t",
        &a.id,
        &a.action_hash,
        &normalized_of(s, a),
        &a.expires_at,
        &verdict,
        method,
        Duration::from_secs(3600),
    );
    let pin = pin.map(|p| crate::wire::Secret::new(p.as_bytes().to_vec()));
    decide(s, &trust(key), &signed, pin.as_ref())
}

/// The stored request of `a`, as the approver re-derives it before signing.
fn normalized_of(s: &Store, a: &Action) -> crate::wire::NormalizedAction {
    let (text, _) = stored_request(s, &a.id).unwrap();
    crate::policy::read_normalized(&text).unwrap().0
}

/// What an attacker holding the database key can do without the approver key: move an action to
/// `approved` with a proper, chained journal row.
fn force_approved(s: &mut Store, id: &str) {
    let tx = s.write().unwrap();
    transition(&tx, id, State::Approved, Change::default()).unwrap();
    tx.commit().unwrap();
}

/// The basis the `action.dispatched` row of action `id` names.
fn dispatch_basis(s: &Store, id: &str) -> crate::wire::journal::Basis {
    let body: String = s
        .conn()
        .query_row(
            "SELECT body FROM audit WHERE action_id = ?1 AND kind = 'action.dispatched'",
            [id],
            |r| r.get(0),
        )
        .unwrap();
    serde_json::from_str::<crate::wire::journal::ActionRow>(&body)
        .unwrap()
        .basis
        .unwrap()
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
    crate::audit::append_row(
        &tx,
        "vault.init",
        None,
        None,
        &serde_json::json!({"vault_id": "vlt_t", "approver_public_key": key.public_hex()}),
    )
    .unwrap();
    tx.commit().unwrap();
    let c = credentials::add_as_approver(
        &mut s,
        &key,
        "vlt_t",
        credentials::test_bearer("api", "tok"),
    )
    .unwrap();
    KEY.with(|k| *k.borrow_mut() = ApproverKey::from_seed_hex(&key.seed_hex()));
    (s, c, key)
}

/// Signs the `api` credential's current policy (as `vault add/edit` sign each change).
fn sign_api(s: &mut Store, key: &ApproverKey) -> Credential {
    let c = credentials::get(s, "default", "api").unwrap();
    let sig = credentials::policy_signature(key, "vlt_t", &c);
    let tx = s.write().unwrap();
    crate::store::CredentialRow::set_policy_sig(&tx, &c.id, Some(&sig)).unwrap();
    tx.commit().unwrap();
    c
}

/// Changes the `api` credential's approval the way a writer of the database could, without the
/// approver: its version goes up and it carries no signature (so it counts as `each`).
fn set_approval(s: &mut Store, approval: Approval) -> Credential {
    let tx = s.write().unwrap();
    tx.execute(
        "UPDATE credentials SET approval = ?1, version = version + 1, policy_sig = NULL WHERE name = 'api'",
        [approval.as_str()],
    )
    .unwrap();
    tx.commit().unwrap();
    credentials::get(s, "default", "api").unwrap()
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
            unresolved: None,
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
        Claim::Go(_) | Claim::Tunnel(_) => panic!("{why}: dispatch was authorized"),
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
    // The same read again within the window runs again (a card again under `each`): reads are
    // never replayed. (Writes are: `grants::a_repeated_write_is_replayed_and_a_repeated_read_is_not`.)
    let again = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/ok",
        None,
        HOUR,
    ));
    assert_ne!(again.id, a.id);
    assert_eq!(again.state, State::Pending);
}

mod grants;
mod network;
mod pin_gate;
mod refusals;
mod signed_rows;
mod survivors;

/// The idempotency lookup of `submit` costs the same in a session's 200th call as in its 10th:
/// it finds earlier calls by fingerprint, not by walking the session's actions. It is prepared
/// once (no re-prepare on every new binding).
#[test]
fn the_idempotency_lookup_does_not_grow_with_the_session() {
    let (mut s, _, key) = setup_keyed("lookup");
    set_approval(&mut s, Approval::Never);
    let c = sign_api(&mut s, &key);
    let lookup = previous_call_sql();
    let mut steps = Vec::new();
    for i in 0..200 {
        s.conn()
            .prepare_cached(&lookup)
            .unwrap()
            .reset_status(rusqlite::StatementStatus::VmStep);
        let url = format!("https://api.example.com/x{i}");
        let a = created(submit_get(&mut s, &c, &url, None, HOUR));
        let st = s.conn().prepare_cached(&lookup).unwrap();
        steps.push(st.get_status(rusqlite::StatementStatus::VmStep));
        drop(st);
        let Claim::Go(_) = claim_now(&mut s, &a.id) else {
            panic!("a signed `never` policy runs without a card")
        };
        let done = crate::exec::Outcome {
            state: State::Completed,
            result: serde_json::json!({}),
            reason: None,
        };
        finish(&mut s, &a.id, &done).unwrap();
    }
    let st = s.conn().prepare_cached(&lookup).unwrap();
    assert_eq!(
        st.get_status(rusqlite::StatementStatus::Run),
        200,
        "submit ran this lookup once per call"
    );
    assert!(steps[199] > 0, "{steps:?}");
    assert_eq!(
        steps[199], steps[9],
        "steps per lookup along the session: {steps:?}"
    );
    assert_eq!(st.get_status(rusqlite::StatementStatus::RePrepare), 0);
}
