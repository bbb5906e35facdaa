//! `vault doctor`: paths and modes, the configuration, the vault agent (pid, socket, lifetime,
//! hardening), what a same-user process could still reach (`ptrace_scope`, a writable `vault`
//! binary, a key left in a keyring), whether `vault` on PATH is this program (HashiCorp Vault's
//! CLI has the name too), whether VAULT_PASSPHRASE_FILE is its owner's alone and outside any
//! project, and the store's versions and journal. Exits 0 when no check fails (warnings do not
//! fail). Prints no secret.
use crate::agent::client::Client;
use crate::agent::protocol::{Reply, Request, Role, StoreStatus};
use crate::cli::Exit;
use crate::keys::remember;
use crate::keys::PassphraseSource;
use crate::paths::{mode_of, VaultPaths};
use crate::vault::Vault;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// With a locked vault, the store's checks (schema, journal, pause switch) need the
    /// passphrase: from stdin with this flag, or VAULT_PASSPHRASE_FILE. Never asked on a terminal.
    #[command(flatten)]
    passphrase: super::backend::PassphraseArg,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Warn,
    Fail,
}

struct Check {
    name: String,
    level: Level,
    detail: String,
}

fn check(name: impl Into<String>, level: Level, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        level,
        detail: detail.into(),
    }
}

fn mode_check(name: &str, path: &std::path::Path, want: u32) -> Check {
    match mode_of(path) {
        Some(m) if m & 0o077 == 0 => {
            check(name, Level::Ok, format!("{} ({:o})", path.display(), m))
        }
        Some(m) => check(
            name,
            Level::Fail,
            format!(
                "{} is mode {m:o}; run `chmod {want:o} {}`",
                path.display(),
                path.display()
            ),
        ),
        None => check(
            name,
            Level::Fail,
            format!("{} is missing; run `vault init`", path.display()),
        ),
    }
}

/// VAULT_PASSPHRASE_FILE, when set: whoever reads it can approve with `vault approve --id …
/// --approve`, which signs with the passphrase alone (no PIN), so it must be its owner's only and
/// sit outside any project (a git work tree the AI client reads, commits and may push).
fn passphrase_file_check() -> Option<Check> {
    let PassphraseSource::File(path) = PassphraseSource::choose(false) else {
        return None;
    };
    let name = "passphrase file";
    let shown = path.display();
    let exposure = match crate::keys::file_exposure(&path) {
        Ok(e) => e,
        Err(e) => {
            return Some(check(name, Level::Warn, format!("VAULT_PASSPHRASE_FILE names {shown}, which cannot be read ({e}); commands given no passphrase will fail")));
        }
    };
    let mut worries = Vec::new();
    if let Some(mode) = exposure.open_mode {
        worries.push(format!(
            "it is mode {mode:o}: others than you may read it; `chmod 600 {shown}`"
        ));
    }
    if exposure.other_owner {
        worries.push("it belongs to another user, who can read or replace it".to_owned());
    }
    if let Some(root) = &exposure.work_tree {
        worries.push(format!("it sits in the git work tree {}: a project's files are what an AI client reads, and what gets committed and pushed; move it out (e.g. ~/.config/agent-vault/passphrase, mode 600)", root.display()));
    }
    let what = "whoever reads it can approve any waiting action as you, without the PIN (`vault approve --id … --approve` signs with the passphrase alone)";
    Some(if worries.is_empty() {
        check(
            name,
            Level::Ok,
            format!("{shown} (yours alone, outside any git work tree); {what}, so keep it so"),
        )
    } else {
        check(
            name,
            Level::Warn,
            format!("{shown}: {}. {what}", worries.join("; ")),
        )
    })
}

