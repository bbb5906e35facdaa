//! Signatures by the approver key: decisions, session grants, credential policies and removals,
//! and `resume`. Each message is a domain tag followed by canonical JSON, so no signature can be
//! replayed as another kind. A process that holds no approver key trusts the public key
//! `vault unlock` derived from `vault.key.age` (`Trust`), never one read from the database; no
//! process without the passphrase can sign.
use super::ApproverKey;
use crate::canonical;
use ed25519_dalek::{Signature, Signer, VerifyingKey};
use serde_json::Value;

pub const DECISION: &[u8] = b"agent-vault decision v1\n";
pub const GRANT: &[u8] = b"agent-vault session grant v1\n";
pub const POLICY: &[u8] = b"agent-vault credential policy v1\n";
pub const RESUME: &[u8] = b"agent-vault resume v1\n";
pub const REMOVE: &[u8] = b"agent-vault credential removal v1\n";

pub use crate::wire::Signed;

impl Signed {
    /// The payload as JSON, if the signature over it verifies.
    pub fn open(&self, trust: &Trust, tag: &[u8]) -> Option<Value> {
        verify(&trust.approver, tag, &self.payload, &self.signature)
            .then(|| serde_json::from_str(&self.payload).ok())
            .flatten()
            .filter(|v: &Value| v["vault_id"] == trust.vault_id.as_str())
    }
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

/// Signs `payload` (canonicalized here); returns (canonical payload, hex signature).
pub fn sign(key: &ApproverKey, tag: &[u8], payload: &Value) -> (String, String) {
    let text = canonical::to_string(payload);
    let sig = key.signing_key().sign(&message(tag, &text));
    (text, hex::encode(sig.to_bytes()))
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
    use serde_json::json;

    #[test]
    fn signatures_bind_tag_and_exact_payload() {
        let k = ApproverKey::generate();
        let (text, sig) = sign(&k, DECISION, &json!({"b": 1, "a": "x"}));
        assert_eq!(text, r#"{"a":"x","b":1}"#);
        assert!(verify(&k.public(), DECISION, &text, &sig));
        assert!(
            !verify(&k.public(), GRANT, &text, &sig),
            "another kind of message"
        );
        assert!(!verify(&k.public(), DECISION, r#"{"a":"x","b":2}"#, &sig));
        assert!(
            !verify(&k.public(), DECISION, r#"{"b":1,"a":"x"}"#, &sig),
            "not canonical"
        );
        assert!(!verify(
            &ApproverKey::generate().public(),
            DECISION,
            &text,
            &sig
        ));
        assert!(!verify(&k.public(), DECISION, &text, "00"));
    }
}
