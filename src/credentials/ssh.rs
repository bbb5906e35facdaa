//! SSH credentials: host, port, user, the pinned host key, the private key or password, and an
//! optional command allowlist. Also reading an OpenSSH key file and fetching a host key to pin.
use super::{invalid, CredentialError, Secret};
use russh::keys::{HashAlg, PrivateKey};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zeroize::Zeroizing;

pub use crate::wire::SshTarget;

pub use crate::wire::SshAuth;

impl SshTarget {
    pub fn summary(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let auth = match &self.auth {
            SshAuth::Key { algorithm, .. } => format!("key {algorithm}"),
            SshAuth::Password => "password".into(),
            SshAuth::OpenbaoCert { mount, role } => {
                format!("certificate from openbao:{mount}/sign/{role}")
            }
        };
        format!("ssh://{}@{}:{} ({auth})", self.user, host, self.port)
    }

    pub fn check(&self) -> Result<(), CredentialError> {
        check_user(&self.user)?;
        check_host_key(&self.host_key)?;
        for p in &self.allow_commands {
            if p.trim().is_empty() || p.chars().any(char::is_control) {
                return Err(invalid(
                    "--allow-command",
                    "a pattern must be non-empty, without control characters",
                ));
            }
            // A pattern is split into shell words as commands are (src/policy/ssh/words.rs).
            if let Err(e) = super::words::check_pattern(p) {
                return Err(invalid(
                    "--allow-command",
                    format!("{p:?}: {e}; a pattern is plain words (letters, digits and `_-./:,+=@%`), the wildcards `*` and `?`, and operators such as `&&`"),
                ));
            }
        }
        Ok(())
    }
}

fn check_user(user: &str) -> Result<(), CredentialError> {
    let ok = !user.is_empty()
        && user.len() <= 64
        && user
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "--user",
            format!("{user:?} must be 1-64 letters, digits, '.', '_' or '-'"),
        ))
    }
}

/// `SHA256:` followed by 43 characters of unpadded base64, as `ssh-keygen -l` prints it.
pub fn check_host_key(pin: &str) -> Result<(), CredentialError> {
    let ok = pin.strip_prefix("SHA256:").is_some_and(|b| {
        b.len() == 43
            && b.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
    });
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "--host-key",
            "expected SHA256:<43 base64 characters>, as `ssh-keyscan HOST | ssh-keygen -lf -` prints it",
        ))
    }
}

/// Reads an OpenSSH (or PuTTY) private key file. An encrypted key is decrypted here with
/// `passphrase()` (asked only when needed) and stored decrypted inside the encrypted vault.
/// Returns the key re-encoded as an unencrypted OpenSSH key, and the `SshAuth` describing it.
pub fn load_private_key(
    path: &Path,
    passphrase: impl FnOnce() -> Result<Zeroizing<String>, CredentialError>,
) -> Result<(Secret, SshAuth), CredentialError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| invalid("--key-file", format!("cannot read {}: {e}", path.display())))?;
    if meta.len() > 64 * 1024 {
        return Err(invalid(
            "--key-file",
            "the file is larger than 64 KiB; is it a private key?",
        ));
    }
    let text = Zeroizing::new(
        std::fs::read_to_string(path)
            .map_err(|e| invalid("--key-file", format!("cannot read {}: {e}", path.display())))?,
    );
    let key: PrivateKey = match russh::keys::decode_secret_key(&text, None) {
        Ok(k) => k,
        Err(russh::keys::Error::KeyIsEncrypted) => {
            let pass = passphrase()?;
            russh::keys::decode_secret_key(&text, Some(pass.as_str())).map_err(|_| {
                invalid(
                    "--key-file",
                    "the key's passphrase is wrong (or the key is damaged)",
                )
            })?
        }
        // One ECDSA key in about 256 has a private number a byte shorter than its curve's size,
        // which ssh-key refuses: it is read again with the number padded.
        Err(e) => match padded_ecdsa(&text).and_then(|b| PrivateKey::from_bytes(&b).ok()) {
            Some(k) => k,
            None => {
                return Err(invalid(
                    "--key-file",
                    format!("not a private key this vault can use: {e}"),
                ))
            }
        },
    };
    let key = if key.is_encrypted() {
        return Err(invalid(
            "--key-file",
            "the key is still encrypted after decryption",
        ));
    } else {
        key
    };
    let openssh = key
        .to_openssh(russh::keys::ssh_key::LineEnding::LF)
        .map_err(|e| invalid("--key-file", format!("cannot re-encode the key: {e}")))?;
    let auth = SshAuth::Key {
        algorithm: key.algorithm().to_string(),
        fingerprint: key.public_key().fingerprint(HashAlg::Sha256).to_string(),
    };
    Ok((Secret::new(openssh.as_bytes().to_vec()), auth))
}

