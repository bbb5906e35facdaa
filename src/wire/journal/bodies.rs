//! The body each kind of journal row carries, the approver's signature as a row keeps it, and
//! `vault verify`'s summary line.
use super::kind::{Body, Kind};
use crate::wire::{Approval, ApprovalMethod, GrantScope, Hardening, Signed, State, Target};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

macro_rules! body {
    ($t:ty, $k:expr) => {
        impl Body for $t {
            fn kind(&self) -> Kind {
                $k
            }
        }
    };
}

/// The approver's signature as a journal row keeps it: the signed payload's canonical JSON as an
/// object, whose text in the row is exactly the text that was signed (after its type's domain
/// tag: a canonical object serializes to itself), and the signature (hex). A reader holding only
/// the approver's public key checks it offline (`vault verify --approver-key`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowSignature {
    pub payload: Box<RawValue>,
    pub signature: String,
}

impl RowSignature {
    /// The row's copy of a payload the approver signed (and the agent opened: its text is JSON).
    pub fn of(signed: &Signed) -> Self {
        Self {
            payload: RawValue::from_string(signed.payload.clone())
                .expect("an opened signed payload is JSON"),
            signature: signed.signature.clone(),
        }
    }

    /// The payload and signature as they were signed and sent.
    pub fn to_signed(&self) -> Signed {
        Signed {
            payload: self.payload.get().to_owned(),
            signature: self.signature.clone(),
        }
    }
}

impl PartialEq for RowSignature {
    fn eq(&self, other: &Self) -> bool {
        self.payload.get() == other.payload.get() && self.signature == other.signature
    }
}
impl Eq for RowSignature {}

/// Row 1: the vault and the approver key every signature is checked against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultInit {
    pub vault_id: String,
    /// Hex; checked against `meta` and `vault.key.age` by whoever trusts it.
    #[serde(default)]
    pub approver_public_key: String,
    #[serde(default)]
    pub schema_version: i64,
}
body!(VaultInit, Kind::VaultInit);

/// A custody agent started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultUnlock {
    pub agent_pid: u32,
    pub lifetime_s: u64,
    pub hardening: Hardening,
}
body!(VaultUnlock, Kind::VaultUnlock);

/// A custody agent stopped, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultLock {
    pub reason: String,
}
body!(VaultLock, Kind::VaultLock);

/// The pause switch went on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultPause {
    pub reason: String,
}
body!(VaultPause, Kind::VaultPause);

/// The pause switch went off, by the approver's signed request with this nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VaultResume {
    pub nonce: String,
    /// The approver's `ResumePayload` and signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(VaultResume, Kind::VaultResume);

/// `config.toml`'s `[network] allow`, as the approver signed it with this nonce: the hosts
/// `vault run`'s sandbox reaches without a card from now on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkAllowed {
    pub allow: Vec<String>,
    pub nonce: String,
    /// The approver's `NetworkPayload` and signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(NetworkAllowed, Kind::NetworkAllow);

/// A credential version as journaled (never its secret): the policy in force and its bindings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialBody {
    pub id: String,
    pub profile: String,
    pub name: String,
    /// `http` or `ssh`.
    pub kind: String,
    pub version: i64,
    pub approval: Approval,
    /// One line for people (`Target::summary`).
    pub target: String,
    pub binding: Target,
    /// The fields an edit changed (edits only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<Vec<String>>,
    /// The approver's signature: over the `PolicyPayload` of this version (add, edit), or the
    /// `RemovalPayload` (rm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}

/// `credential.add`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CredentialAdded(pub CredentialBody);
body!(CredentialAdded, Kind::CredentialAdd);

/// `credential.edit` (its body names what `changed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CredentialEdited(pub CredentialBody);
body!(CredentialEdited, Kind::CredentialEdit);

/// `credential.rm`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CredentialRemoved(pub CredentialBody);
body!(CredentialRemoved, Kind::CredentialRm);

/// A process the agent saw (its pid and executable, where the OS told).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: Option<u32>,
    pub exe: Option<String>,
}

/// The client's self-reported label.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientLabel {
    pub name: String,
    pub version: String,
}

/// An MCP session began: who said they were asking, and the processes the agent saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStart {
    pub client: ClientLabel,
    /// `vault mcp`.
    pub peer: Process,
    /// Its parent, the AI client.
    pub parent: Process,
    pub profile: String,
    pub protocol_version: String,
    /// The session came through `vault run`'s relay: the client runs in its sandbox. Known to the
    /// agent from the channel the connection came on, never from anything the client said.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub contained: bool,
}
body!(SessionStart, Kind::SessionStart);

/// An MCP session ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEnd {
    pub reason: String,
    pub withdrawn: u64,
    pub suppressed_rejections: u64,
}
body!(SessionEnd, Kind::SessionEnd);

/// A call refused before it became an action: only its fingerprint, never the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRejected {
    pub code: i64,
    pub reason: String,
    pub fingerprint: String,
    pub tool: Option<String>,
}
body!(CallRejected, Kind::CallRejected);

/// Refused calls over the per-second budget, counted instead of journaled one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallSuppressed {
    pub count: u64,
    pub reason: String,
}
body!(CallSuppressed, Kind::CallSuppressed);

