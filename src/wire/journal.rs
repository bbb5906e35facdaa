//! The journal's row kinds and the body each kind carries. Writers append a body type (its kind
//! comes with it, `Body::kind`); readers match on `Kind` and parse the body type of that kind.
//! Bodies are read leniently (an older build's extra field is history, protected by the chain),
//! and written exactly as the hash covers them: a field that is `null` stays `null`, one that is
//! absent stays absent.
use super::{Approval, ApprovalMethod, GrantScope, Hardening, Signed, State, Target};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// What a journal row records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    VaultInit,
    VaultUnlock,
    VaultLock,
    VaultPause,
    VaultResume,
    CredentialAdd,
    CredentialEdit,
    CredentialRm,
    SessionStart,
    SessionEnd,
    CallRejected,
    CallSuppressed,
    /// The approval PIN was set or changed (by the approver's signed request).
    PinSet,
    /// A wrong approval PIN was typed on a card.
    PinWrong,
    /// A session grant was recorded (`s` on a card).
    GrantAdd,
    /// A session grant was revoked (`vault grants revoke`).
    GrantRevoke,
    /// The vault was logged in to a team's OpenBao (`vault openbao login`, signed).
    OpenBaoLogin,
    /// The vault's OpenBao login was removed (`vault openbao logout`, signed).
    OpenBaoLogout,
    /// OpenBao's SSH CA signed a certificate for one action's connection.
    OpenBaoCert,
    /// A security key was registered for approvals (`vault approver add-key`, signed).
    KeyAdd,
    /// A registered security key was removed (`vault approver remove-key`, signed).
    KeyRemove,
    /// An action moved to this state (`action.<state>`).
    Action(State),
}

impl Kind {
    /// Every kind that is not an action's.
    const PLAIN: [Kind; 21] = [
        Kind::VaultInit,
        Kind::VaultUnlock,
        Kind::VaultLock,
        Kind::VaultPause,
        Kind::VaultResume,
        Kind::CredentialAdd,
        Kind::CredentialEdit,
        Kind::CredentialRm,
        Kind::SessionStart,
        Kind::SessionEnd,
        Kind::CallRejected,
        Kind::CallSuppressed,
        Kind::PinSet,
        Kind::PinWrong,
        Kind::GrantAdd,
        Kind::GrantRevoke,
        Kind::OpenBaoLogin,
        Kind::OpenBaoLogout,
        Kind::OpenBaoCert,
        Kind::KeyAdd,
        Kind::KeyRemove,
    ];

