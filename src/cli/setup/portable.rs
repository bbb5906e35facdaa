//! What `vault setup --scope project` tells the person: the file is meant to be committed, what
//! each teammate needs for it to work, and what on this machine would keep it from working here
//! (`agent-vault` missing from PATH, or another program of that name; a vault that is not at
//! the default place, which the entry does not name).
use super::check::on_path;
use super::NAME;
use crate::paths::VaultPaths;
use std::path::Path;

/// Prints the project scope's lines after the file is written.
pub(super) fn tell(file: &Path, paths: &VaultPaths) -> anyhow::Result<()> {
    outln!(
        "{} is meant to be committed: it names the command `{NAME}` and no path of this machine. Each teammate needs `{NAME}` on their PATH (the .deb and Homebrew packages install it; after `cargo install`: `ln -s vault ~/.cargo/bin/{NAME}`), their own vault at its default place (`vault init`), and the credentials this project uses, added under the same names (`vault add …`).",
        file.display()
    );
    let this = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    match on_path(NAME) {
        None => outln!(
            "`{NAME}` is not on your PATH here, so the client cannot start this entry on this machine: {}, or install the package.",
            super::check::link_advice()
        ),
        Some(found) => {
            let same = std::fs::canonicalize(&found).ok() == this;
            if !same {
                outln!(
                    "`{NAME}` on your PATH is {}, not this program ({}): the client starts that one.",
                    found.display(),
                    this.as_deref().map_or("?".into(), |p| p.display().to_string())
                );
            }
        }
    }
    let default = VaultPaths::default_dir();
    let here = std::fs::canonicalize(paths.dir()).unwrap_or_else(|_| paths.dir().to_owned());
    let at_default = default
        .as_ref()
        .is_some_and(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()) == here);
    if !at_default {
        outln!(
            "Your vault is at {}, not at the default place ({}), and the entry names no vault: start the client with VAULT_DIR={} in its environment, or use `--scope user`, whose entry names it.",
            paths.dir().display(),
            default.map_or("none here".into(), |d| d.display().to_string()),
            paths.dir().display()
        );
    }
    Ok(())
}
