//! The person's requests (credentials, the approval queue, decisions, pause and resume, the
//! journal) as one function over a store: the custody agent runs it for its CLI and approver
//! connections, and a CLI command run on a locked vault with the passphrase runs the same
//! function on its own short-lived store. Every check that protects data lives here or below.
use crate::approvals::{self, Action, ApprovalError, Trust};
use crate::audit;
use crate::credentials::{self, CredentialError};
use crate::paths::VaultPaths;
use crate::store::{Store, StoreError};
use crate::wire::journal::{Kind, SessionStart};
use crate::wire::protocol::{ApprovalView, ErrorCode, GrantView, JournalRow, Reply, Request};

/// Runs one person's request. Requests that belong to a live agent (hello, tools, lock, status,
/// watching) are not handled here.
pub(crate) fn handle(store: &mut Store, trust: &Trust, paths: &VaultPaths, req: Request) -> Reply {
    match req {
        Request::Credentials { profile } => {
            credential(credentials::list(store, trust, profile.as_deref()).map(Reply::Credentials))
        }
        Request::AddCredential { new, signature } => {
            credential(credentials::add(store, trust, new, &signature).map(Reply::Credential))
        }
        Request::EditCredential {
            profile,
            name,
            version,
            edit,
            signature,
        } => credential(
            credentials::edit(store, trust, &profile, &name, version, edit, &signature)
                .map(Reply::Credential),
        ),
        Request::RemoveCredential {
            profile,
            name,
            removal,
        } => credential(
            credentials::remove(store, trust, &profile, &name, &removal).map(Reply::Credential),
        ),
        Request::Pending => approval(pending(store, trust).map(Reply::Pending)),
        Request::ForApproval { action_id } => approval(
            approvals::find(store, &action_id)
                .and_then(|a| view(store, trust, &a).map(Reply::View)),
        ),
        Request::Decide { decision, pin } => {
            approval(approvals::decide(store, trust, &decision, pin.as_ref()).map(Reply::Action))
        }
        Request::SetPin { request, pin } => {
            approval(approvals::pin::set(store, trust, &request, &pin).map(|()| Reply::Ok))
        }
        Request::Pause { reason } => approval(approvals::pause(store, &reason).map(Reply::Count)),
        Request::SetAllowedHosts { request } => {
            approval(approvals::set_allowed(store, trust, &request).map(Reply::Hosts))
        }
        Request::AllowedHosts => approval(approvals::allowed(store, trust).map(Reply::Hosts)),
        Request::Resume { resume } => {
            approval(approvals::resume(store, trust, &resume).map(Reply::Flag))
        }
        Request::OpenBaoLogin { request, secret } => {
            openbao(super::openbao::login::set(store, trust, &request, &secret))
        }
        Request::OpenBaoLogout { request } => {
            openbao(super::openbao::login::clear(store, trust, &request))
        }
        // Locked: what is stored (a running agent answers with its token too).
        Request::OpenBaoStatus => match super::openbao::login::load(store.conn()) {
            Ok(stored) => Reply::OpenBao(crate::wire::protocol::OpenBaoView {
                login: stored.map(|s| s.login),
                token: None,
                last_error: None,
            }),
            Err(e) => internal(e),
        },
        // Locked: this process logs in with the stored login and reads the head itself.
        Request::OpenBaoHead => match super::openbao::login::load(store.conn()) {
            Ok(stored) => {
                let settings = crate::config::Config::load(paths)
                    .map(|c| c.openbao)
                    .unwrap_or_else(|_| crate::config::Config::default().openbao);
                let remote = super::openbao::Remote::new(settings, stored);
                Reply::RemoteHead(remote.head_view(&trust.vault_id))
            }
            Err(e) => internal(e),
        },
        Request::ApproverKeys => approval(
            approvals::touch::keys(store.conn())
                .map(|k| Reply::ApproverKeys(k.into_iter().map(key_view).collect()))
                .map_err(ApprovalError::from),
        ),
        Request::AddApproverKey { request } => approval(
            approvals::touch::add_key(store, trust, &request)
                .map(|k| Reply::ApproverKeys(k.into_iter().map(key_view).collect())),
        ),
        Request::RemoveApproverKey { request } => approval(
            approvals::touch::remove_key(store, trust, &request)
                .map(|k| Reply::ApproverKeys(k.into_iter().map(key_view).collect())),
        ),
        Request::Grants => approval(
            approvals::list_grants(store, trust).map(|g| Reply::Grants(with_clients(store, g))),
        ),
        Request::RevokeGrants { revoke } => approval(
            approvals::revoke_grants(store, trust, &revoke)
                .map(|g| Reply::Grants(with_clients(store, g))),
        ),
        Request::Journal { after, limit, .. } => match journal_rows(store, after, limit) {
            Ok(rows) => Reply::Rows(rows),
            Err(e) => internal(e),
        },
        Request::Verify { anchors } => verify(store, trust, paths, anchors),
        Request::Export { path } => {
            match audit::export(store.conn(), std::path::Path::new(&path)) {
                Ok(x) => Reply::Exported {
                    rows: x.rows,
                    head: x.head.map(|h| (h.seq, hex::encode(h.hash))),
                },
                Err(e) => error(ErrorCode::Invalid, e.to_string()),
            }
        }
        other => error(
            ErrorCode::Protocol,
            format!("{other:?} is not a request this end handles"),
        ),
    }
}

