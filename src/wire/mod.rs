//! The shapes that cross a process boundary or a signature, in one leaf module that depends on
//! nothing of the crate (serde and its kin only): what `vault mcp`, the agent, the person's
//! commands and the journal exchange. Behaviour stays with the modules that own it (their
//! `impl` blocks); the shapes live here so no adapter has to import a layer above it.
mod action;
pub mod catalog;
mod client;
mod code;
mod credential;
pub mod journal;
mod normalized;
mod outcome;
mod payload;
pub mod protocol;
mod result;
mod state;
mod status;
pub mod touch;
pub mod ts;

pub use action::{Action, Signed, SignedDecision};
pub use client::ClientInfo;
pub use code::ToolErrorCode;
pub use credential::{
    Approval, Credential, Edit, HttpAuth, HttpTarget, Listed, NewCredential, OpenBaoRef, Secret,
    SshAuth, SshTarget, Target,
};
pub use normalized::{
    CredentialRef, NormalizedAction, NormalizedHttp, NormalizedNetwork, NormalizedSsh,
};
pub use outcome::Outcome;
pub use payload::{
    ApprovalMethod, Decision, DecisionPayload, GrantPayload, GrantScope, KeyPayload,
    NetworkPayload, Op, OpenBaoAuth, OpenBaoLogin, OpenBaoPayload, Payload, PinPayload,
    PolicyPayload, RemovalPayload, ResumePayload, RevocationPayload,
};
pub use protocol::RelayedFile;
pub use result::{internal, locked, ToolResult};
pub use state::State;
pub use status::Hardening;
