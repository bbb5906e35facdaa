//! `AuthorizedAction`: the only thing an executor accepts. Its fields are private and it has no
//! public constructor, so only this module's parent (`approvals`, after policy and a valid
//! approval) can make one; raw JSON or a half-validated request can never reach an executor.
use crate::credentials::{Credential, Secret};
use crate::policy::ValidatedRequest;
use crate::wire::OpenBaoRef;

pub struct AuthorizedAction {
    action_id: String,
    action_hash: String,
    credential: Credential,
    request: ValidatedRequest,
    secret: Secret,
    /// Team mode: the secret comes from OpenBao just before the executor runs; `secret` is
    /// empty until then.
    remote: Option<FromOpenBao>,
}

/// Team mode: what the agent gets from OpenBao for one dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromOpenBao {
    /// The KV v2 field at the version the action's hash covers.
    Kv(OpenBaoRef, u64),
    /// A short-lived user certificate for `user` from the SSH CA at `mount`, role `role`, over
    /// an ephemeral key made for this dispatch.
    Cert {
        mount: String,
        role: String,
        user: String,
    },
}

impl AuthorizedAction {
    /// Only `approvals` may call this, after re-deriving the hash and checking the approval.
    #[allow(dead_code)]
    pub(super) fn new(
        action_id: String,
        action_hash: String,
        credential: Credential,
        request: ValidatedRequest,
        secret: Secret,
    ) -> Self {
        let remote = match (&credential.target, &request) {
            (crate::wire::Target::Http(t), ValidatedRequest::Http(h)) => t
                .secret_from
                .clone()
                .zip(h.secret_version)
                .map(|(r, v)| FromOpenBao::Kv(r, v)),
            (crate::wire::Target::Ssh(t), ValidatedRequest::Ssh(_)) => match &t.auth {
                crate::wire::SshAuth::OpenbaoCert { mount, role } => Some(FromOpenBao::Cert {
                    mount: mount.clone(),
                    role: role.clone(),
                    user: t.user.clone(),
                }),
                _ => None,
            },
            _ => None,
        };
        Self {
            action_id,
            action_hash,
            credential,
            request,
            secret,
            remote,
        }
    }
    /// Team mode: what to get from OpenBao before running.
    pub fn from_openbao(&self) -> Option<&FromOpenBao> {
        self.remote.as_ref()
    }
    /// Team mode: the secret got from OpenBao (the KV value at the version the hash covers, or
    /// the ephemeral key and its certificate).
    pub fn supply_secret(&mut self, secret: Secret) {
        debug_assert!(self.remote.is_some());
        self.secret = secret;
    }
    pub fn action_id(&self) -> &str {
        &self.action_id
    }
    pub fn action_hash(&self) -> &str {
        &self.action_hash
    }
    pub fn credential(&self) -> &Credential {
        &self.credential
    }
    pub fn request(&self) -> &ValidatedRequest {
        &self.request
    }
    /// The secret, for the executor to inject into the request to the credential's own target.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

impl std::fmt::Debug for AuthorizedAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizedAction")
            .field("action_id", &self.action_id)
            .field("action_hash", &self.action_hash)
            .field("credential", &self.credential.name)
            .field("secret", &"<redacted>")
            .finish()
    }
}
