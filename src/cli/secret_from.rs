//! `--secret-from SOURCE` and `--remove-from-source`, shared by `vault add http` and
//! `vault edit`: the flags, the check against `--passphrase-stdin`, the one read, and the dotenv
//! line's removal once the agent has stored the credential.
use crate::credentials::Secret;
use crate::import::{Fingerprint, Source};

#[derive(Debug, Default, clap::Args)]
pub(super) struct SecretFrom {
    /// Read the secret once from where it is kept: env:FILE#KEY (a dotenv file), pass:ENTRY
    /// (its first line), bitwarden:FILE#ITEM[/FIELD] (an unencrypted JSON export) or
    /// keepassxc:FILE#ENTRY (through keepassxc-cli, which asks for the database password). Or,
    /// in team mode, openbao:MOUNT/PATH#FIELD: not read now but at every call, from the KV v2
    /// secret in the team's OpenBao (`vault openbao login`); no copy is stored.
    #[arg(
        long,
        value_name = "SOURCE",
        conflicts_with_all = ["secret_stdin", "secret_file"]
    )]
    secret_from: Option<String>,
    /// With env:FILE#KEY: once the vault has stored the credential, replace KEY's line in FILE by
    /// a comment naming the credential (the rest of the file unchanged).
    #[arg(long, requires = "secret_from")]
    remove_from_source: bool,
    /// The env: source and the value's fingerprint, kept from the read for the removal.
    #[arg(skip)]
    read: Option<Box<(Source, Fingerprint)>>,
}

impl SecretFrom {
    /// The source, checked before anything is read or asked: a source that takes stdin refuses
    /// `--passphrase-stdin`, and `--remove-from-source` wants an env: source.
    pub(super) fn check(&self, passphrase: super::backend::PassphraseArg) -> anyhow::Result<()> {
        let Some(s) = &self.secret_from else {
            return Ok(());
        };
        if s.starts_with(crate::credentials::openbao_ref::SCHEME) {
            crate::credentials::openbao_ref::parse(s)?;
            if self.remove_from_source {
                anyhow::bail!(crate::credentials::CredentialError::Invalid {
                    field: "--remove-from-source",
                    reason: "it rewrites a dotenv file, so it goes only with --secret-from env:FILE#KEY (not openbao:)".into(),
                });
            }
            return Ok(());
        }
        let source = Source::parse(s)?;
        if source.reads_stdin() && passphrase.is_stdin() {
            anyhow::bail!(crate::credentials::CredentialError::Invalid {
                field: "--passphrase-stdin",
                reason: "--secret-from keepassxc: lets keepassxc-cli read the database password from stdin, which --passphrase-stdin also reads; give the vault passphrase with VAULT_PASSPHRASE_FILE (a 0600 file) or on the terminal instead".into(),
            });
        }
        if self.remove_from_source && !matches!(source, Source::Env { .. }) {
            anyhow::bail!(crate::credentials::CredentialError::Invalid {
                field: "--remove-from-source",
                reason: format!("it rewrites a dotenv file, so it goes only with --secret-from env:FILE#KEY (not {})", source.label()),
            });
        }
        Ok(())
    }

    /// Whether `--secret-from` was given.
    pub(super) fn is_set(&self) -> bool {
        self.secret_from.is_some()
    }

    /// Team mode: the OpenBao reference, if `--secret-from openbao:…` was given.
    pub(super) fn reference(&self) -> anyhow::Result<Option<crate::wire::OpenBaoRef>> {
        match &self.secret_from {
            Some(s) if s.starts_with(crate::credentials::openbao_ref::SCHEME) => {
                Ok(Some(crate::credentials::openbao_ref::parse(s)?))
            }
            _ => Ok(None),
        }
    }

    /// The secret, read once from the source, if `--secret-from` was given (and is not an
    /// `openbao:` reference, which is never read here).
    pub(super) fn read(&mut self) -> anyhow::Result<Option<Secret>> {
        let Some(s) = &self.secret_from else {
            return Ok(None);
        };
        if s.starts_with(crate::credentials::openbao_ref::SCHEME) {
            return Ok(None);
        }
        let source = Source::parse(s)?;
        let mut value = source.read()?;
        if self.remove_from_source {
            self.read = Some(Box::new((source, Fingerprint::of(&value))));
        }
        // The value's capacity is its length: the move into the secret copies nothing.
        Ok(Some(Secret::new(std::mem::take(&mut *value))))
    }

    /// After the agent confirmed the stored credential: with `--remove-from-source`, KEY's line
    /// becomes a comment naming it. Returns what was done, for the command's output.
    pub(super) fn remove(&self, name: &str, profile: &str) -> anyhow::Result<Option<String>> {
        let Some((Source::Env { file, key }, fingerprint)) = self.read.as_deref() else {
            return Ok(None);
        };
        let comment =
            format!("# {key}: moved to agent-vault credential {name} (profile {profile})");
        crate::import::remove_key(file, key, fingerprint, &comment).map_err(|e| {
            anyhow::anyhow!(
                "credential {name} is stored, but {key} stays in {}: {e}",
                file.display()
            )
        })?;
        Ok(Some(format!(
            "Replaced {key} in {} with a comment naming {name}",
            file.display()
        )))
    }
}
