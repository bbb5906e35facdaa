//! Credentials as they cross the agent's socket and a signature: what a credential may reach and
//! how its secret is used (never the secret, but in `NewCredential` and `Edit`, on the encrypted
//! channel only, hex-encoded into zeroizing memory), a new one, an edit, and a listing entry.
//! Validation and the add / edit / rm service are `credentials`'.
use super::touch::Presence;
use secrecy::{ExposeSecret, SecretSlice};
use serde::{Deserialize, Serialize};
use std::fmt;

/// When a person must approve an action that uses the credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Every action.
    Each,
    /// Once per MCP session, for a bounded time.
    Session,
    /// Writes only: GET and HEAD run without a card.
    Writes,
    /// Never (every action is still journaled).
    Never,
}

/// What a credential may reach and how its secret is used. Holds no secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    Http(HttpTarget),
    Ssh(SshTarget),
}

/// A stored credential, without its secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    pub id: String,
    pub profile: String,
    pub name: String,
    pub version: i64,
    pub approval: Approval,
    pub target: Target,
    pub created_at: String,
    pub updated_at: String,
}

/// A secret: zeroized on drop, `<redacted>` in `Debug`, never `Display`.
pub struct Secret(SecretSlice<u8>);

/// Where an HTTP credential may be sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpTarget {
    pub scheme: String,
    pub host: String,
    pub port: u16,
    pub path_prefix: String,
    /// `None`: any method.
    pub methods: Option<Vec<String>>,
    pub auth: HttpAuth,
    /// A PEM file of extra trusted roots for this credential's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// Request-rewriting headers (lowercase) and `_method` that the agent may send with this
    /// credential (`--allow-header`); all others of `REWRITING_HEADERS` are refused. Older rows
    /// have none; an empty list is not serialized, so their policy signatures still verify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Team mode: the secret is not stored here but read at dispatch from the team's OpenBao
    /// (`--secret-from openbao:MOUNT/PATH#FIELD`). Absent (not `null`) on every other
    /// credential, so the policy signatures of older rows still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_from: Option<OpenBaoRef>,
    /// Whether an approval needs a touch of a registered security key (`--presence`). Absent
    /// when none is needed, so the policy signatures of older rows still verify.
    #[serde(default, skip_serializing_if = "Presence::is_none")]
    pub presence: Presence,
}

/// A field of a KV v2 secret in the team's OpenBao: `openbao:MOUNT/PATH#FIELD`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBaoRef {
    pub mount: String,
    pub path: String,
    pub field: String,
}

impl fmt::Display for OpenBaoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "openbao:{}/{}#{}", self.mount, self.path, self.field)
    }
}

/// How the secret goes into the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum HttpAuth {
    /// `Authorization: Bearer <secret>`.
    Bearer,
    /// `Authorization: Basic base64(user:secret)`.
    Basic { username: String },
    /// `<name>: <format with {secret} replaced>`.
    Header { name: String, format: String },
    /// `?<param>=<secret>`.
    Query { param: String },
}

/// Where an SSH credential may connect, as whom, and what it may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshTarget {
    pub host: String,
    pub port: u16,
    pub user: String,
    /// `SHA256:<base64>` of the server's host key; the connection is refused on any other key.
    pub host_key: String,
    pub auth: SshAuth,
    /// Patterns a command must match; empty: any command (the approval is the gate).
    pub allow_commands: Vec<String>,
    /// Whether an approval needs a touch of a registered security key (`--presence`); absent
    /// when none is needed.
    #[serde(default, skip_serializing_if = "Presence::is_none")]
    pub presence: Presence,
}

/// How the vault authenticates (the key or password itself is the secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SshAuth {
    /// An OpenSSH private key; its public algorithm and fingerprint, for people.
    Key {
        algorithm: String,
        fingerprint: String,
    },
    Password,
    /// Team mode: no stored secret. At each new connection the agent makes an ephemeral key in
    /// memory and has the team's OpenBao SSH CA (`MOUNT/sign/ROLE`) sign it as a short-lived
    /// user certificate (`--cert-from openbao:MOUNT/sign/ROLE`).
    OpenbaoCert {
        mount: String,
        role: String,
    },
}

/// A credential to add. Its id is chosen by the person's command, so the approver's signature can
/// cover the exact credential it becomes.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCredential {
    pub id: String,
    pub profile: String,
    pub name: String,
    pub approval: Approval,
    pub target: Target,
    pub secret: Secret,
}

/// What `vault edit` may change; `None` leaves a field as it is.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Edit {
    pub approval: Option<Approval>,
    /// `--presence`: whether approvals need a security-key touch from now on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
    /// `--host`: HTTP `scheme://host[:port]` (as `vault add` takes it), SSH `host[:port]`.
    pub host: Option<String>,
    pub path_prefix: Option<String>,
    /// `Some(None)`: any method again.
    #[serde(
        deserialize_with = "some_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub methods: Option<Option<Vec<String>>>,
    pub host_key: Option<String>,
    pub allow_commands: Option<Vec<String>>,
    /// HTTP: replaces the allowed request-rewriting headers (`Some(vec![])` clears them).
    pub allow_headers: Option<Vec<String>>,
    /// SSH: how the new secret logs in (`--key-file`: the key's algorithm and fingerprint;
    /// `--password-stdin`). An SSH credential's secret changes only with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ssh_auth: Option<SshAuth>,
    pub secret: Option<Secret>,
    /// HTTP: read the secret from the team's OpenBao from now on (no secret is stored); a new
    /// `secret` instead ends such a reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_from: Option<OpenBaoRef>,
}

/// A credential as a listing shows it: the policy that applies (the stored one only if the
/// approver signed this version, else `each`) and whether it is signed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listed {
    pub credential: Credential,
    pub signed: bool,
}

impl Secret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(SecretSlice::from(bytes))
    }
    pub fn expose(&self) -> &[u8] {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// On the agent's socket only (a person's `vault add` handing the secret to the custody agent):
/// hex, decoded straight into zeroizing memory.
impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&zeroize::Zeroizing::new(hex::encode(self.expose())))
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = zeroize::Zeroizing::new(String::deserialize(d)?);
        let mut bytes = zeroize::Zeroizing::new(vec![0u8; text.len() / 2]);
        hex::decode_to_slice(text.as_bytes(), &mut bytes)
            .map_err(|_| serde::de::Error::custom("a secret must be hex"))?;
        Ok(Secret::new(std::mem::take(&mut *bytes)))
    }
}

/// A present field (even `null`) is `Some`: `null` means "any method again".
fn some_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Vec<String>>>, D::Error> {
    use serde::Deserialize;
    Option::<Vec<String>>::deserialize(d).map(Some)
}
