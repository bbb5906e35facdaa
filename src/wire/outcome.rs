//! What an executor observed of one action: the state it ends in, the scrubbed result, and why.
use serde_json::Value;

/// What an executor observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `completed`, `failed_before_send` or `indeterminate`.
    pub state: super::State,
    /// The scrubbed result for the agent (`http` / `ssh` objects of docs/design.md §5).
    pub result: Value,
    pub reason: Option<String>,
}
