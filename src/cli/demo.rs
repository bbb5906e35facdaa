//! `vault demo`: the end-to-end flow on a throwaway vault (see `crate::demo`). On a terminal it
//! asks you to approve; without one it approves through the scripted path and says so.
use crate::demo::{self, Approver};
use crate::Exit;
use std::io::IsTerminal;

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Keep the throwaway vault instead of deleting it at the end.
    #[arg(long)]
    keep: bool,
}

pub(super) fn run(args: Args) -> anyhow::Result<Exit> {
    let mut say = |line: &str| {
        // A closed stdout does not stop the demo half way: it runs to the end and cleans up.
        let _ = super::out::line(format_args!("{line}"));
    };
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let mut ask = |summary: &str, hash: &str| {
        let question =
            format!("\n   APPROVAL NEEDED\n   {summary}\n   hash {hash}…\n   Approve? [y/N] ");
        super::confirm_on_terminal(&question).unwrap_or(false)
    };
    let approver = if interactive {
        Approver::Person(&mut ask)
    } else {
        Approver::Scripted
    };
    demo::run(&mut say, approver, args.keep)?;
    Ok(Exit::Ok)
}
