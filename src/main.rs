//! The `vault` binary: everything is in the library (`agent_vault::run_binary`).
use std::process::ExitCode;

fn main() -> ExitCode {
    agent_vault::run_binary()
}
