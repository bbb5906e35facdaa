//! What the approver signs, one type per kind: a decision, a session grant (and its scope), a
//! credential's policy, a removal, a resume and a grant revocation. Each is signed as `TAG ‖ canonical JSON` of its fields (so
//! no signature can be replayed as another kind), carries its format version and the vault id,
//! and is read back only through its type (unknown fields refused, timestamps as instants).
//! Signing and verifying are `keys::signing`'s; what each payload must match is its consumer's.
use super::ts::millis;
use super::{Approval, Target};
use jiff::Timestamp;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// A payload the approver signs.
pub trait Payload: Serialize + DeserializeOwned {
    /// The domain tag the signature covers before the payload.
    const TAG: &'static [u8];
    /// The format version this build writes and accepts.
    const VERSION: u32;
    fn version(&self) -> u32;
    fn vault_id(&self) -> &str;
}

macro_rules! payload {
    ($t:ty, $tag:literal, $v:literal) => {
        impl Payload for $t {
            const TAG: &'static [u8] = $tag;
            const VERSION: u32 = $v;
            fn version(&self) -> u32 {
                self.v
            }
            fn vault_id(&self) -> &str {
                &self.vault_id
            }
        }
    };
}

/// What the person decided about one action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Deny => "deny",
        }
    }
}

/// How the person proved, for this decision, that they were the one deciding (docs/design.md
/// §4): the approval PIN typed on the card (checked by the agent), the passphrase typed for this
/// decision (`vault approve --id … --passphrase-stdin`), or, where a signed setting allows it, a
/// key press alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMethod {
    Pin,
    Passphrase,
    Key,
}

impl ApprovalMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalMethod::Pin => "pin",
            ApprovalMethod::Passphrase => "passphrase",
            ApprovalMethod::Key => "key",
        }
    }
}

/// A decision on exactly one action (by id and the hash the approver re-derived), valid until
/// the action expires, single use by its nonce, and how it was made (`method`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionPayload {
    pub v: u32,
    pub vault_id: String,
    pub action_id: String,
    pub action_hash: String,
    pub decision: Decision,
    /// Always written (`null` when none was given).
    pub reason: Option<String>,
    #[serde(with = "millis")]
    pub expires_at: Timestamp,
    pub nonce: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
    pub method: ApprovalMethod,
}
// 2: `method`. A version-1 decision (no method) is no longer accepted.
payload!(DecisionPayload, b"agent-vault decision v1\n", 2);

/// "Approve for this session": names the action it was given for (the recorder finds the
/// session from its own records), the credential version, and what it covers (`scope`, computed
/// from that action by `policy::scope::grant_scope`, shown on the card before `s` and checked
/// against the action by the recorder), until `expires_at`. Version 3 added the scope; a
/// version 2 grant (any call on the credential) is no longer honoured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantPayload {
    pub v: u32,
    pub vault_id: String,
    pub action_id: String,
    pub action_hash: String,
    pub credential_id: String,
    pub credential_version: i64,
    pub scope: GrantScope,
    #[serde(with = "millis")]
    pub expires_at: Timestamp,
    pub nonce: String,
}
payload!(GrantPayload, b"agent-vault session grant v1\n", 3);

/// What a session grant covers, besides its session, credential version and expiry. Paths are
/// URL paths exactly as sent (the safe alphabet of `policy::path`: no dot segments or encoded
/// separators, so a prefix is a directory).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum GrantScope {
    /// HTTP reads: `methods` (GET and HEAD) with no body, no rewriting header and no `_method`,
    /// on a path that starts with `prefix` (which ends in `/`), with any query.
    HttpReads {
        methods: Vec<String>,
        prefix: String,
    },
    /// One HTTP write: exactly `method` on exactly `path`, with any query, headers and body, and
    /// exactly these method- or URL-rewriting headers (`name: value`) and `_method` parameters
    /// (`_method=value`), sorted (usually none).
    HttpWrite {
        method: String,
        path: String,
        rewrites: Vec<String>,
    },
    /// One SSH command, exactly as sent (rebuilt and quoted where a pattern matched it).
    SshCommand { command: String },
    /// `vault run`'s network: connections to exactly this host (lower case, an IPv6 address
    /// without brackets) and port.
    Network { host: String, port: u16 },
}