fn binary_check() -> Check {
    use std::os::unix::fs::MetadataExt;
    let Ok(exe) = std::env::current_exe() else {
        return check("vault binary", Level::Warn, "cannot tell where it is");
    };
    let Ok(meta) = std::fs::metadata(&exe) else {
        return check("vault binary", Level::Warn, exe.display().to_string());
    };
    let mine = meta.uid() == rustix::process::getuid().as_raw();
    let writable = (mine && meta.mode() & 0o200 != 0) || meta.mode() & 0o022 != 0;
    if writable {
        check("vault binary", Level::Warn, format!("{} is writable by you: a process of yours could replace it and see your next passphrase; install it root-owned (e.g. /usr/local/bin) for the strongest setup", exe.display()))
    } else {
        check(
            "vault binary",
            Level::Ok,
            format!("{} (not writable by you)", exe.display()),
        )
    }
}

/// Whether `vault` and `agent-vault` on PATH are this program: HashiCorp Vault's CLI is also
/// `vault`, and a person who has both types one and gets the other.
fn path_check() -> Check {
    let name = "vault on PATH";
    let this = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    let on_path = |program: &str| {
        let found = super::setup::on_path(program)?;
        let same = std::fs::canonicalize(&found).ok() == this && this.is_some();
        Some((found, same))
    };
    let this_shown = this
        .as_deref()
        .map_or("?".to_owned(), |p| p.display().to_string());
    match (on_path("vault"), on_path(super::setup::NAME)) {
        (Some((_, true)), _) => check(name, Level::Ok, "`vault` on your PATH is this program"),
        (Some((other, false)), alias) => {
            let instead = match alias {
                Some((_, true)) => "run this one as `agent-vault` (on your PATH)".to_owned(),
                _ => format!(
                    "run this one as `agent-vault`: {} (the .deb and Homebrew packages install it)",
                    super::setup::link_advice()
                ),
            };
            check(
                name,
                Level::Warn,
                format!(
                    "`vault` on your PATH is {}, not this program ({this_shown}); it may be HashiCorp Vault's CLI, which has the same name: {instead}",
                    other.display()
                ),
            )
        }
        (None, Some((_, true))) => check(
            name,
            Level::Ok,
            "`vault` is not on your PATH; `agent-vault` is this program",
        ),
        (None, _) => check(
            name,
            Level::Ok,
            format!("neither `vault` nor `agent-vault` on your PATH is this program ({this_shown}): run it by path"),
        ),
    }
}

fn agent_checks(
    paths: &VaultPaths,
    source: PassphraseSource,
    checks: &mut Vec<Check>,
) -> anyhow::Result<()> {
    use crate::agent::holder::{holder, Holder};
    let connected = Client::connect(paths, Role::Cli);
    let mut client = match (connected, holder(paths)) {
        (Ok(Some(c)), _) => c,
        (Ok(None), Holder::Nobody) => {
            checks.push(check(
                "vault agent",
                Level::Ok,
                "not running: the vault is locked (vault unlock to serve tools)",
            ));
            return locked_store_checks(paths, source, checks);
        }
        // An agent holds the vault, but its socket path does not lead to it.
        (Ok(None), held) => {
            let pid = match held {
                Holder::Pid(p) => format!("pid {p}"),
                _ => "its pid unknown here".into(),
            };
            checks.push(check(
                "vault agent",
                Level::Fail,
                format!("running ({pid}), but nothing answers on its socket path: something moved or removed the socket. `vault lock`, then `vault unlock`, restores it"),
            ));
            return Ok(());
        }
        (Err(e), _) => {
            checks.push(check("vault agent", Level::Fail, e.to_string()));
            return Ok(());
        }
    };
    for w in &client.warnings {
        checks.push(check("agent: socket", Level::Fail, w.clone()));
    }
    let status = match client.call(Request::Status)? {
        Reply::Status(s) => s,
        other => return Err(super::backend::unexpected(other)),
    };
    checks.push(check(
        "vault agent",
        Level::Ok,
        format!(
            "pid {}, socket {}, locks at {}, idle limit {} s, {} connection(s)",
            status.pid,
            status.socket,
            super::out::local_time(&status.locks_at),
            status.idle_seconds,
            status.connections
        ),
    ));
    let h = status.hardening;
    let level = |b: bool| if b { Level::Ok } else { Level::Fail };
    checks.push(check(
        "agent: not dumpable",
        level(h.undumpable),
        if h.undumpable {
            "same-user processes cannot ptrace it or read its memory"
        } else {
            "a same-user process could read its memory; restart it with `vault unlock`"
        },
    ));
    checks.push(check(
        "agent: core dumps",
        level(h.no_core),
        if h.no_core { "off" } else { "allowed" },
    ));
    checks.push(check(
        "agent: key memory",
        if h.key_locked { Level::Ok } else { Level::Warn },
        if h.key_locked {
            "the key's page is pinned in RAM with mlock: never written to swap"
        } else {
            "the key's page could not be pinned in RAM (mlock refused: raise RLIMIT_MEMLOCK, `ulimit -l`); it may be written to swap"
        },
    ));
    if let Some(s) = status.store {
        store_checks(&s, checks);
    }
    // Team mode: whether the agent's last call to OpenBao worked.
    if let Reply::OpenBao(v) = client.call(Request::OpenBaoStatus)? {
        if let Some(l) = &v.login {
            checks.push(match &v.last_error {
                None => check(
                    "OpenBao",
                    Level::Ok,
                    format!(
                        "{}: {}",
                        crate::term::escape(&l.address),
                        v.token.as_deref().unwrap_or("")
                    ),
                ),
                Some(e) => check(
                    "OpenBao",
                    Level::Fail,
                    format!(
                        "{}: the last call failed: {}",
                        crate::term::escape(&l.address),
                        crate::term::escape(e)
                    ),
                ),
            });
        }
    }
    Ok(())
}

