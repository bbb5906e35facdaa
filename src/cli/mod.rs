//! The command line: argument parsing (clap), one file per subcommand, and the mapping from
//! errors to messages on stderr and exit codes. This is the only module that prints, and it
//! prints only results on stdout and one error line on stderr.
#![allow(clippy::print_stderr)]

/// `println!` for results: through `out::line`, so a closed stdout stops the command quietly.
macro_rules! outln {
    () => {
        $crate::cli::out::line(format_args!(""))?
    };
    ($($arg:tt)*) => {
        $crate::cli::out::line(format_args!($($arg)*))?
    };
}

mod add;
mod agent;
mod approve;
mod approver;
mod backend;
mod completions;
mod config;
mod credential_args;
mod demo;
mod doctor;
mod edit;
mod export_audit;
mod exposure;
mod grants;
mod init;
mod list;
mod lock;
mod log;
mod man;
mod mcp;
mod mirror;
mod openbao;
mod out;
mod pause;
mod pending;
mod pin;
mod resume;
mod rm;
#[cfg(target_os = "linux")]
mod run;
mod scan;
mod secret_from;
mod sessions;
mod setup;
mod show;
mod status;
mod unlock;
mod verify;

use crate::credentials::CredentialError;
use crate::keys::PassphraseError;
use crate::paths::VaultPaths;
use crate::vault::VaultError;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;

/// agent-vault: your agents ask for actions, never for secrets.
#[derive(Debug, Parser)]
#[command(name = "vault", version, about, max_term_width = 100)]
pub(crate) struct Cli {
    /// The vault directory (default: $VAULT_DIR, else ~/.local/share/agent-vault).
    #[arg(long, global = true, value_name = "DIR")]
    vault_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a vault: master key, approver key, encrypted database, passphrase-protected key file.
    Init(init::Args),
    /// Add a credential (the secret comes from stdin, a file or the terminal, never argv).
    #[command(subcommand)]
    Add(add::Kind),
    /// List credentials (never their secrets).
    List(list::Args),
    /// One credential: its binding, the policy in force, its grants, when it last ran (never its secret).
    Show(show::Args),
    /// The vault at a glance: agent up or locked, pause, waiting actions, grants, the last anchor.
    Status(status::Args),
    /// Remove a credential and its secret.
    Rm(rm::Args),
    /// Change a credential's rules or secret (its version goes up; old approvals stop matching).
    Edit(edit::Args),
    /// Start the vault agent, which holds the key until `vault lock` (asks for the passphrase).
    Unlock(unlock::Args),
    /// Stop the vault agent: it forgets the key; until `vault unlock`, only the passphrase opens the vault.
    Lock(lock::Args),
    /// The custody process (started by `vault unlock`, or by a login unit with --foreground).
    Agent(agent::Args),
    /// Check the keyring, paths, modes and versions; prints no secret.
    Doctor(doctor::Args),
    /// The effective configuration: each key's value and source, and what the agent uses.
    Config(config::Args),
    /// Decide waiting actions: passphrase once, then a card per action (or scripted with --id).
    Approve(approve::Args),
    /// List the actions waiting for a decision (no passphrase needed).
    Pending(pending::Args),
    /// Set or change the approval PIN that every approval on a card takes (asks for the passphrase).
    Pin(pin::Args),
    /// Stop everything: every tool call fails and waiting actions are denied.
    Pause(pause::Args),
    /// Lift `vault pause` (asks for the passphrase).
    Resume(resume::Args),
    /// Session grants in force (what `[s]` on a card granted); `revoke ID|--all` ends them.
    Grants(grants::Args),
    /// Security keys for approvals: `add-key` (touch it), `keys`, `remove-key NAME`.
    #[command(subcommand)]
    Approver(approver::Sub),
    /// Team mode: log the vault in to the team's OpenBao, see how that stands, or log out.
    #[command(subcommand)]
    Openbao(openbao::Sub),
    /// Serve MCP on stdio for an agent's client (stdout carries JSON-RPC only).
    Mcp(mcp::Args),
    /// Start an AI client in a sandbox: it cannot reach your terminal, desktop, other processes or secrets.
    #[cfg(target_os = "linux")]
    Run(run::Args),
    /// Run the whole flow on a throwaway vault against a loopback target.
    Demo(demo::Args),
    /// Recompute the journal's hash chain (of the vault, or of an export with no key); exit 3 if broken.
    Verify(verify::Args),
    /// Write the journal as JSON lines that `vault verify --file` holds to the approver's public key.
    ExportAudit(export_audit::Args),
    /// What each agent did: actions and rejected calls, from the journal.
    Log(log::Args),
    /// MCP sessions: client, parent process, start and end, actions by state.
    Sessions(sessions::Args),
    /// What an agent could still read: secrets in DIR's .env files and the usual files under
    /// $HOME, each with the `vault add` that moves it in (exit 1 if any; needs no vault).
    Scan(scan::Args),
    /// Register `vault mcp` with an MCP client (claude, cursor, vscode, codex, gemini).
    Setup(setup::Args),
    /// Print the completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// Print the manual page vault(1) in roff: `vault man | man -l -` reads it without a package.
    Man(man::Args),
}

