//! Holding a journal to the approver's key (`held.rs`, `sigs.rs`) on journals built row by row
//! with real signatures: a journal written before signatures verifies and says what no key holds;
//! from the first signature on, a stripped one fails; a signature that does not verify is named
//! at its row whatever chunk its batch was in; another vault's signature, a decision recorded
//! twice and a key other than the vault's fail. The store's verdict (one thread, and every chunk
//! size on two workers) and its export's are the same.
use super::{Reason, Report};
use crate::audit::tests::store;
use crate::audit::{append, export, verify_file, verify_store, verify_store_with};
use crate::keys::{signing, ApproverKey};
use crate::store::Store;
use crate::wire::journal::{
    ActionRow, Basis, ClientLabel, CredentialAdded, CredentialBody, Process, RowSignature,
    SessionStart, VaultInit,
};
use crate::wire::{
    Approval, ApprovalMethod, Decision, DecisionPayload, Payload, PolicyPayload, State, Target,
};
use ed25519_dalek::VerifyingKey;

const VAULT: &str = "vlt_test";

fn sig<T: Payload>(key: &ApproverKey, payload: &T) -> Option<RowSignature> {
    Some(RowSignature::of(&signing::sign(key, payload)))
}

/// A stand-in for an action's hash, one per action.
fn hash_of(action: &str) -> String {
    blake3::hash(action.as_bytes()).to_hex().to_string()
}

/// The unit-test credential's binding (`credentials::test_bearer`).
fn target() -> Target {
    crate::credentials::test_bearer("api", "unused").target
}

/// A journal being written: its store, the approver, and what the rows need.
struct Journal {
    s: Store,
    key: ApproverKey,
    n: u32,
    tag: String,
}

impl Journal {
    fn new(tag: &str) -> Self {
        let key = ApproverKey::generate();
        let mut s = store(tag);
        let tx = s.write().unwrap();
        let init = VaultInit {
            vault_id: VAULT.into(),
            approver_public_key: key.public_hex(),
            schema_version: 1,
        };
        append(&tx, None, None, &init).unwrap();
        let start = SessionStart {
            client: ClientLabel::default(),
            peer: Process::default(),
            parent: Process::default(),
            profile: "default".into(),
            protocol_version: "2025-11-25".into(),
            contained: false,
        };
        append(&tx, Some("ses_1"), None, &start).unwrap();
        tx.commit().unwrap();
        Self {
            s,
            key,
            n: 0,
            tag: tag.to_owned(),
        }
    }

    fn public(&self) -> VerifyingKey {
        self.key.public()
    }

    /// `credential.add` of `api` with `approval`, signed or not.
    fn credential(&mut self, approval: Approval, signed: bool) {
        let policy = PolicyPayload {
            v: PolicyPayload::VERSION,
            vault_id: VAULT.into(),
            credential_id: "cred_1".into(),
            version: 1,
            approval,
            target: target(),
        };
        let body = CredentialBody {
            id: "cred_1".into(),
            profile: "default".into(),
            name: "api".into(),
            kind: "http".into(),
            version: 1,
            approval,
            target: "https://api.example.com/".into(),
            binding: target(),
            changed: None,
            signed: signed.then(|| sig(&self.key, &policy)).flatten(),
        };
        let tx = self.s.write().unwrap();
        append(&tx, None, None, &CredentialAdded(body)).unwrap();
        tx.commit().unwrap();
    }

    fn row(&mut self, action: &str, state: State, more: impl FnOnce(&mut ActionRow)) {
        let mut row = ActionRow {
            state,
            tool: "http_request".into(),
            credential: "api".into(),
            summary: "DELETE https://api.example.com/x (credential api)".into(),
            hash: hash_of(action),
            reason: None,
            basis: None,
            method: None,
            touch: None,
            signed: None,
        };
        more(&mut row);
        let tx = self.s.write().unwrap();
        append(&tx, Some("ses_1"), Some(action), &row).unwrap();
        tx.commit().unwrap();
    }

    /// An action approved by the person (signed or not) and dispatched on that decision.
    fn decided(&mut self, signed: bool) -> String {
        self.n += 1;
        let action = format!("act_{}", self.n);
        let nonce = format!("{:032x}", self.n);
        let d = DecisionPayload {
            v: DecisionPayload::VERSION,
            vault_id: VAULT.into(),
            action_id: action.clone(),
            action_hash: hash_of(&action),
            decision: Decision::Approve,
            reason: None,
            expires_at: "2999-01-01T00:00:00Z".parse().unwrap(),
            nonce: nonce.clone(),
            issued_at: "2026-01-01T00:00:00Z".parse().unwrap(),
            method: ApprovalMethod::Pin,
        };
        let signature = signed.then(|| sig(&self.key, &d)).flatten();
        self.row(&action, State::Pending, |_| {});
        self.row(&action, State::Approved, |r| {
            r.method = Some(ApprovalMethod::Pin);
            r.signed = signature;
        });
        let decision = format!("dec_{}", self.n);
        self.row(&action, State::Dispatched, |r| {
            r.basis = Some(Basis::Decision { decision, nonce })
        });
        action
    }