    /// Every kind, for tests and documentation.
    pub fn all() -> impl Iterator<Item = Kind> {
        Self::PLAIN
            .into_iter()
            .chain(State::ALL.into_iter().map(Kind::Action))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::VaultInit => "vault.init",
            Kind::VaultUnlock => "vault.unlock",
            Kind::VaultLock => "vault.lock",
            Kind::VaultPause => "vault.pause",
            Kind::VaultResume => "vault.resume",
            Kind::CredentialAdd => "credential.add",
            Kind::CredentialEdit => "credential.edit",
            Kind::CredentialRm => "credential.rm",
            Kind::SessionStart => "session.start",
            Kind::SessionEnd => "session.end",
            Kind::CallRejected => "call.rejected",
            Kind::CallSuppressed => "call.suppressed",
            Kind::PinSet => "approval.pin_set",
            Kind::PinWrong => "approval.pin_wrong",
            Kind::GrantAdd => "grant.add",
            Kind::GrantRevoke => "grant.revoke",
            Kind::OpenBaoLogin => "openbao.login",
            Kind::OpenBaoLogout => "openbao.logout",
            Kind::OpenBaoCert => "openbao.cert",
            Kind::KeyAdd => "approver.key_add",
            Kind::KeyRemove => "approver.key_remove",
            Kind::Action(s) => match s {
                State::Received => "action.received",
                State::Pending => "action.pending",
                State::Approved => "action.approved",
                State::Denied => "action.denied",
                State::Expired => "action.expired",
                State::Withdrawn => "action.withdrawn",
                State::Dispatched => "action.dispatched",
                State::Completed => "action.completed",
                State::FailedBeforeSend => "action.failed_before_send",
                State::Indeterminate => "action.indeterminate",
            },
        }
    }

    /// Whether a row of this kind may name an action without being a step of its lifecycle: a
    /// note about the action (a wrong PIN typed on its card), which moves it nowhere.
    pub fn notes_action(self) -> bool {
        matches!(self, Kind::PinWrong)
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s.strip_prefix("action.") {
            Some(state) => State::parse(state).map(Kind::Action),
            None => Self::PLAIN.into_iter().find(|k| k.as_str() == s),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A row body: its shape says which kind of row it is.
pub trait Body: Serialize {
    fn kind(&self) -> Kind;
}

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
    pub key: super::touch::RegisteredKey,
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
    pub touch: Option<super::touch::TouchRecord>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_reads_back_and_nothing_else_does() {
        let all: Vec<Kind> = Kind::all().collect();
        assert_eq!(all.len(), 31);
        for k in &all {
            assert_eq!(Kind::parse(k.as_str()), Some(*k), "{k}");
        }
        for s in [
            "action.",
            "action.done",
            "vault",
            "x",
            "vault.init ",
            "Vault.init",
        ] {
            assert_eq!(Kind::parse(s), None, "{s}");
        }
        let distinct: std::collections::HashSet<_> = all.iter().map(|k| k.as_str()).collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn a_basis_reads_back_as_what_it_was() {
        for text in [
            r#"{"decision":"dec_1","nonce":"n"}"#,
            r#"{"grant":"grt_1","grant_nonce":"n"}"#,
            r#"{"policy":"never"}"#,
            r#"{"policy":"writes"}"#,
        ] {
            let b: Basis = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&b).unwrap(), text);
        }
    }

    /// The typed bodies write the bytes the `json!` bodies of earlier builds wrote (absent stays
    /// absent, `null` stays `null`), so a journal keeps one form across the change.
    #[test]
    fn typed_bodies_are_byte_compatible_with_the_json_they_replace() {
        fn same<B: Body>(typed: &B, old: serde_json::Value) {
            let value = serde_json::to_value(typed).unwrap();
            assert_eq!(
                crate::canonical::to_string(&value),
                crate::canonical::to_string(&old),
                "{}",
                typed.kind()
            );
        }
        let row = ActionRow {
            state: State::Dispatched,
            tool: "http_request".into(),
            credential: "api".into(),
            summary: "GET /".into(),
            hash: "ab".into(),
            reason: None,
            basis: Some(Basis::Decision {
                decision: "dec_1".into(),
                nonce: "n".into(),
            }),
            method: None,
            touch: None,
            signed: None,
        };
        same(
            &row,
            json!({"state": "dispatched", "tool": "http_request", "credential": "api",
                "summary": "GET /", "hash": "ab", "basis": {"decision": "dec_1", "nonce": "n"}}),
        );
        let plain = ActionRow {
            state: State::Pending,
            basis: None,
            ..row
        };
        same(
            &plain,
            json!({"state": "pending", "tool": "http_request", "credential": "api",
                "summary": "GET /", "hash": "ab"}),
        );
        same(
            &CallRejected {
                code: -32602,
                reason: "bad".into(),
                fingerprint: "ff".into(),
                tool: None,
            },
            json!({"code": -32602, "reason": "bad", "fingerprint": "ff", "tool": null}),
        );
        same(
            &SessionStart {
                client: ClientLabel {
                    name: "c".into(),
                    version: "1".into(),
                },
                peer: Process {
                    pid: Some(7),
                    exe: None,
                },
                parent: Process::default(),
                profile: "default".into(),
                protocol_version: "2025-11-25".into(),
                contained: false,
            },
            json!({"client": {"name": "c", "version": "1"}, "peer": {"pid": 7, "exe": null},
                "parent": {"pid": null, "exe": null}, "profile": "default",
                "protocol_version": "2025-11-25"}),
        );
        same(
            &SessionEnd {
                reason: "eof".into(),
                withdrawn: 2,
                suppressed_rejections: 0,
            },
            json!({"reason": "eof", "withdrawn": 2, "suppressed_rejections": 0}),
        );
        let target: Target = serde_json::from_value(json!({"kind": "ssh",
            "host": "h", "port": 22, "user": "u", "host_key": "SHA256:x", "allow_commands": [],
            "auth": {"type": "password"}}))
        .unwrap();
        let cred = CredentialBody {
            id: "cred_1".into(),
            profile: "default".into(),
            name: "web".into(),
            kind: "ssh".into(),
            version: 2,
            approval: Approval::Each,
            target: "u@h:22".into(),
            binding: target.clone(),
            changed: None,
            signed: None,
        };
        let old = json!({"id": "cred_1", "profile": "default", "name": "web", "kind": "ssh",
            "version": 2, "approval": "each", "target": "u@h:22",
            "binding": serde_json::to_value(&target).unwrap()});
        same(&CredentialAdded(cred.clone()), old.clone());
        let mut edited = old;
        edited["changed"] = json!(["host_key"]);
        same(
            &CredentialEdited(CredentialBody {
                changed: Some(vec!["host_key".into()]),
                ..cred
            }),
            edited,
        );
    }
}
