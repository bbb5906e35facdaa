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
    /// Team mode: the secret is read from OpenBao (this field at this KV version, what the
    /// action's hash covers) just before the executor runs; `secret` is empty until then.
    remote: Option<(OpenBaoRef, u64)>,
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
            (crate::wire::Target::Http(t), ValidatedRequest::Http(h)) => {
                t.secret_from.clone().zip(h.secret_version)
            }
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
    /// Team mode: the OpenBao secret (reference and KV version) to read before running.
    pub fn remote_secret(&self) -> Option<&(OpenBaoRef, u64)> {
        self.remote.as_ref()
    }
    /// Team mode: the secret read from OpenBao at the version the hash covers.
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