/// A locked vault's store, opened here when the passphrase was given without a terminal (a
/// doctor never prompts); else the checks say how to run them.
fn locked_store_checks(
    paths: &VaultPaths,
    source: PassphraseSource,
    checks: &mut Vec<Check>,
) -> anyhow::Result<()> {
    if source == PassphraseSource::Terminal {
        checks.push(check(
            "store",
            Level::Ok,
            "not checked while locked: `vault doctor --passphrase-stdin` (or VAULT_PASSPHRASE_FILE, or after `vault unlock`) checks the schema, journal and pause switch",
        ));
        return Ok(());
    }
    match super::backend::Backend::open(paths, source).and_then(|mut b| b.store_status()) {
        Ok(s) => store_checks(&s, checks),
        Err(e) => checks.push(check("store", Level::Fail, format!("{e:#}"))),
    }
    Ok(())
}

/// The store's versions, journal, pause switch and queue.
fn store_checks(s: &StoreStatus, checks: &mut Vec<Check>) {
    let level = |b: bool| if b { Level::Ok } else { Level::Fail };
    checks.push(check(
        "schema",
        level(s.schema_version == crate::store::LATEST_SCHEMA),
        format!(
            "version {} (this binary writes {})",
            s.schema_version,
            crate::store::LATEST_SCHEMA
        ),
    ));
    checks.push(check("sqlcipher", Level::Ok, s.cipher_version.clone()));
    checks.push(check(
        "journal",
        level(s.journal_rows == s.journal_head),
        format!("{} rows, head seq {}", s.journal_rows, s.journal_head),
    ));
    checks.push(match &s.paused {
        None => check("pause switch", Level::Ok, "off"),
        Some(why) => check(
            "pause switch",
            Level::Fail,
            format!("paused ({}); `vault resume` lifts it", why.escape_debug()),
        ),
    });
    checks.push(check(
        "pending actions",
        Level::Ok,
        format!("{} waiting; `vault approve` decides them", s.pending),
    ));
    checks.push(if s.pin_set {
        check("approval PIN", Level::Ok, "set: every approval on a card takes it")
    } else {
        check(
            "approval PIN",
            Level::Warn,
            "not set: no card can be approved until it is; `vault pin` (or the first `vault approve`) sets it",
        )
    });
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut checks = vec![
        mode_check("vault dir", paths.dir(), 0o700),
        mode_check("vault.db", &paths.db(), 0o600),
        mode_check("vault.key.age", &paths.key_file(), 0o600),
        mode_check("vault.id", &paths.id_file(), 0o600),
    ];
    match crate::config::Config::load(&paths) {
        Ok(_) if paths.config().exists() => checks.push(check(
            "config.toml",
            Level::Ok,
            paths.config().display().to_string(),
        )),
        Ok(_) => checks.push(check(
            "config.toml",
            Level::Ok,
            "absent: the defaults apply",
        )),
        Err(e) => checks.push(check("config.toml", Level::Fail, e.to_string())),
    }
    checks.push(binary_check());
    checks.extend(passphrase_file_check());
    checks.push(path_check());
    let exposed = super::exposure::of_this_terminal();
    checks.push(if exposed.is_empty() {
        check(
            "this terminal",
            Level::Ok,
            "no tmux, screen or X11 here, and ptrace is restricted: other programs of yours cannot type into it",
        )
    } else {
        let names: Vec<&str> = exposed.iter().map(|e| e.what).collect();
        let how: Vec<&str> = exposed.iter().map(|e| e.how).collect();
        check(
            "this terminal",
            Level::Warn,
            format!(
                "reachable by other programs of yours ({}): {}. {}",
                names.join(", "),
                how.join("; "),
                super::exposure::WHAT_HOLDS
            ),
        )
    });
    #[cfg(target_os = "linux")]
    {
        let support = crate::contain::Support::probe();
        checks.push(match (&support.userns, support.full()) {
            (Err(why), _) => check(
                "vault run (containment)",
                Level::Warn,
                format!(
                    "unavailable: no unprivileged user namespaces ({why}). {}",
                    crate::contain::userns_fix()
                ),
            ),
            (Ok(()), false) => check(
                "vault run (containment)",
                Level::Warn,
                format!(
                    "only weaker: Landlock ABI {} (6 needed for its scopes; `--allow-weaker` starts without them, not marked contained)",
                    support.landlock_abi
                ),
            ),
            (Ok(()), true) => check(
                "vault run (containment)",
                Level::Ok,
                format!("available: {}", support.describe(true)),
            ),
        });
    }
    checks.push(match crate::sys::ptrace_scope() {
        // The same fact the terminal check warns of: said the same way here.
        Some(0) => check("ptrace_scope", Level::Warn, "0: any process of yours may trace another of yours (your terminal and shell among them; the agent and vault approve are not dumpable); `sudo sysctl kernel.yama.ptrace_scope=1` limits it to a process's own children"),
        Some(n) => check("ptrace_scope", Level::Ok, format!("{n}: tracing is restricted beyond same-user")),
        None => check("ptrace_scope", Level::Warn, "no yama setting here: any process of yours may trace another of yours (the agent and vault approve are not dumpable); a kernel with Yama (kernel.yama.ptrace_scope=1) limits it"),
    });
    if let Ok(vault_id) = Vault::id_of(&paths) {
        checks.push(match (remember::probe(), remember::recall(&vault_id)) {
            (Err(e), _) => check("OS keyring (--remember)", Level::Ok, format!("not reachable ({e}); nothing is kept there")),
            (Ok(()), Ok(Some(_))) => check("OS keyring (--remember)", Level::Warn, format!("the {} holds this vault's key: any process of yours that can reach it can read it; `vault lock --forget` removes it", remember::keyring_name())),
            (Ok(()), _) => check("OS keyring (--remember)", Level::Ok, "holds no key for this vault"),
        });
        agent_checks(&paths, args.passphrase.source(), &mut checks)?;
    }
    let all_ok = checks.iter().all(|c| c.level != Level::Fail);
    if args.json {
        let list: Vec<Value> = checks
            .iter()
            .map(|c| json!({"check": c.name, "ok": c.level != Level::Fail, "warning": c.level == Level::Warn, "detail": c.detail}))
            .collect();
        super::print_json(&json!({"ok": all_ok, "vault_dir": paths.dir(), "checks": list}))?;
    } else {
        for c in &checks {
            let tag = match c.level {
                Level::Ok => "ok  ",
                Level::Warn => "warn",
                Level::Fail => "FAIL",
            };
            outln!("{tag} {:<28} {}", c.name, c.detail);
        }
    }
    Ok(if all_ok { Exit::Ok } else { Exit::Failure })
}
