//! The approver's signature in the journal: every row of a decision (approve, approve for the
//! session, deny), a grant, a revocation, a credential change (add, edit, rm), a resume and a
//! signed network allow list keeps
//! the payload the approver signed, byte for byte, and its signature, so a reader holding only
//! the public key can check it offline. A pause's denial, which no person signed, keeps none.
use super::*;
use crate::keys::signing;
use crate::wire::journal::{Kind, RowSignature};
use crate::wire::{
    DecisionPayload, GrantPayload, NetworkPayload, Payload, PolicyPayload, RemovalPayload,
    ResumePayload, RevocationPayload,
};

/// Every journal row: (kind, body text).
fn rows(s: &Store) -> Vec<(String, String)> {
    s.conn()
        .prepare("SELECT kind, body FROM audit ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The signature a row keeps, checked against the approver's public key as a `T`: its payload's
/// text is in the stored body verbatim and is what was signed.
fn signed_as<T: Payload>(key: &ApproverKey, kind: &str, body: &str) -> T {
    #[derive(serde::Deserialize)]
    struct WithSig {
        signed: Option<RowSignature>,
    }
    let sig = serde_json::from_str::<WithSig>(body)
        .unwrap()
        .signed
        .unwrap_or_else(|| panic!("{kind} keeps no signature: {body}"));
    let text = sig.payload.get();
    assert!(body.contains(text), "{kind}: the payload is not verbatim");
    assert!(
        signing::verify(&key.public(), T::TAG, text, &sig.signature),
        "{kind}: the signature does not verify over the row's payload"
    );
    serde_json::from_str(text).unwrap()
}

#[test]
fn every_row_a_person_decided_keeps_the_approvers_signature() {
    let (mut s, c, key) = setup_keyed("signed-rows");
    let trust = trust(&key);
    let once = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/a",
        None,
        HOUR,
    ));
    approve(&mut s, &key, &once, Verdict::Approve).unwrap();
    let denied = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/c",
        None,
        HOUR,
    ));
    approve(&mut s, &key, &denied, Verdict::Deny(Some("no".into()))).unwrap();
    // Waits for a card: the grant below covers the reads that come after it.
    let paused = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/d",
        None,
        HOUR,
    ));
    let session = created(submit_get(
        &mut s,
        &c,
        "https://api.example.com/b",
        None,
        HOUR,
    ));
    approve(&mut s, &key, &session, Verdict::ApproveSession).unwrap();
    let revoke = sign_revocation(&key, "vlt_t", None);
    assert_eq!(revoke_grants(&mut s, &trust, &revoke).unwrap().len(), 1);
    let edit = crate::wire::Edit {
        approval: Some(Approval::Writes),
        ..Default::default()
    };
    credentials::edit_as_approver(&mut s, &key, "vlt_t", ("default", "api"), edit).unwrap();
    // A pause denies what waits: no person signed that denial.
    assert_eq!(paused.state, State::Pending);
    pause(&mut s, "stop").unwrap();
    assert!(super::super::resume(&mut s, &trust, &sign_resume(&key, "vlt_t")).unwrap());
    let hosts = vec!["registry.npmjs.org".to_owned()];
    let allow = sign_allowed(&key, "vlt_t", hosts.clone());
    assert_eq!(set_allowed(&mut s, &trust, &allow).unwrap(), hosts);
    credentials::remove_as_approver(&mut s, &key, "vlt_t", ("default", "api")).unwrap();

    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for (kind, body) in rows(&s) {
        let k = Kind::parse(&kind).unwrap();
        match k {
            Kind::Action(State::Approved) => {
                let d: DecisionPayload = signed_as(&key, &kind, &body);
                assert!(d.action_id == once.id || d.action_id == session.id);
            }
            Kind::Action(State::Denied) if body.contains("\"method\"") => {
                let d: DecisionPayload = signed_as(&key, &kind, &body);
                assert_eq!(d.action_id, denied.id);
            }
            Kind::Action(State::Denied) => {
                assert!(!body.contains("\"signed\""), "a pause's denial: {body}");
                *seen.entry("denied by the pause".into()).or_default() += 1;
                continue;
            }
            Kind::GrantAdd => {
                let g: GrantPayload = signed_as(&key, &kind, &body);
                assert_eq!(g.action_id, session.id);
            }
            Kind::GrantRevoke => {
                let r: RevocationPayload = signed_as(&key, &kind, &body);
                assert_eq!(r.grant, None);
            }
            Kind::CredentialAdd | Kind::CredentialEdit => {
                let p: PolicyPayload = signed_as(&key, &kind, &body);
                assert_eq!(p.credential_id, c.id);
            }
            Kind::CredentialRm => {
                let r: RemovalPayload = signed_as(&key, &kind, &body);
                assert_eq!((r.credential_id.as_str(), r.version), (c.id.as_str(), 2));
            }
            Kind::VaultResume => {
                signed_as::<ResumePayload>(&key, &kind, &body);
            }
            Kind::NetworkAllow => {
                let n: NetworkPayload = signed_as(&key, &kind, &body);
                assert_eq!(n.allow, ["registry.npmjs.org"]);
            }
            _ => continue,
        }
        *seen.entry(kind).or_default() += 1;
    }
    let want = [
        ("action.approved", 2),
        ("action.denied", 1),
        ("denied by the pause", 3),
        ("credential.add", 1),
        ("credential.edit", 1),
        ("credential.rm", 1),
        ("grant.add", 1),
        ("grant.revoke", 1),
        ("vault.resume", 1),
        ("network.allow", 1),
    ];
    let want: std::collections::BTreeMap<String, usize> =
        want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    assert_eq!(seen, want);
}
