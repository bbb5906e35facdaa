//! `vault mcp`: the stdio MCP server. Bytes → frames (`framing`) → JSON-RPC (`jsonrpc`) → MCP
//! method and era (`protocol`) → tool arguments (`tools`) → the same services the CLI uses
//! (credentials, policy, approvals). stdout carries JSON-RPC only, written by one task; every
//! diagnostic goes to stderr through `tracing`. No SQL and no network here.
pub mod framing;
pub mod jsonrpc;
mod protocol;
mod server;
mod tools;

pub use server::{serve, ServeError, ServeOptions};
pub use tools::catalog_json;
