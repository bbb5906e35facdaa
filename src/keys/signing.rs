//! Signatures by the approver key: decisions, session grants, credential policies and removals,
//! and `resume` (the typed payloads of `wire::payload`). Each message is the payload type's
//! domain tag followed by its canonical JSON, so no signature can be replayed as another kind.
//! A process that holds no approver key trusts the public key `vault unlock` derived from
//! `vault.key.age` (`Trust`), never one read from the database; no process without the
//! passphrase can sign.
use super::ApproverKey;
use crate::canonical;
use crate::wire::Payload;
use ed25519_dalek::{Signature, Signer, VerifyingKey};
use serde_json::Value;

pub use crate::wire::Signed;

impl Signed {
    /// The payload, if the signature over it verifies, it parses as `T` (nothing unknown), and
    /// it is of this build's format version and for the trusted vault.
    pub fn open<T: Payload>(&self, trust: &Trust) -> Option<T> {
        if !crate::mutation::off("request_signature")
            && !verify(&trust.approver, T::TAG, &self.payload, &self.signature)
        {
            return None;
        }
        serde_json::from_str::<T>(&self.payload)
            .ok()
            .filter(|p| p.version() == T::VERSION && p.vault_id() == trust.vault_id)
    }
}

/// The canonical text a payload is signed as.
pub fn canonical_payload<T: Payload>(payload: &T) -> String {
    let value = serde_json::to_value(payload).expect("a signed payload always serializes");
    canonical::to_string(&value)
}

/// Signs a typed payload: its canonical text and the approver's signature over `TAG ‖ text`.
pub fn sign<T: Payload>(key: &ApproverKey, payload: &T) -> Signed {
    let text = canonical_payload(payload);
    let sig = key.signing_key().sign(&message(T::TAG, &text));
    Signed {
        payload: text,
        signature: hex::encode(sig.to_bytes()),
    }
}

/// Whether `signature` is the approver's over this payload as it is (re-serialized here).
pub fn is_signed_by<T: Payload>(public: &VerifyingKey, payload: &T, signature: &str) -> bool {
    verify(public, T::TAG, &canonical_payload(payload), signature)
}

/// What a process that holds no approver key trusts: the vault id and the approver's public key,
/// both derived from `vault.key.age` by whoever had the passphrase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trust {
    pub vault_id: String,
    pub approver: VerifyingKey,
}

impl Trust {
    pub fn new(vault_id: &str, approver: &ApproverKey) -> Self {
        Self {
            vault_id: vault_id.to_owned(),
            approver: approver.public(),
        }
    }
}

fn message(tag: &[u8], payload: &str) -> Vec<u8> {
    let mut m = Vec::with_capacity(tag.len() + payload.len());
    m.extend_from_slice(tag);
    m.extend_from_slice(payload.as_bytes());
    m
}

