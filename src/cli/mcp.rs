//! `vault mcp [--profile P]`: the stdio MCP server the agent's client launches. stdout carries
//! JSON-RPC only; this command prints nothing there itself (one note on stderr when a person runs
//! it in a terminal).
use crate::cli::Exit;
use crate::mcp::{serve, ServeOptions};
use crate::paths::VaultPaths;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The only profile whose credentials this session can see and use.
    #[arg(long, default_value = "default", add = clap_complete::engine::ArgValueCandidates::new(super::completions::profile_names))]
    profile: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    crate::credentials::check_name("profile", &args.profile)?;
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        // A person ran it by hand: say what it is (on stderr; stdout stays the protocol's).
        super::out::note(format_args!(
            "vault mcp serves MCP (JSON-RPC on stdin/stdout) to an AI client, which starts it; it shows nothing here. To wire a client: `vault setup claude|cursor|vscode|codex|gemini`. Waiting for JSON-RPC on stdin; Ctrl-D or Ctrl-C ends it."
        ));
    }
    serve(ServeOptions {
        paths,
        profile: args.profile,
    })?;
    Ok(Exit::Ok)
}
