//! Service errors as tool error results: what went wrong, the fix, and the tool to use, in the
//! shape of `result::ToolResult::error`.
use crate::approvals::ApprovalError;
use crate::credentials::CredentialError;
use crate::policy::PolicyError;
use crate::wire::ToolErrorCode;
use crate::wire::ToolResult;
use serde_json::{json, Map, Value};

use crate::wire::internal;

pub(super) fn invalid(message: String, fix: String, details: Value) -> ToolResult {
    ToolResult::error(
        ToolErrorCode::InvalidArgument,
        &message,
        &fix,
        details,
        Map::new(),
    )
}

pub(super) fn paused_error(why: &str) -> ToolResult {
    ToolResult::error(
        ToolErrorCode::Paused,
        &format!("the vault is paused ({why}); no action runs until the person resumes it"),
        "tell the person; they lift it with `vault resume` in a terminal",
        json!({}),
        Map::new(),
    )
}

pub(super) fn credential_error(e: &CredentialError) -> ToolResult {
    match e {
        CredentialError::NotFound { name, profile } => ToolResult::error(
            ToolErrorCode::NotFound,
            &format!("no credential named {name:?} in this session's profile ({profile})"),
            "call list_credentials to see the names this session may use",
            json!({"credential": name}),
            Map::new(),
        ),
        other => {
            tracing::error!("credential store: {other}");
            internal("the credential could not be read; the person should run `vault doctor`")
        }
    }
}

pub(super) fn policy_error(e: &PolicyError) -> ToolResult {
    let (code, details) = match e {
        PolicyError::Invalid { field, .. } => {
            (ToolErrorCode::InvalidArgument, json!({"field": field}))
        }
        PolicyError::Denied { .. } => (ToolErrorCode::PolicyDenied, json!({})),
    };
    ToolResult::error(code, &e.to_string(), e.fix(), details, Map::new())
}

pub(super) fn approval_error(e: &ApprovalError) -> ToolResult {
    match e {
        ApprovalError::NotFound(id) => ToolResult::error(
            ToolErrorCode::NotFound,
            &format!("no action {id} in this session"),
            "call list_recent_actions to see the action ids of this session",
            json!({"action_id": id}),
            Map::new(),
        ),
        ApprovalError::NotPending { id, state } => {
            let mut extra = Map::new();
            extra.insert("action_id".into(), json!(id));
            extra.insert("state".into(), json!(state.as_str()));
            ToolResult::error(
                ToolErrorCode::NotPending,
                &format!("action {id} is {state}; only a pending action can be cancelled"),
                "call get_action to see its result",
                json!({"action_id": id, "state": state.as_str()}),
                extra,
            )
        }
        other => {
            tracing::error!("action store: {other}");
            internal("the action could not be stored; the person should run `vault doctor`")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_error_keeps_the_code_the_policy_names() {
        for e in [
            PolicyError::invalid("url", "bad", "fix it"),
            PolicyError::denied("no", "ask"),
        ] {
            assert_eq!(
                policy_error(&e).code().map(ToolErrorCode::as_str),
                Some(e.code())
            );
        }
    }
}