/// The approval PIN was set: by the signed request with this nonce (the PIN is nowhere here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinSet {
    pub nonce: String,
}
body!(PinSet, Kind::PinSet);

/// A wrong approval PIN came with an approval of `action`: the `failures`-th in a row; the
/// vault pauses at the limit (`paused`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinWrong {
    pub action: String,
    pub failures: u32,
    pub paused: bool,
}
body!(PinWrong, Kind::PinWrong);

/// The vault logged in to a team's OpenBao: by the signed request with this nonce, at this
/// address, with this method (`approle` and its role_id, or `token`); never the secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenBaoLoggedIn {
    pub nonce: String,
    pub address: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_id: Option<String>,
}
body!(OpenBaoLoggedIn, Kind::OpenBaoLogin);

/// The OpenBao login was removed, by the signed request with this nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenBaoLoggedOut {
    pub nonce: String,
}
body!(OpenBaoLoggedOut, Kind::OpenBaoLogout);

/// The SSH certificate an action's connection logged in with: the action, the certificate's
/// serial, the CA role that signed it, the principal, and its validity (Unix seconds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenBaoCertIssued {
    pub action: String,
    pub serial: String,
    pub role: String,
    pub principal: String,
    pub valid_after: u64,
    pub valid_before: u64,
}
body!(OpenBaoCertIssued, Kind::OpenBaoCert);
/// A security key registered for approvals, by the signed request with this nonce: the key as
/// registered (credential id and COSE public key), which is what `vault verify` checks every
/// touch in the rows after it against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAdded {
    pub nonce: String,
    pub key: crate::wire::touch::RegisteredKey,
    /// The approver's `KeyPayload` (`add_key`) and signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(KeyAdded, Kind::KeyAdd);

/// A registered security key removed, by the signed request with this nonce; touches after this
/// row by its credential do not count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRemoved {
    pub nonce: String,
    pub name: String,
    pub credential_id: String,
    /// The approver's `KeyPayload` (`remove_key`) and signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(KeyRemoved, Kind::KeyRemove);

/// A session grant as recorded: which grant, the session it covers (also the row's session),
/// the action whose card it was given on, the credential version, what it covers and until when
/// (the journal's timestamp form, so it compares with a row's `ts` as text). Enough for a
/// verifier with no key to check each dispatch that names the grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantAdded {
    pub grant: String,
    pub session: String,
    pub action: String,
    /// The credential's name.
    pub credential: String,
    pub credential_id: String,
    pub credential_version: i64,
    pub scope: GrantScope,
    pub expires_at: String,
    /// The approver's `GrantPayload` and signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(GrantAdded, Kind::GrantAdd);

/// A session grant ended before its expiry, by the approver's signed revocation (its nonce).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRevoked {
    pub grant: String,
    pub session: String,
    pub nonce: String,
    /// The approver's `RevocationPayload` and signature (one revocation of every grant puts the
    /// same one in each of its rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}
body!(GrantRevoked, Kind::GrantRevoke);

/// What allowed a dispatch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Basis {
    /// A signed decision (by its row id), spent by its nonce.
    Decision { decision: String, nonce: String },
    /// A session grant (by its row id) and its nonce.
    Grant { grant: String, grant_nonce: String },
    /// The credential's signed policy (`never`, or `writes` for a read).
    Policy { policy: Approval },
}

/// An action moved to `state` (the row's kind is `action.<state>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRow {
    pub state: State,
    pub tool: String,
    /// The credential's name.
    pub credential: String,
    pub summary: String,
    /// The action hash.
    pub hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<Basis>,
    /// How the person proved the decision was theirs (`approved` and `denied` rows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<ApprovalMethod>,
    /// The security key's touch that came with the approval (`approved` rows of credentials
    /// under `--presence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch: Option<crate::wire::touch::TouchRecord>,
    /// The approver's signed `DecisionPayload` (`approved` rows, and `denied` rows a person
    /// decided; a pause's denial has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed: Option<RowSignature>,
}

impl Body for ActionRow {
    fn kind(&self) -> Kind {
        Kind::Action(self.state)
    }
}

/// `vault verify --json`: `{"ok":…,"rows":N,"head":{"seq":N,"hash":"<hex>"},"first_bad_seq":…,
/// "reason":…,"held":…,"signatures":K,"signed_from":S,"unchecked":…}`, keys in this order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyLine {
    pub ok: bool,
    pub rows: u64,
    pub head: Option<HeadLine>,
    pub first_bad_seq: Option<i64>,
    pub reason: Option<String>,
    /// Intact, checked against an approver key, and every dispatch held to it.
    #[serde(default)]
    pub held: bool,
    /// Approver signatures checked.
    #[serde(default)]
    pub signatures: u64,
    /// The first row that carries an approver signature.
    #[serde(default)]
    pub signed_from: Option<i64>,
    /// What an intact journal could not be held to, in one line.
    #[serde(default)]
    pub unchecked: Option<String>,
}

/// The last verified row of a `VerifyLine`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadLine {
    pub seq: i64,
    /// 64 lowercase hex digits.
    pub hash: String,
}