/// Every command that may touch key material (a passphrase, the master or approver key, a
/// secret, a locked store opened here) makes itself unreadable to the person's other processes
/// before it reads anything, as the agent does: not dumpable (no ptrace attach, no
/// `/proc/PID/mem`), no core. Only `vault mcp` stays as it is: it never holds a key or a secret
/// (and the custody tests read its memory to show so); `vault agent` hardens itself further.
fn harden(command: &Command) {
    if matches!(command, Command::Mcp(_)) {
        return;
    }
    // `vault run` holds no key either, and its relay must stay identifiable to the agent (an
    // undumpable process's executable cannot be read by it).
    #[cfg(target_os = "linux")]
    if matches!(command, Command::Run(_)) {
        return;
    }
    let h = crate::sys::deny_inspection();
    if !h.undumpable {
        tracing::warn!("this process could not make itself unreadable to your other processes; a key it reads may be readable by them");
    }
}

/// Parses `std::env::args`, runs the command, prints any error, returns the exit code.
pub(crate) fn main() -> Exit {
    // A shell asking for completions (`COMPLETE=bash vault -- …`) is answered, and nothing else runs.
    completions::answer_if_asked();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Ok
            };
            let _ = e.print();
            return code;
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(err) if err.chain().any(|c| c.is::<out::StdoutClosed>()) => Exit::Ok,
        Err(err) => {
            eprintln!("error: {err:#}");
            exit_code(&err)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Exit> {
    harden(&cli.command);
    // `vault scan` needs no vault, not even a resolvable vault directory.
    if let Command::Scan(a) = cli.command {
        return scan::run(a);
    }
    let paths = VaultPaths::resolve(cli.vault_dir)?;
    match cli.command {
        Command::Init(a) => init::run(paths, a),
        Command::Add(k) => add::run(paths, k),
        Command::List(a) => list::run(paths, a),
        Command::Show(a) => show::run(paths, a),
        Command::Status(a) => status::run(paths, a),
        Command::Rm(a) => rm::run(paths, a),
        Command::Edit(a) => edit::run(paths, a),
        Command::Unlock(a) => unlock::run(paths, a),
        Command::Lock(a) => lock::run(paths, a),
        Command::Agent(a) => agent::run(paths, a),
        Command::Doctor(a) => doctor::run(paths, a),
        Command::Config(a) => config::run(paths, a),
        Command::Mcp(a) => mcp::run(paths, a),
        #[cfg(target_os = "linux")]
        Command::Run(a) => run::run(paths, a),
        Command::Approve(a) => approve::run(paths, a),
        Command::Pending(a) => pending::run(paths, a),
        Command::Pin(a) => pin::run(paths, a),
        Command::Pause(a) => pause::run(paths, a),
        Command::Resume(a) => resume::run(paths, a),
        Command::Grants(a) => grants::run(paths, a),
        Command::Approver(s) => approver::run(paths, s),
        Command::Openbao(s) => openbao::run(paths, s),
        Command::Demo(a) => demo::run(a),
        Command::Verify(a) => verify::run(paths, a),
        Command::ExportAudit(a) => export_audit::run(paths, a),
        Command::Log(a) => log::run(paths, a),
        Command::Sessions(a) => sessions::run(paths, a),
        Command::Setup(a) => setup::run(paths, a),
        Command::Completions(a) => completions::run(a),
        Command::Man(a) => man::run(a),
        Command::Scan(_) => unreachable!("vault scan runs before the vault directory is resolved"),
    }
}

/// Exit codes of the `vault` binary (docs/design.md §7); `run_binary` hands it to the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Ok = 0,
    Failure = 1,
    Usage = 2,
    VerificationFailed = 3,
    LockedOrPaused = 4,
    /// `vault verify --file`: intact, but not held to an approver key.
    NotHeld = 5,
}

/// The exit code a vault error maps to: 4 when the vault is locked or the passphrase is wrong.
fn vault_exit(e: &VaultError) -> Exit {
    match e {
        VaultError::Locked(_) | VaultError::KeyFile(crate::keys::KeyFileError::WrongPassphrase) => {
            Exit::LockedOrPaused
        }
        _ => Exit::Failure,
    }
}

/// Exit code for an error: 4 when locked or the passphrase is wrong, 2 for invalid input.
fn exit_code(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(v) = cause.downcast_ref::<VaultError>() {
            return vault_exit(v);
        }
        if let Some(crate::approvals::ApprovalError::WrongApprover) =
            cause.downcast_ref::<crate::approvals::ApprovalError>()
        {
            return Exit::LockedOrPaused;
        }
        if let Some(r) = cause.downcast_ref::<backend::Refused>() {
            use crate::agent::protocol::ErrorCode;
            return match r.code {
                ErrorCode::WrongApprover | ErrorCode::Paused => Exit::LockedOrPaused,
                ErrorCode::Invalid if r.message.starts_with("invalid ") => Exit::Usage,
                _ => Exit::Failure,
            };
        }
        if cause.is::<crate::scan::ScanError>() {
            return Exit::Usage;
        }
        if let Some(CredentialError::Invalid { .. }) = cause.downcast_ref::<CredentialError>() {
            return Exit::Usage;
        }
        if let Some(p) = cause.downcast_ref::<PassphraseError>() {
            return match p {
                // The command lacks an input it needs: a usage error, not a locked vault.
                PassphraseError::NoTerminal { .. } => Exit::Usage,
                _ => Exit::Failure,
            };
        }
    }
    Exit::Failure
}

