//! What changed in a credential since the person last approved one of its actions, read from the
//! journal (the `action.approved` rows and the bindings each `credential.add`/`credential.edit`
//! row records), so the card can say "the pinned key changed from … to …" before the person
//! approves again. Every change is signed by the approver; this is for the person to notice one
//! they did not mean.
use crate::credentials::Credential;
use crate::store::StoreError;
use crate::wire::journal::{CredentialBody, Kind};
use crate::wire::protocol::{CredentialChange, FieldChange};
use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

/// The condition of the partial index `audit_credential_changes` (schema/0006), written exactly
/// as there so SQLite uses it (`tests` below checks the plans).
pub(crate) const CREDENTIAL_CHANGE_ROWS: &str = "kind IN ('credential.add', 'credential.edit')";

/// The changes of `cred` since the version of its last approved action; `None` when it never had
/// one approved, or has not changed since.
pub(crate) fn since_approved(
    conn: &Connection,
    cred: &Credential,
) -> Result<Option<CredentialChange>, StoreError> {
    // The newest version of this credential that an approved action was for (versions only go
    // up): this credential's actions by index, each checked for its `action.approved` row.
    let approved: Option<i64> = conn
        .prepare_cached(&format!(
            "SELECT max(a.credential_version) FROM actions a WHERE a.credential_id = ?1
               AND EXISTS (SELECT 1 FROM audit j WHERE j.action_id = a.id AND j.kind = '{}')",
            Kind::Action(crate::wire::State::Approved).as_str()
        ))?
        .query_row([cred.id.as_str()], |r| r.get(0))
        .optional()?
        .flatten();
    let Some(approved) = approved.filter(|&v| v < cred.version) else {
        return Ok(None);
    };
    // Every add/edit row of this credential from the approved version on, oldest first.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT body FROM audit WHERE {CREDENTIAL_CHANGE_ROWS}
           AND json_extract(body, '$.id') = ?1 AND json_extract(body, '$.version') >= ?2
         ORDER BY seq"
    ))?;
    let rows: Vec<CredentialBody> = stmt
        .query_map(rusqlite::params![cred.id, approved], |r| {
            r.get::<_, String>(0)
        })?
        .filter_map(|b| b.ok().and_then(|b| serde_json::from_str(&b).ok()))
        .collect();
    let old = rows.iter().find(|r| r.version == approved);
    let mut fields = Vec::new();
    if let Some(old) = old {
        let as_value = |t: &crate::wire::Target| serde_json::to_value(t).unwrap_or_default();
        diff(
            "",
            &as_value(&old.binding),
            &as_value(&cred.target),
            &mut fields,
        );
        if old.approval != cred.approval {
            fields.push(FieldChange {
                field: "approval".into(),
                old: Some(old.approval.as_str().to_owned()),
                new: Some(cred.approval.as_str().to_owned()),
            });
        }
    }
    // Fields named by the edits (the secret's value is never shown, only that it changed; so are
    // fields of versions whose bindings the journal does not hold).
    for r in rows.iter().filter(|r| r.version != approved) {
        for name in r.changed.iter().flatten() {
            let known = fields
                .iter()
                .any(|f| f.field == *name || f.field.ends_with(name.as_str()));
            if !known && (old.is_none() || name == "secret") {
                fields.push(FieldChange {
                    field: name.clone(),
                    old: None,
                    new: None,
                });
            }
        }
    }
    Ok(Some(CredentialChange {
        approved_version: approved,
        fields,
    }))
}

/// The leaves that differ between two bindings, named by their path (`auth.username`).
fn diff(path: &str, old: &Value, new: &Value, out: &mut Vec<FieldChange>) {
    if old == new {
        return;
    }
    if let (Value::Object(o), Value::Object(n)) = (old, new) {
        let mut keys: Vec<&String> = o.keys().chain(n.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let sub = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            diff(
                &sub,
                o.get(k).unwrap_or(&Value::Null),
                n.get(k).unwrap_or(&Value::Null),
                out,
            );
        }
        return;
    }
    let show = |v: &Value| match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    };
    out.push(FieldChange {
        field: path.to_owned(),
        old: show(old),
        new: show(new),
    });
}

#[cfg(test)]
mod tests {
    use super::CREDENTIAL_CHANGE_ROWS;
    use crate::approvals::PAUSE_ROWS;
    use crate::wire::journal::Kind;

    /// The partial indexes of schema/0006 and 0007 serve their queries only while each query
    /// repeats the index's condition exactly: ask SQLite for the plans, and keep the conditions
    /// equal to the kinds they name.
    #[test]
    fn the_kind_queries_use_their_partial_indexes() {
        let pause = format!(
            "kind IN ('{}', '{}')",
            Kind::VaultPause.as_str(),
            Kind::VaultResume.as_str()
        );
        assert_eq!(PAUSE_ROWS, pause);
        let changes = format!(
            "kind IN ('{}', '{}')",
            Kind::CredentialAdd.as_str(),
            Kind::CredentialEdit.as_str()
        );
        assert_eq!(CREDENTIAL_CHANGE_ROWS, changes);
        let store = crate::store::test_store("plans", "vlt_test");
        let plan = |sql: &str| -> String {
            let mut st = store
                .conn()
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .unwrap();
            let unbound = vec![rusqlite::types::Null; st.parameter_count()];
            let rows = st
                .query_map(rusqlite::params_from_iter(unbound), |r| {
                    r.get::<_, String>(3)
                })
                .unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join("; ")
        };
        let p = plan(&format!(
            "SELECT kind, body FROM audit WHERE {PAUSE_ROWS} ORDER BY seq DESC LIMIT 1"
        ));
        assert!(p.contains("audit_pause"), "{p}");
        let p = plan(&format!(
            "SELECT EXISTS (SELECT 1 FROM audit WHERE {PAUSE_ROWS} AND kind = 'vault.resume' AND json_extract(body, '$.nonce') = ?1)"
        ));
        assert!(p.contains("audit_pause"), "{p}");
        let p = plan(&format!(
            "SELECT body FROM audit WHERE {CREDENTIAL_CHANGE_ROWS} AND json_extract(body, '$.id') = ?1 ORDER BY seq"
        ));
        assert!(p.contains("audit_credential_changes"), "{p}");
        // schema/0007: the production queries themselves.
        let p = plan(&crate::approvals::nonce_spent_sql());
        assert!(p.contains("audit_dispatch_nonce"), "{p}");
        let p = plan(&crate::services::ops::session_start_sql());
        assert!(p.contains("audit_session_start"), "{p}");
    }
}
