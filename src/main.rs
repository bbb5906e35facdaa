//! The `vault` binary: restrict the umask, start logging on stderr, parse, run, map to an exit code.
use std::process::ExitCode;

fn main() -> ExitCode {
    agent_vault::paths::restrict_umask();
    agent_vault::cli::init_tracing();
    let code = agent_vault::cli::main();
    ExitCode::from(code as u8)
}
