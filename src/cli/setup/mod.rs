//! `vault setup CLIENT [--scope user|project] [--print] [--name NAME] [--client-bin PATH]`:
//! registers `vault mcp` with an MCP client, as `agent-vault`, by writing the client's config
//! file itself. User scope names the absolute path of this binary and the vault directory this
//! command resolved, so the client reaches the same vault whatever its PATH and folder. Project
//! scope writes a file meant to be committed: the command `agent-vault` by name and no path of
//! this machine, and says what each teammate needs. Merges into an existing file (every other
//! key kept, and a JSONC file's comments; a file that does not parse is refused, never
//! rewritten), writes atomically with the file's mode kept, then asks the client's own health
//! command, when it is installed, whether the server answers. `clients.rs`: what each client
//! reads; `merge.rs`: editing a JSON or TOML file in place; `jsonc.rs`: a JSONC one;
//! `check.rs`: the client's health command.
mod check;
mod clients;
mod jsonc;
mod merge;
mod portable;
mod scopes;

pub(super) use self::check::{link_advice, on_path};
use self::clients::{Client, Places, Scope, Trust};
use self::merge::Server;
use super::out::note;
use crate::cli::Exit;
use crate::paths::VaultPaths;
use crate::term::escape;
use anyhow::{anyhow, bail, Context};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The client to configure.
    #[arg(value_enum)]
    client: Client,
    /// user: the client's own config (every project); project: this folder's config.
    #[arg(long, value_enum, default_value = "user")]
    scope: Scope,
    /// Print the config on stdout and change nothing.
    #[arg(long)]
    print: bool,
    /// The server's name in the client's config.
    #[arg(long, default_value = NAME, value_name = "NAME", value_parser = server_name)]
    name: String,
    /// The client's executable, for its health check (default: `claude` or `gemini` on PATH).
    #[arg(long, value_name = "PATH")]
    client_bin: Option<PathBuf>,
    /// Gemini CLI: let it call the vault's tools without its own confirmation ("trust": true).
    /// Headless `gemini -p` offers the model no tool it would have to confirm; each action still
    /// waits for your card in `vault approve`.
    #[arg(long)]
    trust: bool,
}

/// The server's name in every client, and the command a project's config names: `vault` is
/// also HashiCorp Vault's CLI, so the package installs this program as `agent-vault` too.
pub(crate) const NAME: &str = "agent-vault";

fn server_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'));
    ok.then(|| s.to_owned()).ok_or_else(|| {
        format!("{s:?} must be 1-64 letters, digits, '-' or '_' (a name every client accepts)")
    })
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let client = args.client;
    if args.client_bin.is_some() && client.health(&args.name).is_none() {
        note(format_args!(
            "error: {} has no health command that vault setup runs; --client-bin is for claude and gemini",
            client.label()
        ));
        return Ok(Exit::Usage);
    }
    let server = match args.scope {
        // What a teammate's machine has too: the command by name, the default vault.
        Scope::Project => Server {
            name: args.name.clone(),
            command: NAME.to_owned(),
            vault_dir: None,
            trust: args.trust,
        },
        Scope::User => Server {
            name: args.name.clone(),
            command: utf8(&this_binary()?, "the vault binary")?,
            vault_dir: Some(utf8(&vault_dir(&paths)?, "the vault directory")?),
            trust: args.trust,
        },
    };
    let at = Places::from_env()?;
    let file = client.config_path(args.scope, &at)?;
    let trusts = client == Client::Gemini && args.scope == Scope::Project;
    if args.print {
        outln!("{}", client.render(None, &file, &server)?.trim_end());
        note(format_args!(
            "Nothing was written. This is {} as it would be with only this entry; `vault setup {}` merges the entry into that file and keeps everything else in it.",
            file.display(),
            client.arg()
        ));
        if trusts {
            note(format_args!(
                "It also trusts {} in {} (Gemini CLI starts MCP servers only in trusted folders).",
                at.cwd.display(),
                at.gemini_trusted_folders().display()
            ));
        }
        return Ok(Exit::Ok);
    }

    // Every change is planned before one is made: a file that cannot be merged leaves all as
    // they were.
    let existing = read_text(&file)?;
    let text = client.render(existing.as_deref(), &file, &server)?;
    let trust = match trusts {
        true => Some(plan_trust(&at, &file)?),
        false => None,
    };
    let changed = existing.as_deref() != Some(text.as_str());
    if changed {
        write_atomically(&file, &text)?;
    }
    outln!(
        "{} {}: {} runs {} mcp{}",
        if changed { "Wrote" } else { "Unchanged" },
        file.display(),
        client.entry_key(&server.name),
        server.command,
        server
            .vault_dir
            .as_ref()
            .map_or(String::new(), |d| format!(" with VAULT_DIR={d}"))
    );
    if args.scope == Scope::Project {
        portable::tell(&file, &paths)?;
    }
    if let Some((trust_file, trust)) = trust {
        apply_trust(&at, &trust_file, &trust, &server.name, existing.as_deref())?;
    }
    match (client, args.scope) {
        (Client::Gemini, Scope::User) => outln!(
            "Gemini CLI starts MCP servers, your user settings' too, only in folders you trust: choose \"Trust folder\" when it asks, or run `vault setup gemini --scope project` in the folder."
        ),
        (Client::Codex, Scope::Project) => outln!(
            "Codex reads .codex/config.toml only in a project you trust (it asks on its first start there)."
        ),
        _ => {}
    }
    match client.terminal_program() {
        Some(program) => outln!(
            "Start it contained: `vault run -- {program}` (it then cannot reach your terminal, desktop, other processes or the secrets outside the vault; SECURITY.md \"Containment\")."
        ),
        None => outln!(
            "{} runs outside `vault run`, which contains terminal clients: its agent can type into your terminals, so approvals there take the PIN (SECURITY.md \"Who can approve\").",
            client.label()
        ),
    }
    if let Some(warning) = scopes::conflict(client, args.scope, &server.name, &at) {
        outln!("{warning}");
    }
    if client == Client::Gemini && !server.trust {
        outln!(
            "Headless `gemini -p` offers the model none of {}'s tools: it drops every tool it would have to confirm first. For headless use run `vault setup gemini --trust` (Gemini then calls them without asking; each action still waits for your card in `vault approve`).",
            server.name
        );
    }
    let bin = args.client_bin.as_deref();
    check::check(client, args.scope, bin, &server, &at.cwd, &paths)
}

