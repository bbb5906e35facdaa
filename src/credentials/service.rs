//! Adding, editing, removing and listing credentials. Each change carries the approver's
//! signature over the state it leads to (`signed.rs`), checked before anything changes; it bumps
//! nothing but what it says, and writes exactly one audit row (with the new bindings, never a
//! secret) in the same transaction.
use super::signed::{self, is_signed, Listed};
use super::{check_name, invalid, Approval, Credential, CredentialError, Secret, Target};
use crate::audit;
use crate::keys::signing::{Signed, Trust};
use crate::store::{CredentialRow, Store};
use crate::wire::journal::{
    CredentialAdded, CredentialBody, CredentialEdited, CredentialRemoved, RowSignature,
};

pub use crate::wire::NewCredential;

pub use crate::wire::Edit;

fn check_target(target: &Target, secret: Option<&Secret>) -> Result<(), CredentialError> {
    match target {
        Target::Http(h) => {
            h.auth.check()?;
            match (&h.secret_from, secret) {
                (Some(r), s) => {
                    super::openbao_ref::check(r)?;
                    if s.is_some_and(|s| !s.expose().is_empty()) {
                        return Err(invalid(
                            "secret",
                            "a credential whose secret is read from OpenBao stores none; give --secret-from openbao:… alone",
                        ));
                    }
                }
                (None, Some(s)) => s.check(true)?,
                (None, None) => {}
            }
        }
        Target::Ssh(s) => {
            s.check()?;
            if let super::SshAuth::OpenbaoCert { mount, role } = &s.auth {
                super::openbao_ref::check_cert(mount, role)?;
                if secret.is_some_and(|s| !s.expose().is_empty()) {
                    return Err(invalid(
                        "secret",
                        "a login by an OpenBao certificate stores no key or password; give --cert-from alone",
                    ));
                }
            } else if let Some(sec) = secret {
                sec.check(matches!(s.auth, super::SshAuth::Password))?;
                super::ssh::check_key_secret(&s.auth, sec)?;
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

/// A change's journal row: what the credential is now, its bindings in full (no secret), so a
/// card can say what changed since the person last approved one of its actions.
fn audit_body(c: &Credential) -> CredentialBody {
    CredentialBody {
        id: c.id.clone(),
        profile: c.profile.clone(),
        name: c.name.clone(),
        kind: c.target.kind().to_owned(),
        version: c.version,
        approval: c.approval,
        target: c.target.summary(),
        binding: c.target.clone(),
        changed: None,
        signed: None,
    }
}

/// The journal's copy of the approver's signature over a credential version's policy: the
/// payload it covers (`signed::policy_payload`), rebuilt here as it was checked, and the
/// signature.
fn policy_row_signature(trust: &Trust, c: &Credential, signature: &str) -> RowSignature {
    let payload =
        crate::keys::signing::canonical_payload(&signed::policy_payload(&trust.vault_id, c));
    RowSignature::of(&Signed {
        payload,
        signature: signature.to_owned(),
    })
}

impl NewCredential {
    /// Name, profile, target and secret checks (also run by `add`): a caller can refuse bad
    /// input before it asks for anything else.
    pub fn check(&self) -> Result<(), CredentialError> {
        let id_ok = self.id.strip_prefix("cred_").is_some_and(|h| {
            h.len() == 32
                && h.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        });
        if !id_ok {
            return Err(invalid(
                "id",
                "it must be cred_ and 32 lowercase hex digits",
            ));
        }
        check_name("name", &self.name)?;
        check_name("profile", &self.profile)?;
        check_target(&self.target, Some(&self.secret))
    }
}

/// Adds a credential; its name must be new in its profile, and `signature` the approver's over
/// the credential it becomes (`signed::as_added`).
pub fn add(
    store: &mut Store,
    trust: &Trust,
    new: NewCredential,
    signature: &str,
) -> Result<Credential, CredentialError> {
    new.check()?;
    let mut cred = signed::as_added(&new);
    if !is_signed(trust, &cred, Some(signature)) {
        return Err(CredentialError::Unsigned("adding a credential"));
    }
    let now = crate::time::now_utc();
    cred.created_at = now.clone();
    cred.updated_at = now;
    let tx = store.write()?;
    if CredentialRow::find(&tx, &cred.profile, &cred.name)?.is_some() {
        return Err(CredentialError::Exists {
            profile: cred.profile,
            name: cred.name,
        });
    }
    if CredentialRow::find_by_id(&tx, &cred.id)?.is_some() {
        return Err(invalid("id", "it is already taken; run the command again"));
    }
    to_row(&cred).insert(&tx, new.secret.expose())?;
    CredentialRow::set_policy_sig(&tx, &cred.id, Some(signature))?;
    let body = CredentialBody {
        signed: Some(policy_row_signature(trust, &cred, signature)),
        ..audit_body(&cred)
    };
    audit::append(&tx, None, None, &CredentialAdded(body))?;
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

/// Every credential, or those of one profile, each with whether the approver signed its
/// current version (an unsigned policy counts as `each`).
pub fn list(
    store: &Store,
    trust: &Trust,
    profile: Option<&str>,
) -> Result<Vec<Listed>, CredentialError> {
    CredentialRow::list(store.conn(), profile)?
        .into_iter()
        .map(|row| {
            let sig = CredentialRow::policy_sig(store.conn(), &row.id)?;
            let credential = to_credential(row)?;
            let signed = is_signed(trust, &credential, sig.as_deref());
            Ok(Listed { credential, signed })
        })
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

/// Removes a credential and its secret, with the approver's signed removal of this version.
pub fn remove(
    store: &mut Store,
    trust: &Trust,
    profile: &str,
    name: &str,
    removal: &Signed,
) -> Result<Credential, CredentialError> {
    let tx = store.write()?;
    let row = existing(&tx, profile, name)?;
    let cred = to_credential(row.clone())?;
    signed::check_removal(trust, &cred, removal)?;
    row.delete(&tx)?;
    let body = CredentialBody {
        signed: Some(RowSignature::of(removal)),
        ..audit_body(&cred)
    };
    audit::append(&tx, None, None, &CredentialRemoved(body))?;
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

/// Like `set`, for a value given as a whole (`--host`): only what differs counts as changed.
fn set_new<T: PartialEq>(
    slot: &mut T,
    new: T,
    name: &'static str,
    changed: &mut Vec<&'static str>,
) {
    if *slot != new {
        *slot = new;
        changed.push(name);
    }
}

/// Applies `edit` to `cred` as the service would (the version is not touched): how the person's
/// command builds the state it signs, and how the service checks it. Returns the changed fields.
pub fn apply(cred: &mut Credential, edit: &Edit) -> Result<Vec<&'static str>, CredentialError> {
    let mut changed: Vec<&'static str> = Vec::new();
    set(&mut cred.approval, edit.approval, "approval", &mut changed);
    if let Some(p) = edit.presence {
        let slot = match &mut cred.target {
            Target::Http(h) => &mut h.presence,
            Target::Ssh(s) => &mut s.presence,
        };
        set_new(slot, p, "presence", &mut changed);
    }
    match &mut cred.target {
        Target::Http(h) => {
            if edit.host_key.is_some() || edit.allow_commands.is_some() {
                return Err(invalid(
                    "option",
                    "--host-key and --allow-command apply to ssh credentials only",
                ));
            }
            if edit.ssh_auth.is_some() {
                return Err(invalid(
                    "option",
                    "--key-file and --password-stdin apply to ssh credentials only; an http credential's secret changes with --secret-file, --secret-stdin or --secret-from",
                ));
            }
            if let Some(text) = &edit.host {
                let (scheme, host, port) = super::http::parse_host(text, "https")?;
                set_new(&mut h.scheme, scheme, "scheme", &mut changed);
                set_new(&mut h.host, host, "host", &mut changed);
                set_new(&mut h.port, port, "port", &mut changed);
            }
            set(
                &mut h.path_prefix,
                edit.path_prefix.clone(),
                "path_prefix",
                &mut changed,
            );
            set(
                &mut h.methods,
                edit.methods.clone(),
                "methods",
                &mut changed,
            );
            set(
                &mut h.allow_headers,
                edit.allow_headers.clone(),
                "allow_headers",
                &mut changed,
            );
            // A reference to OpenBao replaces a stored secret, and a new secret ends one.
            match (&edit.secret_from, &edit.secret) {
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "option",
                        "give the secret or a reference to it in OpenBao, not both",
                    ))
                }
                (Some(r), None) => set_new(
                    &mut h.secret_from,
                    Some(r.clone()),
                    "secret_from",
                    &mut changed,
                ),
                (None, Some(_)) => set_new(&mut h.secret_from, None, "secret_from", &mut changed),
                (None, None) => {}
            }
        }
        Target::Ssh(s) => {
            if edit.path_prefix.is_some()
                || edit.methods.is_some()
                || edit.allow_headers.is_some()
                || edit.secret_from.is_some()
            {
                return Err(invalid(
                    "option",
                    "--path-prefix, --methods, --allow-header and --secret-from apply to http credentials only",
                ));
            }
            if let Some(text) = &edit.host {
                let (host, port) = super::http::split_ssh_host(text)?;
                set_new(&mut s.host, host, "host", &mut changed);
                if let Some(port) = port {
                    set_new(&mut s.port, port, "port", &mut changed);
                }
            }
            set(
                &mut s.host_key,
                edit.host_key.clone(),
                "host_key",
                &mut changed,
            );
            set(
                &mut s.allow_commands,
                edit.allow_commands.clone(),
                "allow_commands",
                &mut changed,
            );
            // A key or a password replaces the login as a whole: the secret and what it is.
            match (&edit.ssh_auth, &edit.secret) {
                (Some(auth), Some(_)) => set_new(&mut s.auth, auth.clone(), "auth", &mut changed),
                (None, None) => {}
                (Some(_), None) => {
                    return Err(invalid("option", "a new ssh login needs its key or password"))
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        "--secret-file",
                        "an ssh credential's secret changes with --key-file FILE (a key) or --password-stdin (a password), never as a line of text",
                    ))
                }
            }
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
    Ok(changed)
}

/// Changes what `edit` says at credential version `version` (a credential changed since the
/// person read it is refused), bumps the version (old approvals no longer match), checks that
/// `signature` is the approver's over the result, and journals which fields changed (never their
/// secret values).
pub fn edit(
    store: &mut Store,
    trust: &Trust,
    profile: &str,
    name: &str,
    version: i64,
    edit: Edit,
    signature: &str,
) -> Result<Credential, CredentialError> {
    let tx = store.write()?;
    let row = existing(&tx, profile, name)?;
    let mut cred = to_credential(row)?;
    if cred.version != version {
        return Err(CredentialError::Stale {
            name: cred.name.clone(),
        });
    }
    let changed = apply(&mut cred, &edit)?;
    if !is_signed(trust, &cred, Some(signature)) {
        return Err(CredentialError::Unsigned("changing a credential"));
    }
    cred.updated_at = crate::time::now_utc();
    // A credential that now reads its secret from OpenBao keeps no copy of the old one.
    let stored = match &edit.secret_from {
        Some(_) => Some(&[][..]),
        None => edit.secret.as_ref().map(Secret::expose),
    };
    to_row(&cred).update(&tx, stored)?;
    CredentialRow::set_policy_sig(&tx, &cred.id, Some(signature))?;
    let body = CredentialBody {
        changed: Some(changed.iter().map(|c| c.to_string()).collect()),
        signed: Some(policy_row_signature(trust, &cred, signature)),
        ..audit_body(&cred)
    };
    audit::append(&tx, None, None, &CredentialEdited(body))?;
    tx.commit()?;
    Ok(cred)
}

/// For a caller that holds the approver key itself (a test, a bench, a tool run with the
/// passphrase): signs the credential `new` becomes and adds it.
pub fn add_as_approver(
    store: &mut Store,
    key: &crate::keys::ApproverKey,
    vault_id: &str,
    new: NewCredential,
) -> Result<Credential, CredentialError> {
    let signature = signed::policy_signature(key, vault_id, &signed::as_added(&new));
    add(store, &Trust::new(vault_id, key), new, &signature)
}

/// Likewise: applies `edit` to the credential as it is, signs the result and stores it.
pub fn edit_as_approver(
    store: &mut Store,
    key: &crate::keys::ApproverKey,
    vault_id: &str,
    (profile, name): (&str, &str),
    edit: Edit,
) -> Result<Credential, CredentialError> {
    let current = get(store, profile, name)?;
    let mut next = current.clone();
    apply(&mut next, &edit)?;
    let signature = signed::policy_signature(key, vault_id, &next);
    let trust = Trust::new(vault_id, key);
    self::edit(
        store,
        &trust,
        profile,
        name,
        current.version,
        edit,
        &signature,
    )
}

/// Likewise: removes the credential with a removal signed here.
pub fn remove_as_approver(
    store: &mut Store,
    key: &crate::keys::ApproverKey,
    vault_id: &str,
    (profile, name): (&str, &str),
) -> Result<Credential, CredentialError> {
    let current = get(store, profile, name)?;
    let removal = signed::sign_removal(key, vault_id, &current);
    remove(store, &Trust::new(vault_id, key), profile, name, &removal)
}
