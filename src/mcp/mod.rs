//! `vault mcp`: the stdio MCP server, an adapter with no key, no secret and no store. Bytes →
//! frames (`framing`) → JSON-RPC (`jsonrpc`) → MCP method and era (`protocol`) → the tool catalog
//! (`tools`) → one typed request per `tools/call` to the custody agent (`link`). stdout carries
//! JSON-RPC only, one line at a time in order (`stdio`); every diagnostic goes to stderr through `tracing`.
pub mod framing;
pub mod jsonrpc;
mod link;
pub mod protocol;
mod server;
mod stdio;
pub mod tools;

pub use crate::wire::ToolErrorCode;
pub use server::{serve, ServeError, ServeOptions};
pub use tools::catalog_json;
