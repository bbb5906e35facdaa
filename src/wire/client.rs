//! The MCP client as it introduced itself at `initialize` (a label for people, never an
//! identity), carried to the agent in `hello` and journaled with the session.

/// The client, as it introduced itself (self-reported: a label, never an identity).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientInfo {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
}
