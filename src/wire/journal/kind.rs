//! What a journal row records (`Kind`, and its names in the journal), and `Body`, by which a
//! row body says its kind.
use crate::wire::State;
use serde::Serialize;

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
    /// `config.toml`'s `[network] allow` was signed (`vault config --sign`).
    NetworkAllow,
    /// An action moved to this state (`action.<state>`).
    Action(State),
}

impl Kind {
    /// Every kind that is not an action's.
    const PLAIN: [Kind; 22] = [
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
        Kind::NetworkAllow,
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
            Kind::NetworkAllow => "network.allow",
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
