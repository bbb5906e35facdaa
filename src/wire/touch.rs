//! Security-key approvals as they travel and are signed: a registered key (its credential id and
//! COSE public key, never anything secret), the approver's signed request to register or remove
//! one (`payload::KeyPayload`), what a credential requires (`Presence`), and the proof a touch gives (`TouchProof`: the
//! key's assertion over the challenge `fido::challenge` derives from the vault id, the action hash
//! and the decision's nonce). Registering and checking is `approvals::touch`'s.
use serde::{Deserialize, Serialize};

/// A FIDO2 credential the approver registered: a name for people, the credential id and the
/// COSE_Key public key (both hex), and its algorithm (`ES256` or `EdDSA`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisteredKey {
    pub name: String,
    pub credential_id: String,
    pub public_key: String,
    pub algorithm: String,
}

/// What an approval of a credential's actions needs besides the PIN or passphrase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Presence {
    /// Nothing more.
    #[default]
    None,
    /// A touch of a registered security key, for every action.
    Key,
    /// A touch for writes (HTTP methods other than GET and HEAD, and every SSH command).
    KeyForWrites,
}

impl Presence {
    pub fn is_none(&self) -> bool {
        *self == Presence::None
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Presence::None => "none",
            Presence::Key => "key",
            Presence::KeyForWrites => "key-for-writes",
        }
    }

    /// Whether an action that is (`write`) or is not a write needs a touch.
    pub fn needs_touch(self, write: bool) -> bool {
        match self {
            Presence::None => false,
            Presence::Key => true,
            Presence::KeyForWrites => write,
        }
    }
}

/// A touch, as `vault approve` got it from the key: which registered credential signed (hex),
/// the authenticator data and the signature (hex). The counter is read from the data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TouchProof {
    pub credential_id: String,
    pub authenticator_data: String,
    pub signature: String,
}

/// A touch as the journal keeps it, in the decision's `action.approved` row: the decision's
/// nonce (with the vault id and the row's action hash, the challenge the key signed) and the
/// proof. `vault verify` checks it against the key the journal registered, with no device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TouchRecord {
    pub nonce: String,
    pub credential_id: String,
    pub authenticator_data: String,
    pub signature: String,
}