/// Ending session grants: one by id, or (`grant: null`) every grant active when it was issued.
/// Single use by its nonce, and fresh (`issued_at` within minutes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RevocationPayload {
    pub v: u32,
    pub vault_id: String,
    pub grant: Option<String>,
    pub nonce: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(RevocationPayload, b"agent-vault grant revocation v1\n", 1);

/// A credential version's whole policy: its approval and every binding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyPayload {
    pub v: u32,
    pub vault_id: String,
    pub credential_id: String,
    pub version: i64,
    pub approval: Approval,
    pub target: Target,
}
payload!(PolicyPayload, b"agent-vault credential policy v1\n", 1);

/// What a single-use request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Rm,
    Resume,
    #[serde(rename = "set_pin")]
    SetPin,
    #[serde(rename = "openbao_login")]
    OpenBaoLogin,
    #[serde(rename = "openbao_logout")]
    OpenBaoLogout,
    #[serde(rename = "add_key")]
    AddKey,
    #[serde(rename = "remove_key")]
    RemoveKey,
}

/// Removing one credential at one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemovalPayload {
    pub v: u32,
    pub vault_id: String,
    pub op: Op,
    pub credential_id: String,
    pub version: i64,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(RemovalPayload, b"agent-vault credential removal v1\n", 1);

/// Lifting the pause switch, once (by its nonce), soon after it was issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumePayload {
    pub v: u32,
    pub vault_id: String,
    pub op: Op,
    pub nonce: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(ResumePayload, b"agent-vault resume v1\n", 1);

/// `[network] allow` of `config.toml` as the approver signed it (`vault config --sign`): the
/// hosts `vault run`'s sandbox reaches without a card, as written there. Recorded once (by its
/// nonce), soon after it was issued; the newest recorded one is in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkPayload {
    pub v: u32,
    pub vault_id: String,
    pub allow: Vec<String>,
    pub nonce: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(NetworkPayload, b"agent-vault network allow v1\n", 1);

/// Setting the approval PIN, once (by its nonce), soon after it was issued. It carries no PIN and
/// no hash of one: `commitment` is blake3 of the nonce and the PIN, so the signature covers the
/// PIN that travels beside it (over the encrypted channel) while the payload, never stored, says
/// nothing a guesser could test offline without the nonce.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinPayload {
    pub v: u32,
    pub vault_id: String,
    pub op: Op,
    pub nonce: String,
    pub commitment: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(PinPayload, b"agent-vault approval pin v1\n", 1);

/// Where the team's OpenBao is and how the vault logs in to it (never the secret_id or token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBaoLogin {
    /// `https://host[:port]` (plain `http://` only on loopback).
    pub address: String,
    /// A PEM file of the CA that signed the server's certificate (a private CA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    pub auth: OpenBaoAuth,
    /// The KV v2 mount the journal's head is written to (`agent-vault/<vault id>/journal-head`).
    pub journal_mount: String,
}

/// How the vault logs in: AppRole (the agent logs in, renews, and logs in again), or a token
/// given as it is (used until it expires).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "lowercase", deny_unknown_fields)]
pub enum OpenBaoAuth {
    Approle { mount: String, role_id: String },
    Token,
}

/// Logging the vault in to OpenBao (`login`, with `commitment` over the secret_id or token that
/// travels beside it, as `PinPayload` does) or out (`login: None`), once, soon after it was issued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBaoPayload {
    pub v: u32,
    pub vault_id: String,
    pub op: Op,
    pub nonce: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<OpenBaoLogin>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub commitment: String,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(OpenBaoPayload, b"agent-vault openbao login v1\n", 1);

/// Registering (`op: add_key`) or removing (`op: remove_key`) one key, once (by its nonce), soon
/// after it was issued, signed by the approver (the passphrase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyPayload {
    pub v: u32,
    pub vault_id: String,
    pub op: Op,
    pub nonce: String,
    pub key: super::touch::RegisteredKey,
    #[serde(with = "millis")]
    pub issued_at: Timestamp,
}
payload!(KeyPayload, b"agent-vault approver key v1\n", 1);
