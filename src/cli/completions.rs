//! `vault completions SHELL`: the shell's completion script, generated from the clap definitions,
//! on stdout (`vault completions bash > /etc/bash_completion.d/vault`, or what the packages do).
use crate::Exit;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The shell whose completion script to print.
    shell: clap_complete::Shell,
}

pub(super) fn run(args: Args) -> anyhow::Result<Exit> {
    // clap_complete offers hidden commands too (clap-rs/clap#1335) and clap cannot remove a
    // subcommand: the root is put together again from the real one's arguments and visible
    // commands, so nothing of the command line is restated here.
    let full = <super::Cli as clap::CommandFactory>::command();
    let mut command = clap::Command::new("vault")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|c| !c.is_hide_set()).cloned());
    // Generated into memory first: `generate` panics on a write error, a closed pipe included.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "vault", &mut script);
    super::out::raw(&script)?;
    Ok(Exit::Ok)
}
