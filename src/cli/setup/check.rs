//! After writing: the client's own health command (`claude mcp get NAME`, `gemini mcp list`),
//! run with a time limit when the client is installed, and what its answer means. A locked vault
//! is normal: `vault mcp` answers a client's `initialize` without the agent.
use super::super::out::note;
use super::clients::{Client, Scope};
use super::merge::Server;
use super::NAME;
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a client's health command may take (it starts `vault mcp` and says hello).
const CHECK_LIMIT: Duration = Duration::from_secs(60);

/// What a client that connected can do now.
fn vault_state(paths: &VaultPaths) -> String {
    if !paths.is_initialized() {
        format!(
            "there is no vault in {} yet: run `vault init`",
            paths.dir().display()
        )
    } else if crate::agent::is_running(paths) {
        "the vault is unlocked: its tools are served".to_owned()
    } else {
        "the vault is locked: run `vault unlock` to serve tools".to_owned()
    }
}

/// What a client's health command said of our server.
enum Verdict {
    Connected,
    /// Configured, waiting for the person (an approval, a trusted folder): what to do.
    Waiting(String),
    Failed,
}

/// Runs the client's health command, when there is one and the client is installed, and says
/// what it means. A locked vault is normal: `vault mcp` answers the client without the agent.
pub(super) fn check(
    client: Client,
    scope: Scope,
    client_bin: Option<&Path>,
    server: &Server,
    cwd: &Path,
    paths: &VaultPaths,
) -> anyhow::Result<Exit> {
    let name = &server.name;
    let by_hand = client.check_by_hand(name);
    let state = vault_state(paths);
    let health = client.health(name);
    let exe = health
        .as_ref()
        .and_then(|(program, _)| client_bin.map(Path::to_owned).or_else(|| on_path(program)));
    let (Some((program, cmd_args)), Some(exe)) = (health, exe) else {
        if client.health(name).is_some() {
            outln!(
                "{} is not on your PATH here, so nothing checked the entry.",
                client.label()
            );
        }
        outln!("To check: {by_hand}.");
        let (first, rest) = state.split_at(1);
        outln!("{}{rest}.", first.to_uppercase());
        return Ok(Exit::Ok);
    };
    let shown = format!("{program} {}", cmd_args.join(" "));
    note(format_args!("Checking with `{shown}`…"));
    let said = run_client(&exe, &cmd_args, cwd).with_context(|| {
        format!("the config is written, but `{shown}` could not check it ({by_hand})")
    })?;
    let Some((line, verdict)) = read_verdict(client, name, &said, cwd) else {
        bail!(
            "the config is written, but `{shown}` did not list {name} (it said: {}); {by_hand}",
            escape(&said.trim().chars().take(2000).collect::<String>())
        );
    };
    outln!("{shown}: {}", escape(&line));
    if client == Client::Claude && !said.contains(claude_scope(scope)) {
        outln!(
            "Claude Code reports an entry named {name} of another scope here, not the one just written: local entries win over project ones (.mcp.json, once you approved it in `claude`), which win over user ones."
        );
    }
    match verdict {
        Verdict::Connected => outln!("{name}: connected; {state}"),
        Verdict::Waiting(todo) => outln!("{name}: configured; {todo}"),
        Verdict::Failed => bail!(
            "{} could not start {name} ({}); run `{}{} mcp` in a terminal to see why",
            client.label(),
            escape(&line),
            server
                .vault_dir
                .as_ref()
                .map_or(String::new(), |d| format!("VAULT_DIR={d} ")),
            server.command
        ),
    }
    Ok(Exit::Ok)
}

/// How `claude mcp get` names the scope an entry comes from.
fn claude_scope(scope: Scope) -> &'static str {
    match scope {
        Scope::User => "Scope: User config",
        Scope::Project => "Scope: Project config",
    }
}

