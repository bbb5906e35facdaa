//! Adding, editing, removing and listing credentials. Each change bumps nothing but what it says,
//! and writes exactly one audit row in the same transaction. No secret enters a row body.
use super::{check_name, invalid, new_id, Approval, Credential, CredentialError, Secret, Target};
use crate::audit;
use crate::store::{CredentialRow, Store};
use serde_json::json;

/// A credential to add.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewCredential {
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
    pub secret: Option<Secret>,
}

/// A present field (even `null`) is `Some`: `null` means "any method again".
fn some_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<Vec<String>>>, D::Error> {
    use serde::Deserialize;
    Option::<Vec<String>>::deserialize(d).map(Some)
}

fn check_target(target: &Target, secret: Option<&Secret>) -> Result<(), CredentialError> {
    match target {
        Target::Http(h) => {
            h.auth.check()?;
            if let Some(s) = secret {
                s.check(true)?;
            }
        }
        Target::Ssh(s) => {
            s.check()?;
            if let Some(sec) = secret {
                sec.check(matches!(s.auth, super::SshAuth::Password))?;
            }
        }
    }
    Ok(())
}

fn to_credential(row: CredentialRow) -> Result<Credential, CredentialError> {
    let damaged = |reason: String| CredentialError::Damaged {
        id: row.id.clone(),
        reason,
    };
    let target: Target = serde_json::from_str(&row.target).map_err(|e| damaged(e.to_string()))?;
    let approval = Approval::parse(&row.approval)
        .ok_or_else(|| damaged(format!("approval {:?}", row.approval)))?;
    Ok(Credential {
        id: row.id,
        profile: row.profile,
        name: row.name,
        version: row.version,
        approval,
        target,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn to_row(c: &Credential) -> CredentialRow {
    CredentialRow {
        id: c.id.clone(),
        profile: c.profile.clone(),
        name: c.name.clone(),
        kind: c.target.kind().to_owned(),
        version: c.version,
        approval: c.approval.as_str().to_owned(),
        target: serde_json::to_string(&c.target).expect("a target always serializes"),
        created_at: c.created_at.clone(),
        updated_at: c.updated_at.clone(),
    }
}

fn audit_body(c: &Credential) -> serde_json::Value {
    json!({
        "id": c.id,
        "profile": c.profile,
        "name": c.name,
        "kind": c.target.kind(),
        "version": c.version,
        "approval": c.approval.as_str(),
        "target": c.target.summary(),
    })
}

impl NewCredential {
    /// Name, profile, target and secret checks (also run by `add`): a caller can refuse bad
    /// input before it asks for anything else.
    pub fn check(&self) -> Result<(), CredentialError> {
        check_name("name", &self.name)?;
        check_name("profile", &self.profile)?;
        check_target(&self.target, Some(&self.secret))
    }
}

/// Adds a credential; its name must be new in its profile.
pub fn add(store: &mut Store, new: NewCredential) -> Result<Credential, CredentialError> {
    new.check()?;
    let now = crate::time::now_utc();
    let cred = Credential {
        id: new_id("cred"),
        profile: new.profile,
        name: new.name,
        version: 1,
        approval: new.approval,
        target: new.target,
        created_at: now.clone(),
        updated_at: now,
    };
    let tx = store.write()?;
    if CredentialRow::find(&tx, &cred.profile, &cred.name)?.is_some() {
        return Err(CredentialError::Exists {
            profile: cred.profile,
            name: cred.name,
        });
    }
    to_row(&cred).insert(&tx, new.secret.expose())?;
    audit::append(&tx, "credential.add", None, None, &audit_body(&cred))?;
    tx.commit()?;
    Ok(cred)
}

/// One credential by profile and name.
pub fn get(store: &Store, profile: &str, name: &str) -> Result<Credential, CredentialError> {
    to_credential(existing(store.conn(), profile, name)?)
}

/// One credential by id (any profile), with its policy signature if it has one.
pub fn get_by_id(
    store: &rusqlite::Connection,
    id: &str,
) -> Result<Option<(Credential, Option<String>)>, CredentialError> {
    let Some(row) = CredentialRow::find_by_id(store, id)? else {
        return Ok(None);
    };
    let sig = CredentialRow::policy_sig(store, id)?;
    Ok(Some((to_credential(row)?, sig)))
}

/// The approver's side: the signature over the credential's id, version, approval and target
/// that lets an approval other than `each` take effect.
pub fn policy_signature(
    key: &crate::keys::ApproverKey,
    vault_id: &str,
    cred: &Credential,
) -> String {
    crate::approvals::signing::sign(
        key,
        crate::approvals::signing::POLICY,
        &policy_payload(vault_id, cred),
    )
    .1
}

/// Stores a policy signature after checking it is the trusted approver's over the credential as
/// it is now (this id at this version); journals `credential.sign`.
pub fn sign_policy(
    store: &mut Store,
    trust: &crate::approvals::Trust,
    credential_id: &str,
    signature: &str,
) -> Result<Credential, CredentialError> {
    let tx = store.write()?;
    let row = CredentialRow::find_by_id(&tx, credential_id)?.ok_or_else(|| {
        CredentialError::NotFound {
            profile: "?".into(),
            name: credential_id.to_owned(),
        }
    })?;
    let cred = to_credential(row)?;
    let payload = crate::canonical::to_string(&policy_payload(&trust.vault_id, &cred));
    if !crate::approvals::signing::verify(
        &trust.approver,
        crate::approvals::signing::POLICY,
        &payload,
        signature,
    ) {
        return Err(invalid(
            "signature",
            "it is not the approver's signature over this credential's current version; run the command again",
        ));
    }
    CredentialRow::set_policy_sig(&tx, &cred.id, Some(signature))?;
    audit::append(&tx, "credential.sign", None, None, &audit_body(&cred))?;
    tx.commit()?;
    Ok(cred)
}

/// What a credential policy signature covers.
pub fn policy_payload(vault_id: &str, c: &Credential) -> serde_json::Value {
    json!({
        "v": 1,
        "vault_id": vault_id,
        "credential_id": c.id,
        "version": c.version,
        "approval": c.approval.as_str(),
        "target": serde_json::to_value(&c.target).expect("a target always serializes"),
    })
}

/// Every credential, or those of one profile.
pub fn list(store: &Store, profile: Option<&str>) -> Result<Vec<Credential>, CredentialError> {
    CredentialRow::list(store.conn(), profile)?
        .into_iter()
        .map(to_credential)
        .collect()
}

/// The credential `profile`/`name`, or NotFound.
fn existing(
    tx: &rusqlite::Connection,
    profile: &str,
    name: &str,
) -> Result<CredentialRow, CredentialError> {
    CredentialRow::find(tx, profile, name)?.ok_or_else(|| CredentialError::NotFound {
        profile: profile.to_owned(),
        name: name.to_owned(),
    })
}

/// Removes a credential and its secret.
pub fn remove(store: &mut Store, profile: &str, name: &str) -> Result<Credential, CredentialError> {
    let tx = store.write()?;
    let row = existing(&tx, profile, name)?;
    row.delete(&tx)?;
    let cred = to_credential(row)?;
    audit::append(&tx, "credential.rm", None, None, &audit_body(&cred))?;
    tx.commit()?;
    Ok(cred)
}

/// Replaces `slot` with `new` when the edit names it, and records the field's name.
fn set<T>(slot: &mut T, new: Option<T>, name: &'static str, changed: &mut Vec<&'static str>) {
    if let Some(v) = new {
        *slot = v;
        changed.push(name);
    }
}

/// Changes what `edit` says, bumps the version (old approvals no longer match), journals which
/// fields changed (never their secret values).
pub fn edit(
    store: &mut Store,
    profile: &str,
    name: &str,
    edit: Edit,
) -> Result<Credential, CredentialError> {
    let tx = store.write()?;
    let row = existing(&tx, profile, name)?;
    let mut cred = to_credential(row)?;
    let mut changed: Vec<&str> = Vec::new();
    set(&mut cred.approval, edit.approval, "approval", &mut changed);
    match &mut cred.target {
        Target::Http(h) => {
            if edit.host_key.is_some() || edit.allow_commands.is_some() {
                return Err(invalid(
                    "option",
                    "--host-key and --allow-command apply to ssh credentials only",
                ));
            }
            set(
                &mut h.path_prefix,
                edit.path_prefix,
                "path_prefix",
                &mut changed,
            );
            set(&mut h.methods, edit.methods, "methods", &mut changed);
            set(
                &mut h.allow_headers,
                edit.allow_headers,
                "allow_headers",
                &mut changed,
            );
        }
        Target::Ssh(s) => {
            if edit.path_prefix.is_some() || edit.methods.is_some() || edit.allow_headers.is_some()
            {
                return Err(invalid(
                    "option",
                    "--path-prefix, --methods and --allow-header apply to http credentials only",
                ));
            }
            set(&mut s.host_key, edit.host_key, "host_key", &mut changed);
            set(
                &mut s.allow_commands,
                edit.allow_commands,
                "allow_commands",
                &mut changed,
            );
        }
    }
    if edit.secret.is_some() {
        changed.push("secret");
    }
    if changed.is_empty() {
        return Err(CredentialError::NothingToChange);
    }
    check_target(&cred.target, edit.secret.as_ref())?;
    cred.version += 1;
    cred.updated_at = crate::time::now_utc();
    to_row(&cred).update(&tx, edit.secret.as_ref().map(Secret::expose))?;
    let mut body = audit_body(&cred);
    body["changed"] = json!(changed);
    audit::append(&tx, "credential.edit", None, None, &body)?;
    tx.commit()?;
    Ok(cred)
}
