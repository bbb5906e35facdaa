//! agent-vault: a local-first credential vault for AI coding agents.
//!
//! The agent asks for an *action*; the vault holds the secret, asks a person, runs the action and
//! records every step in a hash-chained journal. See `ARCHITECTURE.md` for the code map.
#![deny(clippy::print_stdout, clippy::print_stderr, clippy::dbg_macro)]
#![forbid(unsafe_op_in_unsafe_fn)]
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

pub mod agent;
pub mod approvals;
pub mod audit;
mod canonical;
mod cli;
pub mod config;
#[cfg(target_os = "linux")]
pub mod contain;
pub mod credentials;
mod demo;
pub mod exec;
pub mod fido;
pub mod import;
pub mod keys;
pub mod mcp;
mod mutation;
pub mod openbao;
pub mod paths;
pub mod policy;
pub mod scan;
mod services;
pub mod store;
pub mod sys;
pub mod term;
mod time;
pub mod vault;
pub mod wire;

/// The `vault` binary: umask 077 first, logs to stderr, then the command line (`src/main.rs` is
/// only this call); the process's exit code is the CLI's `Exit` (docs/design.md §7). The CLI and
/// the demo are not part of the library's API.
pub fn run_binary() -> std::process::ExitCode {
    paths::restrict_umask();
    cli::init_tracing();
    std::process::ExitCode::from(cli::main() as u8)
}
