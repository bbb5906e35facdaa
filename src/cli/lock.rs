//! `vault lock`: remove the master key from every keyring.
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;

pub fn run(paths: VaultPaths) -> anyhow::Result<Exit> {
    let removed = Vault::lock(paths)?;
    if removed.is_empty() {
        println!("Already locked: no keyring held the key.");
    } else {
        let names: Vec<String> = removed.iter().map(ToString::to_string).collect();
        println!(
            "Locked: removed the key from the {}. `vault unlock` opens it again.",
            names.join(" and the ")
        );
    }
    Ok(Exit::Ok)
}
