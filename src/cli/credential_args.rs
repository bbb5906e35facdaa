//! The credential flags `vault add` and `vault edit` both read: a secret on stdin next to
//! `--passphrase-stdin` (`one_stdin`), an SSH key from `--key-file` (`key_from_file`) and the
//! `--allow-header` names (`allow_headers`). `--secret-from` has a file of its own (`secret_from.rs`).
use crate::credentials::{self, check_allow_header, load_private_key, Secret, SshAuth};
use crate::keys::read_terminal;

/// Refuses a secret and the passphrase both on stdin (only its first line is read, once).
pub(super) fn one_stdin(
    secret_stdin: bool,
    flag: &str,
    passphrase: super::backend::PassphraseArg,
) -> anyhow::Result<()> {
    if secret_stdin && passphrase.is_stdin() {
        return Err(credentials::CredentialError::Invalid {
            field: "--passphrase-stdin",
            reason: if flag == "--secret-stdin" {
                format!("{flag} and --passphrase-stdin both read the first line of stdin; give the secret with --secret-file FILE (or the passphrase with VAULT_PASSPHRASE_FILE)")
            } else {
                format!("{flag} and --passphrase-stdin both read the first line of stdin; give the passphrase with VAULT_PASSPHRASE_FILE (a 0600 file) instead")
            },
        }
        .into());
    }
    Ok(())
}

/// An SSH private key from `--key-file`, decrypted here if encrypted (its passphrase asked once,
/// on the terminal).
pub(super) fn key_from_file(f: &std::path::Path) -> anyhow::Result<(Secret, SshAuth)> {
    Ok(load_private_key(f, || {
        read_terminal(
            "key passphrase",
            &format!("Passphrase of {}: ", f.display()),
            "run this in a terminal, or give a copy of the key without a passphrase (`ssh-keygen -p -f COPY`)",
        )
        .map_err(|e| credentials::CredentialError::Invalid {
            field: "--key-file",
            reason: format!("the key is encrypted and {e}"),
        })
    })?)
}

/// `--allow-header` values, checked, lowercased, deduplicated and sorted.
pub(super) fn allow_headers(names: &[String]) -> anyhow::Result<Vec<String>> {
    let mut out = names
        .iter()
        .map(|n| check_allow_header(n))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}