/// The lines the client printed for our server, and what they mean.
fn read_verdict(client: Client, name: &str, said: &str, cwd: &Path) -> Option<(String, Verdict)> {
    let ours = format!("{name}:");
    let line = match client {
        // `claude mcp get NAME`: "  Scope: User config (…)" and "  Status: ✔ Connected".
        Client::Claude => {
            let field = |f: &str| said.lines().map(str::trim).find(|l| l.starts_with(f));
            let status = field("Status:")?;
            field("Scope:").map_or(status.to_owned(), |scope| format!("{scope}; {status}"))
        }
        // `gemini mcp list`: "✓ vault: /path/to/vault mcp (stdio) - Connected".
        _ => said
            .lines()
            .find(|l| l.split_whitespace().take(2).any(|w| w == ours))?
            .trim()
            .to_owned(),
    };
    let status = line.rsplit(['-', ';']).next().unwrap_or_default();
    let verdict = if status.contains("Disconnected") || status.contains("Failed") {
        Verdict::Failed
    } else if status.contains("Connected") {
        Verdict::Connected
    } else if status.contains("Pending approval") {
        Verdict::Waiting(format!(
            "Claude Code asks once before it starts a server of .mcp.json: run `claude` in {} and choose \"Use this MCP server\"",
            cwd.display()
        ))
    } else if status.contains("Disabled") {
        Verdict::Waiting(format!(
            "Gemini CLI does not start it in {}, a folder you have not trusted: choose \"Trust folder\" when gemini asks there, or run `vault setup gemini --scope project` in it",
            cwd.display()
        ))
    } else {
        Verdict::Failed
    };
    Some((line, verdict))
}

/// An executable `name` in a directory of PATH.
/// How to give this program its other name, `agent-vault` (the link the packages install): a link
/// beside it where its folder is on PATH (after `cargo install`: `ln -s vault ~/.cargo/bin/…`, as
/// the README says), else one in ~/.local/bin. The same words from `vault setup` and `vault doctor`.
pub(in crate::cli) fn link_advice() -> String {
    let this = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let folder_on_path = this.as_deref().and_then(Path::parent).filter(|dir| {
        std::env::var_os("PATH").is_some_and(|p| {
            std::env::split_paths(&p).any(|d| std::fs::canonicalize(d).ok().as_deref() == Some(dir))
        })
    });
    match (&this, folder_on_path) {
        (Some(exe), Some(dir)) => {
            let name = exe.file_name().unwrap_or_default().to_string_lossy();
            format!("`ln -s {name} {}/{NAME}`", dir.display())
        }
        (Some(exe), None) => format!(
            "`ln -s {} ~/.local/bin/{NAME}` (with ~/.local/bin on PATH)",
            exe.display()
        ),
        (None, _) => format!("`ln -s \"$(command -v vault)\" ~/.local/bin/{NAME}`"),
    }
}

pub(in crate::cli) fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Runs a client's command in `cwd` with no stdin, for at most `CHECK_LIMIT`: what it printed on
/// stdout and stderr.
fn run_client(exe: &Path, args: &[String], cwd: &Path) -> anyhow::Result<String> {
    use std::io::Read;
    let mut child = Command::new(exe)
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", exe.display()))?;
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = r.read_to_end(&mut text);
            text
        })
    };
    let (out, err) = (
        drain(Box::new(child.stdout.take().expect("piped"))),
        drain(Box::new(child.stderr.take().expect("piped"))),
    );
    let started = Instant::now();
    while child.try_wait()?.is_none() {
        if started.elapsed() > CHECK_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("it did not finish within {} s", CHECK_LIMIT.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // A process it left behind may hold its outputs open: wait for them a little, not forever.
    let exited = Instant::now();
    while !(out.is_finished() && err.is_finished()) {
        if exited.elapsed() > Duration::from_secs(5) {
            bail!("it exited, but a process it started kept its output open");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut said = out.join().unwrap_or_default();
    said.extend(err.join().unwrap_or_default());
    Ok(String::from_utf8_lossy(&said).into_owned())
}
