//! Shell completion. `vault completions SHELL` prints the script a shell loads (the packages
//! install it): for bash, zsh and fish the registration of clap_complete's environment-driven
//! engine, which calls `vault` back at each Tab (`COMPLETE=bash vault -- WORDS…`, answered in
//! `main` before anything else runs), so credential and profile names come from the running
//! agent; for elvish and powershell a static script of the commands and flags.
//! The names are asked of the agent over a plain connection, as `vault list` does when it runs;
//! a locked vault completes no names (a Tab never asks for the passphrase).
use crate::agent::client::Client;
use crate::agent::protocol::{Reply, Request, Role};
use crate::cli::Exit;
use crate::credentials::Listed;
use crate::paths::VaultPaths;
use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The shell whose completion script to print.
    shell: clap_complete::Shell,
}

/// The command line as a person completes it: the real one's arguments and visible commands.
/// clap_complete's static generators offer hidden commands too (clap-rs/clap#1335) and clap
/// cannot remove a subcommand, so the root is put together again from the real one.
pub(super) fn command() -> clap::Command {
    let full = <super::Cli as clap::CommandFactory>::command();
    clap::Command::new("vault")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned())
}

/// Answers a shell's completion request (`COMPLETE=SHELL` in the environment) and exits; returns
/// at once otherwise.
pub(super) fn answer_if_asked() {
    clap_complete::CompleteEnv::with_factory(command)
        .bin("vault")
        .complete();
}

/// The program's two names: `agent-vault` is the link the packages install beside `vault`.
const NAMES: [&str; 2] = ["vault", "agent-vault"];

/// One zsh file for both names: compinit reads only its first line, so that `#compdef` names
/// both, and the second registration's own `#compdef` line goes.
fn zsh_for_both(script: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(script);
    let mut out = format!("#compdef {}\n", NAMES.join(" "));
    for line in text.lines().filter(|l| !l.starts_with("#compdef ")) {
        out.push_str(line);
        out.push('\n');
    }
    out.into_bytes()
}

pub(super) fn run(args: Args) -> anyhow::Result<Exit> {
    // Generated into memory first: `generate` panics on a write error, a closed pipe included.
    let mut script = Vec::new();
    // The installed script calls `vault` by name (found on PATH at each Tab), never the path
    // this binary was built at.
    let registration: Option<&dyn EnvCompleter> = match args.shell {
        clap_complete::Shell::Bash => Some(&Bash),
        clap_complete::Shell::Zsh => Some(&Zsh),
        clap_complete::Shell::Fish => Some(&Fish),
        _ => None,
    };
    match registration {
        // Each name calls itself back: `agent-vault` is completed by `agent-vault`, never by the
        // `vault` first on PATH, which may be HashiCorp Vault's.
        Some(shell) => {
            for name in NAMES {
                let mut one = Vec::new();
                shell.write_registration("COMPLETE", name, name, name, &mut one)?;
                script.extend(one);
            }
            if args.shell == clap_complete::Shell::Zsh {
                script = zsh_for_both(&script);
            }
        }
        None => {
            for name in NAMES {
                clap_complete::generate(args.shell, &mut command(), name, &mut script);
            }
        }
    }
    super::out::raw(&script)?;
    Ok(Exit::Ok)
}

/// What the running agent lists (nothing when locked, or on any error: a Tab prints nothing).
fn listed() -> Vec<Listed> {
    let Ok(paths) = VaultPaths::resolve(None) else {
        return Vec::new();
    };
    let Ok(Some(mut client)) = Client::connect(&paths, Role::Cli) else {
        return Vec::new();
    };
    match client.call(Request::Credentials { profile: None }) {
        Ok(Reply::Credentials(l)) => l,
        _ => Vec::new(),
    }
}

/// Credential names, each with its target as the help a shell may show beside it.
pub(super) fn credential_names() -> Vec<CompletionCandidate> {
    let mut names: Vec<CompletionCandidate> = listed()
        .into_iter()
        .map(|l| {
            let c = l.credential;
            let help = format!("{} {}", c.target.kind(), c.target.summary());
            CompletionCandidate::new(c.name).help(Some(help.into()))
        })
        .collect();
    names.dedup_by(|a, b| a.get_value() == b.get_value());
    names
}

/// Profile names in use.
pub(super) fn profile_names() -> Vec<CompletionCandidate> {
    let mut profiles: Vec<String> = listed().into_iter().map(|l| l.credential.profile).collect();
    profiles.sort();
    profiles.dedup();
    profiles.into_iter().map(CompletionCandidate::new).collect()
}
