//! The approval PIN at the gate: an approval made with the PIN needs the right one, wrong ones
//! are counted and journaled and the third in a row pauses the vault, a key press alone approves
//! nothing, and setting the PIN takes the approver's fresh, single-use signature.
use super::*;
use crate::wire::{ApprovalMethod, Secret};

const HOUR: Duration = Duration::from_secs(3600);

fn pending(s: &mut Store, c: &Credential, url: &str) -> Action {
    match submit_get(s, c, url, None, HOUR) {
        Submitted::Created(a) => a,
        other => panic!("{other:?}"),
    }
}

fn decide_with(
    s: &mut Store,
    key: &ApproverKey,
    a: &Action,
    method: ApprovalMethod,
    pin: Option<&str>,
) -> Result<Action, ApprovalError> {
    approve_by(s, key, a, Verdict::Approve, method, pin)
}

fn set_pin(s: &mut Store, key: &ApproverKey, value: &str) -> Result<(), ApprovalError> {
    let secret = Secret::new(value.as_bytes().to_vec());
    let signed = pin::sign_pin(key, "vlt_t", &secret);
    pin::set(s, &trust(key), &signed, &secret)
}

fn rows_of(s: &Store, kind: &str) -> i64 {
    s.conn()
        .query_row("SELECT count(*) FROM audit WHERE kind = ?1", [kind], |r| {
            r.get(0)
        })
        .unwrap()
}

#[test]
fn an_approval_by_pin_needs_the_right_pin_and_three_wrong_ones_pause() {
    let (mut s, c, key) = setup_keyed("pin-gate");
    let a = pending(&mut s, &c, "https://api.example.com/a");
    // No PIN set yet: nothing approves by PIN.
    assert!(matches!(
        decide_with(&mut s, &key, &a, ApprovalMethod::Pin, Some("4711")),
        Err(ApprovalError::NoPin)
    ));
    set_pin(&mut s, &key, "4711").unwrap();
    // A key press alone approves nothing, whatever it carries.
    assert!(matches!(
        decide_with(&mut s, &key, &a, ApprovalMethod::Key, Some("4711")),
        Err(ApprovalError::BadDecision(_))
    ));
    // Wrong, missing: counted, journaled, the action still pending.
    assert!(matches!(
        decide_with(&mut s, &key, &a, ApprovalMethod::Pin, Some("1234")),
        Err(ApprovalError::WrongPin { left: 2 })
    ));
    assert!(matches!(
        decide_with(&mut s, &key, &a, ApprovalMethod::Pin, None),
        Err(ApprovalError::WrongPin { left: 1 })
    ));
    assert_eq!(get(&mut s, "ses_1", &a.id).unwrap().state, State::Pending);
    assert_eq!(rows_of(&s, "approval.pin_wrong"), 2);
    // The right one clears the count.
    let ok = decide_with(&mut s, &key, &a, ApprovalMethod::Pin, Some("4711")).unwrap();
    assert_eq!(ok.state, State::Approved);
    let body: String = s
        .conn()
        .query_row(
            "SELECT body FROM audit WHERE kind = 'action.approved' AND action_id = ?1",
            [&a.id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(body.contains(r#""method":"pin""#), "{body}");
    // Three wrong in a row (on any actions) pause the vault and deny what waits.
    let b = pending(&mut s, &c, "https://api.example.com/b");
    for left in [2, 1] {
        assert!(matches!(
            decide_with(&mut s, &key, &b, ApprovalMethod::Pin, Some("0000")),
            Err(ApprovalError::WrongPin { left: l }) if l == left
        ));
    }
    assert!(paused(s.conn()).unwrap().is_none());
    assert!(matches!(
        decide_with(&mut s, &key, &b, ApprovalMethod::Pin, Some("0000")),
        Err(ApprovalError::PinLimit(3))
    ));
    let why = paused(s.conn()).unwrap().expect("paused");
    assert!(why.contains("approval PIN was wrong 3 times"), "{why}");
    assert_eq!(get(&mut s, "ses_1", &b.id).unwrap().state, State::Denied);
    // The passphrase path (scripted approve) needs no PIN.
    resume(&mut s, &trust(&key), &sign_resume(&key, "vlt_t")).unwrap();
    let d = pending(&mut s, &c, "https://api.example.com/d");
    let ok = decide_with(&mut s, &key, &d, ApprovalMethod::Passphrase, None).unwrap();
    assert_eq!(ok.state, State::Approved);
    // Every row written above is the vault's own: wrong PINs, the pause they caused, the resume.
    // The journal verifies; a typo is not tampering.
    let report = crate::audit::verify_store(s.conn(), "vlt_t", &[], None).unwrap();
    assert!(report.ok(), "{:?}", report.failure);
}

#[test]
fn setting_the_pin_takes_the_approvers_fresh_single_use_signature() {
    let (mut s, _c, key) = setup_keyed("pin-set");
    let secret = Secret::new(b"4711".to_vec());
    // Another key's signature sets nothing.
    let other = ApproverKey::generate();
    let forged = pin::sign_pin(&other, "vlt_t", &secret);
    assert!(pin::set(&mut s, &trust(&key), &forged, &secret).is_err());
    assert!(!pin::is_set(s.conn()).unwrap());
    // A signature over another PIN does not set this one.
    let signed = pin::sign_pin(&key, "vlt_t", &Secret::new(b"9999".to_vec()));
    assert!(pin::set(&mut s, &trust(&key), &signed, &secret).is_err());
    // A PIN too short is refused even when signed.
    let short = Secret::new(b"12".to_vec());
    let signed_short = pin::sign_pin(&key, "vlt_t", &short);
    assert!(pin::set(&mut s, &trust(&key), &signed_short, &short).is_err());
    // The real one, once; its replay is refused.
    let signed = pin::sign_pin(&key, "vlt_t", &secret);
    pin::set(&mut s, &trust(&key), &signed, &secret).unwrap();
    assert!(pin::is_set(s.conn()).unwrap());
    assert!(pin::set(&mut s, &trust(&key), &signed, &secret).is_err());
    // Neither the PIN nor anything derived from it alone is in the journal.
    let bodies: Vec<String> = s
        .conn()
        .prepare("SELECT body FROM audit")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(bodies.iter().all(|b| !b.contains("4711")));
    assert_eq!(rows_of(&s, "approval.pin_set"), 1);
}