fn key_view(k: approvals::touch::StoredKey) -> crate::wire::protocol::KeyView {
    crate::wire::protocol::KeyView {
        key: k.key,
        counter: k.counter,
        added_at: k.added_at,
    }
}

pub(crate) fn error(code: ErrorCode, message: String) -> Reply {
    Reply::Error { code, message }
}

fn internal(e: impl std::fmt::Display) -> Reply {
    error(ErrorCode::Internal, e.to_string())
}

fn credential(r: Result<Reply, CredentialError>) -> Reply {
    r.unwrap_or_else(|e| {
        let code = match &e {
            CredentialError::NotFound { .. } => ErrorCode::NotFound,
            CredentialError::Invalid { .. }
            | CredentialError::Exists { .. }
            | CredentialError::Stale { .. }
            | CredentialError::NothingToChange => ErrorCode::Invalid,
            CredentialError::Unsigned(_) => ErrorCode::WrongApprover,
            _ => ErrorCode::Internal,
        };
        error(code, e.to_string())
    })
}

fn openbao(r: Result<(), super::openbao::login::LoginError>) -> Reply {
    use super::openbao::login::LoginError;
    match r {
        Ok(()) => Reply::Ok,
        Err(e) => {
            let code = match &e {
                LoginError::WrongApprover => ErrorCode::WrongApprover,
                LoginError::Refused(_) => ErrorCode::Invalid,
                LoginError::NotLoggedIn => ErrorCode::NotFound,
                LoginError::Store(_) | LoginError::Audit(_) => ErrorCode::Internal,
            };
            error(code, e.to_string())
        }
    }
}

fn approval(r: Result<Reply, ApprovalError>) -> Reply {
    r.unwrap_or_else(|e| {
        let code = match &e {
            ApprovalError::NotFound(_) | ApprovalError::NoGrant(_) => ErrorCode::NotFound,
            ApprovalError::NotPending { .. }
            | ApprovalError::BadDecision(_)
            | ApprovalError::BadRevocation(_)
            | ApprovalError::NoPin
            | ApprovalError::BadKeyChange(_)
            | ApprovalError::NoTouch
            | ApprovalError::BadTouch(_)
            | ApprovalError::WrongPin { .. } => ErrorCode::Invalid,
            ApprovalError::PinLimit(_) => ErrorCode::Paused,
            ApprovalError::WrongApprover => ErrorCode::WrongApprover,
            _ => ErrorCode::Internal,
        };
        error(code, e.to_string())
    })
}

/// Every pending action as the approver must see it (expired ones expired first).
pub(crate) fn pending(
    store: &mut Store,
    trust: &Trust,
) -> Result<Vec<ApprovalView>, ApprovalError> {
    approvals::expire_due(store)?;
    approvals::list_pending(store)?
        .iter()
        .map(|a| view(store, trust, a))
        .collect()
}

/// A session's `session.start` row, through the partial index `audit_session_start`
/// (schema/0007), which holds only those rows: the kind is a literal, as the index's condition.
pub(crate) fn session_start_sql() -> String {
    format!(
        "SELECT body FROM audit WHERE kind = '{}' AND session_id = ?1 ORDER BY seq LIMIT 1",
        Kind::SessionStart.as_str()
    )
}

/// A session's `session.start` row, if the journal has a readable one.
fn session_of(store: &Store, session: &str) -> Option<SessionStart> {
    store
        .conn()
        .prepare_cached(&session_start_sql())
        .ok()?
        .query_row([session], |r| r.get::<_, String>(0))
        .ok()
        .and_then(|b| serde_json::from_str(&b).ok())
}

/// Grants with the client each one's session said it was.
fn with_clients(store: &Store, mut grants: Vec<GrantView>) -> Vec<GrantView> {
    for g in &mut grants {
        g.client = session_of(store, &g.session).map(|s| s.client);
    }
    grants
}

