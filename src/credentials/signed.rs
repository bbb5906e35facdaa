//! What the approver signs about credentials: the whole policy of a credential version (its id,
//! version, approval and every binding: host, port, prefix, methods, headers, pin, commands), and
//! a removal. Every add, edit and `rm` carries the approver's signature over the state it leads
//! to, built by the person's own command from what the person typed; the service checks it before
//! it changes anything, so a same-uid process with the socket but no passphrase changes nothing.
use super::{Credential, CredentialError};
use crate::keys::signing::{self, Signed, Trust};
use crate::keys::ApproverKey;
use crate::wire::{NewCredential, Op, Payload, PolicyPayload, RemovalPayload};

/// What a credential policy signature covers.
pub fn policy_payload(vault_id: &str, c: &Credential) -> PolicyPayload {
    PolicyPayload {
        v: PolicyPayload::VERSION,
        vault_id: vault_id.to_owned(),
        credential_id: c.id.clone(),
        version: c.version,
        approval: c.approval,
        target: c.target.clone(),
    }
}

/// The approver's signature over a credential version's policy and bindings.
pub fn policy_signature(key: &ApproverKey, vault_id: &str, cred: &Credential) -> String {
    signing::sign(key, &policy_payload(vault_id, cred)).signature
}

/// Whether `sig` is the trusted approver's over this credential version as it is.
pub fn is_signed(trust: &Trust, cred: &Credential, sig: Option<&str>) -> bool {
    let Some(sig) = sig else { return false };
    signing::is_signed_by(&trust.approver, &policy_payload(&trust.vault_id, cred), sig)
}

/// The credential `new` becomes once added (version 1); what its signature covers.
pub fn as_added(new: &NewCredential) -> Credential {
    Credential {
        id: new.id.clone(),
        profile: new.profile.clone(),
        name: new.name.clone(),
        version: 1,
        approval: new.approval,
        target: new.target.clone(),
        created_at: String::new(),
        updated_at: String::new(),
    }
}

/// The approver's side of `vault rm`: removing this credential at this version.
pub fn sign_removal(key: &ApproverKey, vault_id: &str, cred: &Credential) -> Signed {
    let payload = RemovalPayload {
        v: RemovalPayload::VERSION,
        vault_id: vault_id.to_owned(),
        op: Op::Rm,
        credential_id: cred.id.clone(),
        version: cred.version,
        issued_at: crate::wire::ts::to_millis(jiff::Timestamp::now()),
    };
    signing::sign(key, &payload)
}

/// Checks a removal against the credential as it is now.
pub(super) fn check_removal(
    trust: &Trust,
    cred: &Credential,
    removal: &Signed,
) -> Result<(), CredentialError> {
    let v: RemovalPayload = removal
        .open(trust)
        .ok_or(CredentialError::Unsigned("removing a credential"))?;
    if v.op != Op::Rm || v.credential_id != cred.id || v.version != cred.version {
        return Err(CredentialError::Stale {
            name: cred.name.clone(),
        });
    }
    Ok(())
}

/// Two views of a credential agree in everything a person decided (profile, name, approval and
/// every binding): how a command checks that the agent stored what the person typed.
pub fn same_policy(a: &Credential, b: &Credential) -> bool {
    a.id == b.id
        && a.version == b.version
        && a.profile == b.profile
        && a.name == b.name
        && a.approval == b.approval
        && a.target == b.target
}

pub use crate::wire::Listed;

impl Listed {
    pub fn effective(&self) -> super::Approval {
        if self.signed {
            self.credential.approval
        } else {
            super::Approval::Each
        }
    }
}
