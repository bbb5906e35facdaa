//! `vault doctor`: is the keyring reachable, where did the key come from, are paths and modes
//! right, which schema and SQLCipher versions. Exits 0 when every check passes. Prints no secret.
use crate::keys::KeyCache;
use crate::paths::{mode_of, VaultPaths};
use crate::vault::Vault;
use crate::Exit;
use serde_json::{json, Value};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

struct Check {
    name: String,
    ok: bool,
    detail: String,
}

fn check(name: impl Into<String>, ok: bool, detail: impl Into<String>) -> Check {
    Check {
        name: name.into(),
        ok,
        detail: detail.into(),
    }
}

fn mode_check(name: &str, path: &std::path::Path, want: u32) -> Check {
    match mode_of(path) {
        Some(m) if m & 0o077 == 0 => check(name, true, format!("{} ({:o})", path.display(), m)),
        Some(m) => check(
            name,
            false,
            format!(
                "{} is mode {:o}; run `chmod {:o} {}`",
                path.display(),
                m,
                want,
                path.display()
            ),
        ),
        None => check(
            name,
            false,
            format!("{} is missing; run `vault init`", path.display()),
        ),
    }
}

pub fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    let mut checks = vec![
        mode_check("vault dir", paths.dir(), 0o700),
        mode_check("vault.db", &paths.db(), 0o600),
        mode_check("vault.key.age", &paths.key_file(), 0o600),
        mode_check("vault.id", &paths.id_file(), 0o600),
    ];
    match crate::config::Config::load(&paths) {
        Ok(_) if paths.config().exists() => checks.push(check(
            "config.toml",
            true,
            paths.config().display().to_string(),
        )),
        Ok(_) => checks.push(check("config.toml", true, "absent: the defaults apply")),
        Err(e) => checks.push(check("config.toml", false, e.to_string())),
    }
    let probes = KeyCache::probe();
    let any_keyring = probes.iter().any(|(_, r)| r.is_ok());
    for (name, result) in &probes {
        let detail = match result {
            Ok(()) => "reachable".to_owned(),
            Err(e) => format!("not reachable ({e})"),
        };
        // One reachable keyring is enough.
        checks.push(check(
            format!("keyring: {name}"),
            result.is_ok() || any_keyring,
            detail,
        ));
    }
    match Vault::open(paths.clone()) {
        Ok(v) => {
            checks.push(check("key", true, format!("from the {}", v.key_source)));
            let schema = v.store.schema_version()?;
            checks.push(check(
                "schema",
                schema == crate::store::LATEST_SCHEMA,
                format!(
                    "version {schema} (this binary writes {})",
                    crate::store::LATEST_SCHEMA
                ),
            ));
            checks.push(check("sqlcipher", true, v.store.cipher_version()?));
            let (rows, head): (i64, i64) = v.store.conn().query_row(
                "SELECT count(*), coalesce(max(seq), 0) FROM audit",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            checks.push(check(
                "journal",
                rows == head,
                format!("{rows} rows, head seq {head}"),
            ));
            match crate::approvals::paused(v.store.conn())? {
                None => checks.push(check("pause switch", true, "off")),
                Some(why) => checks.push(check(
                    "pause switch",
                    false,
                    format!("paused ({why}); `vault resume` lifts it"),
                )),
            }
            let waiting = crate::approvals::list_pending(&v.store)
                .map(|p| p.len())
                .unwrap_or(0);
            checks.push(check(
                "pending actions",
                true,
                format!("{waiting} waiting; `vault approve` decides them"),
            ));
        }
        Err(e) => checks.push(check("key", false, e.to_string())),
    }
    let all_ok = checks.iter().all(|c| c.ok);
    if args.json {
        let list: Vec<Value> = checks
            .iter()
            .map(|c| json!({"check": c.name, "ok": c.ok, "detail": c.detail}))
            .collect();
        super::print_json(&json!({"ok": all_ok, "vault_dir": paths.dir(), "checks": list}));
    } else {
        for c in &checks {
            println!(
                "{} {:<40} {}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                c.detail
            );
        }
    }
    Ok(if all_ok { Exit::Ok } else { Exit::Failure })
}