/// Whether `signature` (hex) is the approver's over `tag ‖ payload` (already canonical).
/// A signature that verified once is remembered (by a digest of key, tag, payload and signature,
/// so only those exact bytes hit): the same policy signature is checked at submission and again
/// at every claim, and an ed25519 verification is most of a call's CPU in the agent.
pub fn verify(public: &VerifyingKey, tag: &[u8], payload: &str, signature: &str) -> bool {
    let digest = {
        let mut h = blake3::Hasher::new();
        for part in [
            public.as_bytes(),
            tag,
            payload.as_bytes(),
            signature.as_bytes(),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        *h.finalize().as_bytes()
    };
    if verified().lock().is_ok_and(|v| v.contains(&digest)) {
        return true;
    }
    let Ok(bytes) = hex::decode(signature) else {
        return false;
    };
    let Ok(sig) = Signature::from_slice(&bytes) else {
        return false;
    };
    // The payload must be exactly canonical: a re-serialized variant is not what was signed.
    let canonical_ok =
        serde_json::from_str::<Value>(payload).is_ok_and(|v| canonical::to_string(&v) == payload);
    let ok = canonical_ok && public.verify_strict(&message(tag, payload), &sig).is_ok();
    if ok {
        if let Ok(mut v) = verified().lock() {
            if v.len() >= VERIFIED_MAX {
                v.clear();
            }
            v.insert(digest);
        }
    }
    ok
}

/// Most remembered verifications (32 bytes each) before the set starts afresh.
const VERIFIED_MAX: usize = 4096;

fn verified() -> &'static std::sync::Mutex<std::collections::HashSet<[u8; 32]>> {
    static V: std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<[u8; 32]>>> =
        std::sync::OnceLock::new();
    V.get_or_init(Default::default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Decision, DecisionPayload, GrantPayload, Op, ResumePayload};
    use serde_json::json;

    fn resume(vault: &str) -> ResumePayload {
        ResumePayload {
            v: 1,
            vault_id: vault.into(),
            op: Op::Resume,
            nonce: "00112233445566778899aabbccddeeff".into(),
            issued_at: "2026-11-30T13:42:42.120Z".parse().unwrap(),
        }
    }

    #[test]
    fn signatures_bind_tag_and_exact_payload() {
        let k = ApproverKey::generate();
        let trust = Trust::new("v1", &k);
        let signed = sign(&k, &resume("v1"));
        assert_eq!(
            signed.payload,
            r#"{"issued_at":"2026-11-30T13:42:42.120Z","nonce":"00112233445566778899aabbccddeeff","op":"resume","v":1,"vault_id":"v1"}"#
        );
        assert_eq!(signed.open::<ResumePayload>(&trust), Some(resume("v1")));
        assert!(
            signed.open::<GrantPayload>(&trust).is_none(),
            "another kind of message"
        );
        assert!(!verify(
            &k.public(),
            GrantPayload::TAG,
            &signed.payload,
            &signed.signature
        ));
        let changed = Signed {
            payload: signed.payload.replace("120Z", "121Z"),
            ..signed.clone()
        };
        assert!(changed.open::<ResumePayload>(&trust).is_none());
        let reordered = Signed {
            payload: signed
                .payload
                .replace(r#"{"issued_at":"2026-11-30T13:42:42.120Z","#, "{")
                .replace('}', r#","issued_at":"2026-11-30T13:42:42.120Z"}"#),
            ..signed.clone()
        };
        assert!(
            !verify(
                &k.public(),
                ResumePayload::TAG,
                &reordered.payload,
                &reordered.signature
            ),
            "not canonical"
        );
        let other = Trust::new("v1", &ApproverKey::generate());
        assert!(
            signed.open::<ResumePayload>(&other).is_none(),
            "another approver"
        );
        let elsewhere = sign(&k, &resume("v2"));
        assert!(
            elsewhere.open::<ResumePayload>(&trust).is_none(),
            "another vault"
        );
        let future = sign(
            &k,
            &ResumePayload {
                v: 2,
                ..resume("v1")
            },
        );
        assert!(
            future.open::<ResumePayload>(&trust).is_none(),
            "another format version"
        );
        assert!(!verify(
            &k.public(),
            ResumePayload::TAG,
            &signed.payload,
            "00"
        ));
    }

    /// The typed payloads sign the same bytes the `json!` payloads of earlier builds signed, so a
    /// decision recorded by one build verifies in the next.
    #[test]
    fn typed_payloads_are_byte_compatible_with_the_json_they_replace() {
        let d = DecisionPayload {
            v: 2,
            vault_id: "vlt".into(),
            action_id: "act_1".into(),
            action_hash: "ab".into(),
            decision: Decision::Approve,
            reason: None,
            expires_at: "2026-11-30T13:47:42Z".parse().unwrap(),
            nonce: "n".repeat(32),
            issued_at: "2026-11-30T13:42:42.5Z".parse().unwrap(),
            method: crate::wire::ApprovalMethod::Pin,
        };
        let old = json!({
            "v": 2, "vault_id": "vlt", "action_id": "act_1", "action_hash": "ab",
            "decision": "approve", "reason": null, "expires_at": "2026-11-30T13:47:42.000Z",
            "nonce": "n".repeat(32), "issued_at": "2026-11-30T13:42:42.500Z", "method": "pin",
        });
        assert_eq!(canonical_payload(&d), canonical::to_string(&old));
        let g = GrantPayload {
            v: 3,
            vault_id: "vlt".into(),
            action_id: "act_1".into(),
            action_hash: "ab".into(),
            credential_id: "cred_1".into(),
            credential_version: 3,
            scope: crate::wire::GrantScope::HttpReads {
                methods: vec!["GET".into(), "HEAD".into()],
                prefix: "/a/".into(),
            },
            expires_at: "2026-11-30T14:42:42.001Z".parse().unwrap(),
            nonce: "m".repeat(32),
        };
        let old = json!({
            "v": 3, "vault_id": "vlt", "action_id": "act_1", "action_hash": "ab",
            "credential_id": "cred_1", "credential_version": 3,
            "scope": {"kind": "http_reads", "methods": ["GET", "HEAD"], "prefix": "/a/"},
            "expires_at": "2026-11-30T14:42:42.001Z", "nonce": "m".repeat(32),
        });
        assert_eq!(canonical_payload(&g), canonical::to_string(&old));
    }

    /// A session grant of the earlier format (version 2: any call on the credential, no scope),
    /// properly signed, opens as nothing: it no longer covers anything.
    #[test]
    fn a_version_2_grant_is_not_honoured() {
        let k = ApproverKey::generate();
        let trust = Trust::new("vlt", &k);
        let v2 = json!({
            "v": 2, "vault_id": "vlt", "action_id": "act_1", "action_hash": "ab",
            "credential_id": "cred_1", "credential_version": 3,
            "expires_at": "2999-11-30T14:42:42.001Z", "nonce": "m".repeat(32),
        });
        let text = canonical::to_string(&v2);
        let sig = k.signing_key().sign(&message(GrantPayload::TAG, &text));
        let signed = Signed {
            payload: text,
            signature: hex::encode(sig.to_bytes()),
        };
        assert!(verify(
            &k.public(),
            GrantPayload::TAG,
            &signed.payload,
            &signed.signature
        ));
        assert_eq!(signed.open::<GrantPayload>(&trust), None);
        // The same with a scope but still version 2: refused by its version.
        let mut with_scope = v2;
        with_scope["scope"] = json!({"kind": "ssh_command", "command": "ls"});
        let text = canonical::to_string(&with_scope);
        let sig = k.signing_key().sign(&message(GrantPayload::TAG, &text));
        let signed = Signed {
            payload: text,
            signature: hex::encode(sig.to_bytes()),
        };
        assert_eq!(signed.open::<GrantPayload>(&trust), None);
    }
}