/// A key login's secret must be the unencrypted OpenSSH key that `auth` describes (what
/// `load_private_key` makes): a first line, a damaged file or another key is refused when the
/// credential is added or changed, not at the first `ssh_exec`.
pub(crate) fn check_key_secret(auth: &SshAuth, secret: &Secret) -> Result<(), CredentialError> {
    let SshAuth::Key {
        algorithm,
        fingerprint,
    } = auth
    else {
        return Ok(());
    };
    let refused = || {
        invalid(
            "--key-file",
            "the stored secret is not the private key it names; give the key file with --key-file FILE",
        )
    };
    let text = std::str::from_utf8(secret.expose()).map_err(|_| refused())?;
    let key = russh::keys::decode_secret_key(text, None).map_err(|_| refused())?;
    let same = key.algorithm().to_string() == *algorithm
        && key.public_key().fingerprint(HashAlg::Sha256).to_string() == *fingerprint;
    if same {
        Ok(())
    } else {
        Err(refused())
    }
}

/// Errors fetching a host key.
#[derive(Debug, thiserror::Error)]
pub enum HostKeyError {
    #[error("cannot reach {host}:{port} to read its host key: {reason}; check the address, or pin the key with --host-key SHA256:…")]
    Unreachable {
        host: String,
        port: u16,
        reason: String,
    },
}

struct Capture(Arc<Mutex<Option<String>>>);

impl russh::client::Handler for Capture {
    type Error = russh::Error;
    async fn check_server_key(
        &mut self,
        key: &russh::keys::PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        if let russh::keys::PublicKeyOrCertificate::PublicKey { key, .. } = key {
            if let Ok(mut slot) = self.0.lock() {
                *slot = Some(key.fingerprint(HashAlg::Sha256).to_string());
            }
        }
        // Never go further than reading the key: no authentication is attempted.
        Ok(false)
    }
}

/// Connects to an SSH server only far enough to read its host key; returns `SHA256:…`.
pub fn fetch_host_key(host: &str, port: u16, timeout: Duration) -> Result<String, HostKeyError> {
    let unreachable = |reason: String| HostKeyError::Unreachable {
        host: host.to_owned(),
        port,
        reason,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unreachable(e.to_string()))?;
    let slot = Arc::new(Mutex::new(None));
    let config = Arc::new(russh::client::Config::default());
    let addr = (host.to_owned(), port);
    let capture = Capture(slot.clone());
    let outcome = rt.block_on(async move {
        tokio::time::timeout(timeout, russh::client::connect(config, addr, capture)).await
    });
    let found = slot.lock().ok().and_then(|s| s.clone());
    match (found, outcome) {
        (Some(fp), _) => Ok(fp),
        (None, Err(_)) => Err(unreachable(format!(
            "no answer within {}s",
            timeout.as_secs()
        ))),
        (None, Ok(Err(e))) => Err(unreachable(e.to_string())),
        (None, Ok(Ok(_))) => Err(unreachable("the server sent no host key".into())),
    }
}