    /// An action run on the credential's policy `never`.
    fn on_policy(&mut self) {
        self.n += 1;
        let action = format!("act_{}", self.n);
        self.row(&action, State::Received, |_| {});
        self.row(&action, State::Dispatched, |r| {
            r.basis = Some(Basis::Policy {
                policy: Approval::Never,
            })
        });
    }

    /// The verdict held to `key`: the same in one thread, on two workers in chunks of 1, 2 and 5,
    /// and from the export.
    fn verdict(&self, key: &VerifyingKey) -> Report {
        let one = verify_store(self.s.conn(), VAULT, &[], Some(key)).unwrap();
        for chunk in [1, 2, 5] {
            let many = verify_store_with(&self.s, VAULT, &[], Some(key), 2, chunk).unwrap();
            assert_eq!(many, one, "chunks of {chunk}");
        }
        let file =
            std::env::temp_dir().join(format!("av-held-{}-{}.jsonl", self.tag, std::process::id()));
        let _ = std::fs::remove_file(&file);
        export(self.s.conn(), &file).unwrap();
        let offline = verify_file(&file, &[], Some(key)).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(offline, one, "the export's verdict");
        one
    }
}

#[test]
fn a_journal_written_before_signatures_verifies_and_says_what_no_key_holds() {
    let mut j = Journal::new("held-upgrade");
    j.credential(Approval::Never, false);
    j.decided(false);
    j.on_policy();
    let r = j.verdict(&j.public());
    assert!(r.ok(), "{:?}", r.failure);
    assert_eq!((r.signatures.from_seq, r.signatures.unheld), (None, 2));
    assert_eq!(r.signatures.first_unheld, Some(6));
    assert!(!r.held());
    assert!(r.unchecked().unwrap().contains("2 dispatches"), "{r:?}");
    // The upgrade: from here on every decision is signed. A policy still rests on the old row.
    j.decided(true);
    j.on_policy();
    let r = j.verdict(&j.public());
    assert!(r.ok(), "{:?}", r.failure);
    assert_eq!(r.signatures.from_seq, Some(10));
    assert_eq!((r.signatures.checked, r.signatures.unheld), (1, 3));
    // Re-signed by the approver, the credential holds what follows.
    j.credential(Approval::Never, true);
    j.on_policy();
    j.decided(true);
    let r = j.verdict(&j.public());
    assert_eq!((r.signatures.checked, r.signatures.unheld), (3, 3), "{r:?}");
    // Without a key, nothing is held, and the first signature is still found.
    let file = std::env::temp_dir().join(format!("av-held-nokey-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&file);
    export(j.s.conn(), &file).unwrap();
    let r = verify_file(&file, &[], None).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert!(r.ok() && !r.held());
    assert_eq!((r.signatures.from_seq, r.signatures.checked), (Some(10), 0));
}

#[test]
fn after_the_first_signature_a_row_without_one_fails_but_a_pause_denial_does_not() {
    let mut j = Journal::new("held-strip");
    j.credential(Approval::Each, true);
    j.decided(true);
    // A pause's denial carries no signature, and needs none.
    j.row("act_p", State::Pending, |_| {});
    j.row("act_p", State::Denied, |r| r.reason = Some("paused".into()));
    assert!(j.verdict(&j.public()).held());
    j.decided(false);
    let f = j.verdict(&j.public()).failure.unwrap();
    assert_eq!((f.reason, f.seq), (Reason::Unsigned, Some(10)), "{f:?}");
}

#[test]
fn a_signature_that_does_not_verify_is_named_at_its_row_in_any_batch() {
    let mut j = Journal::new("held-batch");
    j.credential(Approval::Each, true);
    for _ in 0..6 {
        j.decided(true);
    }
    assert!(j.verdict(&j.public()).held());
    // The fourth approval's signature, one bit changed (the chain re-hashed around it).
    let approved = 4 + 3 * 3 + 1;
    let body: String =
        j.s.conn()
            .query_row("SELECT body FROM audit WHERE seq = ?1", [approved], |r| {
                r.get(0)
            })
            .unwrap();
    let sig_at = body.find("\"signature\":\"").unwrap() + 13;
    let mut bytes = body.into_bytes();
    bytes[sig_at] = if bytes[sig_at] == b'0' { b'1' } else { b'0' };
    let forged = String::from_utf8(bytes).unwrap();
    crate::audit::proptests::rewrite_from(&mut j.s, approved, &forged);
    let f = j.verdict(&j.public()).failure.unwrap();
    assert_eq!(
        (f.reason, f.seq),
        (Reason::BadSignature, Some(approved)),
        "{f:?}"
    );
    assert!(f.detail.contains("not the approver's"), "{f:?}");
}

#[test]
fn another_approvers_key_or_another_actions_decision_fails() {
    let mut j = Journal::new("held-other");
    j.credential(Approval::Each, true);
    j.decided(true);
    let other = ApproverKey::generate().public();
    let f = j.verdict(&other).failure.unwrap();
    assert_eq!((f.reason, f.seq), (Reason::BadSignature, Some(1)), "{f:?}");
    // act_1's signed approval recorded for another action.
    let approved: String =
        j.s.conn()
            .query_row(
                "SELECT body FROM audit WHERE kind = 'action.approved'",
                [],
                |r| r.get(0),
            )
            .unwrap();
    let copied: ActionRow = serde_json::from_str(&approved).unwrap();
    j.row("act_x", State::Pending, |_| {});
    j.row("act_x", State::Approved, |r| *r = copied);
    let f = j.verdict(&j.public()).failure.unwrap();
    assert_eq!((f.reason, f.seq), (Reason::BadSignature, Some(8)), "{f:?}");
    assert!(f.detail.contains("another action"), "{f:?}");
}

#[test]
fn a_grant_recorded_in_another_session_than_its_action_or_an_action_moved_between_sessions_fails() {
    use crate::wire::journal::GrantAdded;
    use crate::wire::{GrantPayload, GrantScope};
    let mut j = Journal::new("held-session");
    j.credential(Approval::Each, true);
    j.decided(true);
    let tx = j.s.write().unwrap();
    let start = SessionStart {
        client: ClientLabel::default(),
        peer: Process::default(),
        parent: Process::default(),
        profile: "default".into(),
        protocol_version: "2025-11-25".into(),
        contained: false,
    };
    append(&tx, Some("ses_2"), None, &start).unwrap();
    tx.commit().unwrap();
    let scope = GrantScope::HttpWrite {
        method: "DELETE".into(),
        path: "/x".into(),
        rewrites: vec![],
    };
    let payload = GrantPayload {
        v: GrantPayload::VERSION,
        vault_id: VAULT.into(),
        action_id: "act_1".into(),
        action_hash: hash_of("act_1"),
        credential_id: "cred_1".into(),
        credential_version: 1,
        scope: scope.clone(),
        expires_at: "2999-01-01T00:00:00Z".parse().unwrap(),
        nonce: "ab".repeat(16),
    };
    // The approver signed a grant on act_1, asked for in ses_1; the row gives it to ses_2.
    let add = GrantAdded {
        grant: "grt_1".into(),
        session: "ses_2".into(),
        action: "act_1".into(),
        credential: "api".into(),
        credential_id: "cred_1".into(),
        credential_version: 1,
        scope,
        expires_at: "2999-01-01T00:00:00.000Z".into(),
        signed: sig(&j.key, &payload),
    };
    let tx = j.s.write().unwrap();
    append(&tx, Some("ses_2"), None, &add).unwrap();
    tx.commit().unwrap();
    let f = j.verdict(&j.public()).failure.unwrap();
    assert_eq!((f.reason, f.seq), (Reason::NoValidBasis, Some(8)), "{f:?}");
    assert!(f.detail.contains("another session"), "{f:?}");
    // An action whose rows move from one session to another.
    let mut j = Journal::new("held-moved");
    j.credential(Approval::Each, true);
    j.row("act_m", State::Pending, |_| {});
    let tx = j.s.write().unwrap();
    let row = ActionRow {
        state: State::Withdrawn,
        tool: "http_request".into(),
        credential: "api".into(),
        summary: "DELETE https://api.example.com/x (credential api)".into(),
        hash: hash_of("act_m"),
        reason: None,
        basis: None,
        method: None,
        touch: None,
        signed: None,
    };
    append(&tx, Some("ses_9"), Some("act_m"), &row).unwrap();
    tx.commit().unwrap();
    let f = j.verdict(&j.public()).failure.unwrap();
    assert_eq!(
        (f.reason, f.seq),
        (Reason::IllegalTransition, Some(5)),
        "{f:?}"
    );
}