/// The running binary, as the clients must start it: absolute, links resolved.
fn this_binary() -> anyhow::Result<PathBuf> {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot tell where this vault binary is (was it moved or replaced while it ran?); run vault setup again from the installed binary")
}

/// The vault directory this command resolved, absolute (links resolved once it exists).
fn vault_dir(paths: &VaultPaths) -> anyhow::Result<PathBuf> {
    let dir = std::path::absolute(paths.dir()).with_context(|| {
        format!(
            "cannot make the vault directory {} absolute; pass --vault-dir with an absolute path",
            paths.dir().display()
        )
    })?;
    Ok(std::fs::canonicalize(&dir).unwrap_or(dir))
}

fn utf8(path: &Path, what: &str) -> anyhow::Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| {
        anyhow!(
            "the path of {what} is not UTF-8 ({}); a client's config cannot hold it: move it to a path in UTF-8",
            path.display()
        )
    })
}

/// A config file's text; None when there is none yet.
fn read_text(file: &Path) -> anyhow::Result<Option<String>> {
    match std::fs::read(file) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            anyhow!(
                "{} is not UTF-8 text; vault setup leaves it as it is. Fix it, or add the entry by hand: `vault setup … --print` shows it",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(anyhow!(e).context(format!(
            "cannot read {}; check its permissions",
            file.display()
        ))),
    }
}

/// Replaces `file` with `text` in one step: a new 0600 file (`create_new`) in the same
/// directory, given the old file's mode, synced, then renamed over it. A config that is a
/// symbolic link (dotfiles) stays one: its target is replaced.
fn write_atomically(file: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let target = match std::fs::symlink_metadata(file) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(file).with_context(|| {
            format!(
                "{} is a link to a file that does not exist; fix the link or remove it",
                file.display()
            )
        })?,
        _ => file.to_owned(),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| {
            format!(
                "cannot create {}; check its parent's permissions",
                dir.display()
            )
        })?;
    let mode = std::fs::metadata(&target)
        .ok()
        .map(|m| m.permissions().mode() & 0o7777);
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.vault-setup-{}", std::process::id()));
    let write = || -> anyhow::Result<()> {
        let mut f = crate::paths::create_new_private(&tmp)?;
        f.write_all(text.as_bytes())?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, &target)?;
        std::fs::File::open(dir)?.sync_all()?;
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        e.context(format!(
            "cannot write {}; it was left as it was (check the folder's permissions and free space)",
            target.display()
        ))
    })
}

/// Gemini CLI's trusted folders, and what `vault setup gemini --scope project` does to them:
/// the current folder trusted, unless a rule decides it already.
fn plan_trust(at: &Places, settings: &Path) -> anyhow::Result<(PathBuf, Trust)> {
    let file = at.gemini_trusted_folders();
    let home = std::fs::canonicalize(&at.home).unwrap_or_else(|_| at.home.clone());
    if home.starts_with(&at.cwd) {
        bail!(
            "vault setup will not trust {} for Gemini CLI: every folder under it, your home included, would be trusted. Run `vault setup gemini --scope project` in a project folder, or `vault setup gemini` for your user settings ({} was not changed)",
            at.cwd.display(),
            settings.display()
        );
    }
    let existing = read_text(&file)?;
    Ok((
        file.clone(),
        clients::gemini_trust(existing.as_deref(), &file, &at.cwd)?,
    ))
}

fn apply_trust(
    at: &Places,
    file: &Path,
    trust: &Trust,
    name: &str,
    settings: Option<&str>,
) -> anyhow::Result<()> {
    let cwd = at.cwd.display();
    match trust {
        Trust::Already(rule) => outln!(
            "{cwd} is trusted already in {} ({}).",
            file.display(),
            escape(rule)
        ),
        Trust::Refused(rule) => outln!(
            "You marked {} as not to be trusted in {}; vault setup leaves that as it is, and Gemini CLI shows {name} \"Disabled\" here until you trust the folder (/permissions in gemini).",
            escape(rule),
            file.display()
        ),
        Trust::Add(text) => {
            write_atomically(file, text)?;
            outln!(
                "Trusted {cwd} in {}: Gemini CLI starts MCP servers only in folders you trust, and now also reads this folder's .gemini/settings.json and .env. Undo it with /permissions in gemini.",
                file.display()
            );
            let others = clients::other_servers(settings.unwrap_or("{}"), name);
            if !others.is_empty() {
                outln!(
                    "Trusting it also lets Gemini CLI start the other servers of .gemini/settings.json: {}.",
                    escape(&others.join(", "))
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