/// Logs go to stderr, filtered by `VAULT_LOG` (default `warn`), coloured only on a terminal.
pub(crate) fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("VAULT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let to_stdout = crate::mutation::off("stdout_log");
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(move || -> Box<dyn std::io::Write> {
            if to_stdout {
                Box::new(std::io::stdout())
            } else {
                Box::new(std::io::stderr())
            }
        })
        .with_ansi(ansi)
        .with_target(false)
        .try_init();
}

/// `--approval each|session|writes|never` (the library's `Approval` knows nothing of clap).
fn approval_parser() -> impl clap::builder::TypedValueParser<Value = crate::credentials::Approval> {
    use crate::credentials::Approval;
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        Approval::ALL.map(|a| PossibleValue::new(a.as_str()).help(a.meaning())),
    )
    .map(|s| Approval::parse(&s).expect("clap admits only the listed values"))
}

fn presence_parser() -> impl clap::builder::TypedValueParser<Value = crate::wire::touch::Presence> {
    use crate::wire::touch::Presence;
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let all = [Presence::None, Presence::Key, Presence::KeyForWrites];
    PossibleValuesParser::new(all.map(|p| {
        PossibleValue::new(p.as_str()).help(match p {
            Presence::None => "the PIN or passphrase alone",
            Presence::Key => "also a touch of a registered security key, for every approval",
            Presence::KeyForWrites => "also a touch for writes (not GET or HEAD)",
        })
    }))
    .map(move |s| {
        all.into_iter()
            .find(|p| p.as_str() == s)
            .expect("clap admits only the listed values")
    })
}

/// Prints a value as one line of JSON on stdout.
fn print_json(value: &serde_json::Value) -> anyhow::Result<()> {
    outln!("{value}");
    Ok(())
}

/// Asks a yes/no question on the controlling terminal (never stdin/stdout); no terminal is an error.
fn confirm_on_terminal(question: &str) -> anyhow::Result<bool> {
    use std::io::{BufRead, Write};
    let tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .map_err(|_| {
            anyhow::anyhow!(
                "no terminal to confirm on; pin the key with --host-key SHA256:… instead"
            )
        })?;
    let mut out = &tty;
    out.write_all(question.as_bytes())?;
    out.flush()?;
    let mut line = String::new();
    std::io::BufReader::new(&tty).read_line(&mut line)?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

/// The approver key of a command given the passphrase (`Backend::verified`): every credential
/// change is signed with it.
fn approver(backend: &backend::Backend) -> anyhow::Result<&crate::keys::ApproverKey> {
    backend.keys().map(|k| &k.approver).ok_or_else(|| {
        anyhow::anyhow!(
            "this change needs the passphrase: run it in a terminal, or give it with --passphrase-stdin or VAULT_PASSPHRASE_FILE"
        )
    })
}

/// Refuses a reply that is not the credential this command built and signed: what the person
/// typed is what is stored.
fn check_stored(
    signed: &crate::credentials::Credential,
    stored: &crate::credentials::Credential,
) -> anyhow::Result<()> {
    if crate::credentials::same_policy(signed, stored) {
        return Ok(());
    }
    anyhow::bail!(
        "the vault agent answered with another credential than the one you signed ({} version {}, not {} version {}); something on its socket is tampering. Run `vault doctor`",
        stored.name, stored.version, signed.name, signed.version
    )
}

/// Parses `--for` durations such as 30m, 8h or 2hours (one second to 31 days).
fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d = parse_age(s)?;
    if (1..=31 * 86400).contains(&d.as_secs()) {
        Ok(d)
    } else {
        Err("the duration must be between one second and 31 days".to_owned())
    }
}

/// The one duration syntax of every flag: `90s`, `10m`, `2h`, `2hours`, `1h30m`, `3d`, `3 days`.
fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let text = s.trim();
    let bad = || format!("{s:?} is not a duration like 90s, 10m, 2h, 2hours or 3d");
    for unit in ["days", "day", "d"] {
        if let Some(n) = text.strip_suffix(unit) {
            if let Ok(n) = n.trim().parse::<u64>() {
                return n
                    .checked_mul(86400)
                    .map(std::time::Duration::from_secs)
                    .ok_or_else(bad);
            }
        }
    }
    let d: jiff::SignedDuration = text.parse().map_err(|_| bad())?;
    std::time::Duration::try_from(d).map_err(|_| bad())
}
