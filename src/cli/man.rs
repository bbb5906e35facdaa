//! `vault man`: the manual page vault(1) in roff on stdout, generated from the clap definitions
//! (`vault man > vault.1` at package time; `vault man | man -l -` where no package installed it). One self-contained page: the global
//! options, every command with its usage and summary, exit status and environment; it refers to
//! no `vault-COMMAND(1)` page, since none is installed.
use crate::cli::Exit;
use roff::{bold, roman, Roff};
use std::io::{self, Write};

#[derive(Debug, clap::Args)]
pub(super) struct Args {}

pub(super) fn run(_: Args) -> anyhow::Result<Exit> {
    super::out::raw(&page()?)?;
    Ok(Exit::Ok)
}

const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    (
        "1",
        "Failure (vault doctor: a check did not pass; vault scan: a secret was found).",
    ),
    ("2", "Usage: invalid arguments or input."),
    (
        "3",
        "Verification failed: the journal is broken (vault verify).",
    ),
    (
        "4",
        "Locked or paused: no agent holds the key, a wrong passphrase, or vault pause.",
    ),
    (
        "5",
        "Not held to a key: vault verify --file found the export intact but could not hold it to the approver's key (no --approver-key, or dispatches that rest on rows written before the journal carried signatures).",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "VAULT_DIR",
        "The vault directory when --vault-dir is not given; else ~/.local/share/agent-vault.",
    ),
    (
        "VAULT_PASSPHRASE_FILE",
        "A file whose first line is the passphrase, for scripts (no command takes a passphrase or a secret on the command line).",
    ),
    (
        "VAULT_LOG",
        "What is logged on stderr, as a tracing filter (default: warn).",
    ),
    (
        "XDG_RUNTIME_DIR",
        "The agent's socket is in agent-vault/ under it (else /tmp/agent-vault-UID/).",
    ),
    (
        "NO_COLOR",
        "No colour in vault log, even on a terminal.",
    ),
];

/// EXAMPLES: a first hour with the vault, each command as typed and what it does.
const EXAMPLES: &[(&str, &str)] = &[
    ("vault init", "Create a vault: asks a passphrase and an approval PIN, and starts the vault agent."),
    ("vault scan", "Name every plain-text secret an agent could read (.env files, ~/.npmrc, ~/.aws/credentials, ...), never its value; exit 1 if any."),
    ("vault add http github --host api.github.com --bearer --secret-from env:.env#GITHUB_TOKEN --remove-from-source", "Move a token from a .env file into the vault, bound to one host; the line becomes a comment naming the credential."),
    ("vault add ssh web1 --host 10.0.0.5 --user deploy --key-file ~/.ssh/id_ed25519 --fetch-host-key", "Add an SSH login; its host key is shown once to confirm and then pinned."),
    ("vault setup claude", "Register vault mcp with Claude Code (also cursor, vscode, codex, gemini)."),
    ("vault run -- claude", "Start the AI client contained: it reaches the project and the vault, not your terminal, desktop or other secrets."),
    ("vault approve", "Decide what the agent asked for: one card per action; an approval takes the PIN."),
    ("vault approver add-key --name main && vault edit prod --presence key", "Register a FIDO2 security key (then a backup one), and make the prod credential's every action need its touch."),
    ("vault edit web1 --key-file ~/.ssh/new_key", "Rotate an SSH key: its type and fingerprint are shown and old approvals stop matching."),
    ("vault status", "Whether the vault is up, paused, or waiting on you; exit 4 when locked or paused."),
    ("vault log", "What each agent did, and why each action ran (a card, a grant or a policy)."),
    ("vault verify", "Recompute the journal's hash chain and check every approver signature in it; keep the head it prints somewhere else."),
    ("vault verify --file audit.jsonl --approver-key approver.pub", "Hold an export to the approver public key you kept (vault approver show-key): every action that ran must rest on a signature of that key."),
];

fn page() -> io::Result<Vec<u8>> {
    let mut command = <super::Cli as clap::CommandFactory>::command();
    command.build();
    let man = clap_mangen::Man::new(command.clone()).manual("agent-vault");
    // Every render starts with the same preamble; the page keeps the first.
    let mut preamble = Vec::new();
    Roff::new().to_writer(&mut preamble)?;
    let mut page = Vec::new();
    let mut add = |render: &dyn Fn(&mut dyn Write) -> io::Result<()>| -> io::Result<()> {
        let mut part = Vec::new();
        render(&mut part)?;
        let part = match page.is_empty() {
            true => &part[..],
            false => part.strip_prefix(&preamble[..]).unwrap_or(&part),
        };
        page.extend_from_slice(part);
        Ok(())
    };
    add(&|w| man.render_title(w))?;
    add(&|w| man.render_name_section(w))?;
    add(&|w| man.render_synopsis_section(w))?;
    add(&|w| man.render_description_section(w))?;
    add(&|w| man.render_options_section(w))?;
    add(&|w| sections(&command).to_writer(w))?;
    add(&|w| man.render_version_section(w))?;
    Ok(page)
}

/// COMMANDS (each with its usage line and summary), EXAMPLES, EXIT STATUS and ENVIRONMENT.
fn sections(command: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    // `help` (clap's) is named once, below, rather than with a copy of every command.
    let visible = |c: &clap::Command| -> Vec<clap::Command> {
        c.get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .cloned()
            .collect()
    };
    for sub in visible(command) {
        let nested = visible(&sub);
        let leaves = if nested.is_empty() { vec![sub] } else { nested };
        for mut leaf in leaves {
            // `SHA256:…`: groff's ASCII device (a C locale) has no glyph for the ellipsis.
            let usage = leaf.render_usage().to_string().replace('…', "...");
            let usage = usage.strip_prefix("Usage: ").unwrap_or(&usage);
            let name = leaf.get_bin_name().unwrap_or(leaf.get_name()).to_owned();
            let rest = usage.strip_prefix(name.as_str()).unwrap_or("");
            roff.control("TP", []).text([bold(name), roman(rest)]);
            if let Some(about) = leaf.get_about() {
                roff.text([roman(about.to_string())]);
            }
        }
    }
    roff.control("PP", []).text([roman(
        "vault help COMMAND (or vault COMMAND --help) shows every option of a command.",
    )]);
    for (title, rows) in [
        ("EXAMPLES", EXAMPLES),
        ("EXIT STATUS", EXIT_STATUS),
        ("ENVIRONMENT", ENVIRONMENT),
    ] {
        roff.control("SH", [title]);
        for (term, meaning) in rows {
            roff.control("TP", [])
                .text([bold(*term)])
                .text([roman(*meaning)]);
        }
    }
    roff
}