/// What the approver needs to show an action and re-derive its hash.
pub(crate) fn view(
    store: &Store,
    trust: &Trust,
    a: &Action,
) -> Result<ApprovalView, ApprovalError> {
    let (normalized, body) = approvals::stored_request(store, &a.id)?;
    let session = session_of(store, &a.session_id).map(Box::new);
    let (changed, policy) = match credentials::get_by_id(store.conn(), &a.credential_id) {
        Ok(Some((cred, sig))) => (
            super::changes::since_approved(store.conn(), &cred)?,
            Some(approvals::effective_approval(trust, &cred, sig.as_deref())),
        ),
        _ => (None, None),
    };
    // A body past `http_request`'s bound (a tool's upload through `vault run`'s proxy) would not
    // fit a frame in hex; no card could show it whole anyway.
    let withheld = body
        .as_ref()
        .filter(|b| b.len() > crate::policy::MAX_BODY_BYTES)
        .map(|b| b.len() as u64);
    Ok(ApprovalView {
        action: a.clone(),
        normalized,
        body_hex: body.filter(|_| withheld.is_none()).map(hex::encode),
        body_withheld_bytes: withheld,
        session,
        changed,
        policy,
        touch_keys: if approvals::touch::needs_touch(store.conn(), a)? {
            Some(
                approvals::touch::keys(store.conn())?
                    .into_iter()
                    .map(|k| k.key.credential_id)
                    .collect(),
            )
        } else {
            None
        },
    })
}

/// What to tell an MCP session whose profile holds no credential (a typo in `vault mcp
/// --profile` otherwise only shows as an empty list): the profiles that have some. A plain
/// query of profile names, so a session's start checks no signature for it.
pub(crate) fn empty_profile(store: &Store, profile: &str) -> Result<Option<String>, StoreError> {
    let profiles = crate::store::CredentialRow::profiles(store.conn())?;
    if profiles.iter().any(|p| p == profile) {
        return Ok(None);
    }
    Ok(Some(if profiles.is_empty() {
        format!(
            "profile {profile:?} has no credentials yet (the vault has none): `vault add` adds one"
        )
    } else {
        format!(
            "profile {profile:?} has no credentials; the profiles that have some: {} (`vault mcp --profile NAME`, `vault list`)",
            profiles.join(", ")
        )
    }))
}

/// The store's versions, journal size, pause switch and queue, for `vault doctor`.
pub(crate) fn store_status(
    store: &Store,
) -> Result<crate::wire::protocol::StoreStatus, StoreError> {
    let (journal_rows, journal_head): (i64, i64) = store
        .conn()
        .prepare_cached("SELECT count(*), coalesce(max(seq), 0) FROM audit")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(crate::wire::protocol::StoreStatus {
        schema_version: store.schema_version()?,
        cipher_version: store.cipher_version()?,
        journal_rows,
        journal_head,
        paused: approvals::paused(store.conn())?,
        pending: approvals::list_pending(store).map(|p| p.len()).unwrap_or(0),
        pin_set: approvals::pin::is_set(store.conn())?,
    })
}

/// Journal rows after `after`, oldest first.
pub(crate) fn journal_rows(
    store: &Store,
    after: i64,
    limit: u32,
) -> Result<Vec<JournalRow>, StoreError> {
    let mut stmt = store.conn().prepare_cached(crate::audit::journal_select!(
        "WHERE seq > ?1 ORDER BY seq LIMIT ?2"
    ))?;
    let rows = stmt.query_map(rusqlite::params![after, limit.min(10_000)], |r| {
        let row = crate::audit::StoredRow::from_sql(r)?;
        Ok(JournalRow {
            seq: row.seq,
            ts: row.ts,
            kind: row.kind,
            session: row.session,
            action: row.action,
            body: row.body,
            prev: hex::encode(row.prev),
            hash: hex::encode(row.hash),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn verify(store: &Store, trust: &Trust, paths: &VaultPaths, given: Vec<(i64, String)>) -> Reply {
    let mut anchors = Vec::new();
    for (seq, hash) in &given {
        match audit::parse_anchor(&format!("{seq}:{hash}")) {
            Ok(a) => anchors.push(a),
            Err(e) => return error(ErrorCode::Invalid, e.to_string()),
        }
    }
    let from_file = match audit::read_anchors(paths) {
        Ok(a) => a,
        Err(e) => return error(ErrorCode::Invalid, e.to_string()),
    };
    let n = from_file.len();
    anchors.extend(from_file);
    match audit::verify_store_parallel(store, &trust.vault_id, &anchors, Some(&trust.approver)) {
        Ok(report) => Reply::Verify {
            report: report.to_json_line(),
            from_file: n,
        },
        Err(e) => internal(e),
    }
}
