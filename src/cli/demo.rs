//! `vault demo`: the end-to-end flow on a throwaway vault (see `crate::demo`). On a terminal it
//! opens the real approval card (`vault approve` for the demo vault); without one it approves
//! through the scripted path and says so.
use crate::cli::Exit;
use crate::demo::{self, Approver};
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
    // The real card: this same binary's `vault approve`, on this terminal, for the demo vault.
    let mut screen = |dir: &std::path::Path, passphrase: &std::path::Path| {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
        let status = std::process::Command::new(exe)
            .arg("approve")
            .env("VAULT_DIR", dir)
            .env("VAULT_PASSPHRASE_FILE", passphrase)
            .status()
            .map_err(|e| format!("cannot start vault approve: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("vault approve ended with {status}"))
        }
    };
    let approver = if interactive {
        Approver::Person(&mut screen)
    } else {
        Approver::Scripted
    };
    let outcome = demo::run(&mut say, approver, args.keep)?;
    if outcome.denied > 0 {
        // The denial worked, but the demo did not show the whole flow: not a success.
        anyhow::bail!(
            "you denied {} of the demo's 2 actions, so it did not run end to end (the denial worked: nothing was sent). Run `vault demo` again and approve both to see the whole flow",
            outcome.denied
        );
    }
    Ok(Exit::Ok)
}
