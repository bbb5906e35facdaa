//! An action as stored and shown (docs/design.md §4), and what the approver signs: a canonical
//! JSON payload with its signature, and a decision with its optional session grant. Signing and
//! checking signatures is `keys::signing`'s; the lifecycle is `approvals`'.
use serde_json::Value;

/// An action as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Action {
    pub id: String,
    pub session_id: String,
    pub client: String,
    pub profile: String,
    pub tool: String,
    pub credential_id: String,
    pub credential_name: String,
    pub credential_version: i64,
    pub state: super::State,
    pub summary: String,
    pub action_hash: String,
    pub created_at: String,
    pub updated_at: String,
    pub expires_at: String,
    pub reason: Option<String>,
    pub result: Option<Value>,
}

/// A canonical JSON payload and the approver's hex signature over `tag ‖ payload`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signed {
    pub payload: String,
    pub signature: String,
}

/// A decision as the approver signed it, and the session grant when it approved for the session.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedDecision {
    pub decision: Signed,
    pub grant: Option<Signed>,
    /// The security key's touch, where the credential needs one (`--presence`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub touch: Option<super::touch::TouchProof>,
}