/// An unencrypted OpenSSH ECDSA private key (`openssh-key-v1`) whose private scalar is shorter
/// than its curve's size, as OpenSSH writes one with leading zero bytes (an `mpint` drops them),
/// re-encoded with the scalar padded to that size; `None` for any other key. ssh-key 0.7 refuses
/// a scalar under 32 bytes ("SshKey: length invalid"), so without this one P-256 key in about
/// 256 could not be added.
fn padded_ecdsa(text: &str) -> Option<Zeroizing<Vec<u8>>> {
    use base64::Engine;
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::trim)
        .collect();
    let blob = Zeroizing::new(
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .ok()?,
    );
    let magic = b"openssh-key-v1\0";
    let mut at = blob.strip_prefix(magic)?;
    let field = |from: &mut &[u8]| -> Option<Vec<u8>> {
        let n = u32::from_be_bytes(from.get(..4)?.try_into().ok()?) as usize;
        let v = from.get(4..4 + n)?.to_vec();
        *from = &from[4 + n..];
        Some(v)
    };
    let (cipher, kdf, kdf_options) = (field(&mut at)?, field(&mut at)?, field(&mut at)?);
    if cipher != b"none" || at.get(..4)? != [0, 0, 0, 1] {
        return None;
    }
    at = &at[4..];
    let public = field(&mut at)?;
    let private = Zeroizing::new(field(&mut at)?);
    let mut p: &[u8] = &private;
    let checks = p.get(..8)?.to_vec();
    p = &p[8..];
    let kind = field(&mut p)?;
    let size = match kind.as_slice() {
        b"ecdsa-sha2-nistp256" => 32,
        b"ecdsa-sha2-nistp384" => 48,
        b"ecdsa-sha2-nistp521" => 66,
        _ => return None,
    };
    let (curve, point) = (field(&mut p)?, field(&mut p)?);
    let scalar = Zeroizing::new(field(&mut p)?);
    let comment = field(&mut p)?;
    if scalar.is_empty() || scalar.len() >= size {
        return None;
    }
    let put = |out: &mut Vec<u8>, v: &[u8]| {
        out.extend_from_slice(&(v.len() as u32).to_be_bytes());
        out.extend_from_slice(v);
    };
    let mut padded = Zeroizing::new(vec![0u8; size - scalar.len()]);
    padded.extend_from_slice(&scalar);
    let mut section = Zeroizing::new(checks);
    for v in [&kind[..], &curve, &point, &padded, &comment] {
        put(&mut section, v);
    }
    let mut pad = 1u8;
    while section.len() % 8 != 0 {
        section.push(pad);
        pad += 1;
    }
    let mut out = Zeroizing::new(magic.to_vec());
    for v in [&cipher[..], &kdf, &kdf_options] {
        put(&mut out, v);
    }
    out.extend_from_slice(&[0, 0, 0, 1]);
    put(&mut out, &public);
    put(&mut out, &section);
    Some(out)
}

#[cfg(test)]
mod short_scalar_tests {
    /// A P-256 key `ssh-keygen` made whose private number is 31 bytes long (found among 1,161
    /// fresh keys; a throwaway, used nowhere): ssh-key alone refuses it, the vault reads it.
    #[test]
    fn an_ecdsa_key_with_a_short_private_number_is_read() {
        let text = include_str!("testdata/ecdsa_p256_short_scalar");
        assert!(russh::keys::decode_secret_key(text, None).is_err());
        let blob = super::padded_ecdsa(text).expect("a short scalar is padded");
        let key = russh::keys::PrivateKey::from_bytes(&blob).expect("the padded key reads");
        assert_eq!(key.algorithm().to_string(), "ecdsa-sha2-nistp256");
        // The same public key as the file's own.
        let original = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/src/credentials/testdata/ecdsa_p256_short_scalar.pub"
        ))
        .unwrap();
        let ours = key.public_key().to_openssh().unwrap();
        assert_eq!(
            original.split_whitespace().nth(1),
            ours.split_whitespace().nth(1)
        );
    }
}
