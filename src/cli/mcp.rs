//! `vault mcp [--profile P]`: the stdio MCP server the agent's client launches. stdout carries
//! JSON-RPC only; this command prints nothing itself.
use crate::mcp::{serve, ServeOptions};
use crate::paths::VaultPaths;
use crate::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The only profile whose credentials this session can see and use.
    #[arg(long, default_value = "default")]
    profile: String,
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    crate::credentials::check_name("profile", &args.profile)?;
    serve(ServeOptions {
        paths,
        profile: args.profile,
    })?;
    Ok(Exit::Ok)
}
