//! The approver's public key as a person keeps it elsewhere: 64 hex digits, or an OpenSSH line
//! (`ssh-ed25519 AAAA… agent-vault-approver`, the format every ssh tool reads and prints), and
//! read back from either, or from a file holding one (`vault verify --approver-key`). A key that
//! anyone could sign for (a small-order point) is refused.
use base64::Engine;
use ed25519_dalek::VerifyingKey;
use std::path::PathBuf;

/// The comment of the OpenSSH line.
pub const SSH_COMMENT: &str = "agent-vault-approver";

const SSH_TYPE: &str = "ssh-ed25519";

/// A file given as a key is read up to this size (a key line is under 120 bytes).
const MAX_FILE: u64 = 64 << 10;

/// Why a text is not an approver public key.
#[derive(Debug, thiserror::Error)]
pub enum PublicKeyError {
    #[error("{0:?} is neither 64 hex digits, an `ssh-ed25519 AAAA…` line, nor a file holding one; give the key `vault approver show-key` prints (or the file you kept it in)")]
    NotAKey(String),
    #[error("cannot read the approver key from {path}: {source}; check the path")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no approver key: no line is 64 hex digits or an `ssh-ed25519 AAAA…` line; keep the key `vault approver show-key` prints in it")]
    NoKeyInFile { path: PathBuf },
    #[error("the ssh-ed25519 line does not decode ({0}); copy the whole line `vault approver show-key` prints")]
    BadSshLine(&'static str),
    #[error("that is not an ed25519 public key (not a point of the curve, or one anyone can sign for); give the key `vault approver show-key` prints")]
    NotAPoint,
}

/// The key as 64 lowercase hex digits.
pub fn to_hex(key: &VerifyingKey) -> String {
    hex::encode(key.as_bytes())
}

/// The key as an OpenSSH public key line: `ssh-ed25519 <base64 of the wire form> agent-vault-approver`.
pub fn to_ssh_line(key: &VerifyingKey) -> String {
    let mut wire = Vec::with_capacity(51);
    for part in [SSH_TYPE.as_bytes(), key.as_bytes()] {
        wire.extend_from_slice(&(part.len() as u32).to_be_bytes());
        wire.extend_from_slice(part);
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(wire);
    format!("{SSH_TYPE} {b64} {SSH_COMMENT}")
}

/// A key written as 64 hex digits or as an `ssh-ed25519` line (any comment); `None` when the text
/// is neither shape, an error when it has a shape but is not a usable key.
fn parse_text(text: &str) -> Option<Result<VerifyingKey, PublicKeyError>> {
    let text = text.trim();
    if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(text, &mut bytes).ok()?;
        return Some(point(bytes));
    }
    let rest = text.strip_prefix(SSH_TYPE)?.strip_prefix([' ', '\t'])?;
    let b64 = rest.split_whitespace().next()?;
    Some(ssh_blob(b64).and_then(point))
}

fn ssh_blob(b64: &str) -> Result<[u8; 32], PublicKeyError> {
    let wire = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|_| PublicKeyError::BadSshLine("not base64"))?;
    let mut rest = wire.as_slice();
    if field(&mut rest)? != SSH_TYPE.as_bytes() {
        return Err(PublicKeyError::BadSshLine(
            "the key inside is not ssh-ed25519",
        ));
    }
    let key: [u8; 32] = field(&mut rest)?
        .try_into()
        .map_err(|_| PublicKeyError::BadSshLine("the key inside is not 32 bytes"))?;
    if !rest.is_empty() {
        return Err(PublicKeyError::BadSshLine("bytes after the key"));
    }
    Ok(key)
}

/// The next field of an SSH wire blob (a big-endian u32 length, then that many bytes).
fn field<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], PublicKeyError> {
    let all: &'a [u8] = rest;
    let (len, tail) = all
        .split_first_chunk::<4>()
        .ok_or(PublicKeyError::BadSshLine("cut short"))?;
    let len = u32::from_be_bytes(*len) as usize;
    let (value, tail) = tail
        .split_at_checked(len)
        .ok_or(PublicKeyError::BadSshLine("cut short"))?;
    *rest = tail;
    Ok(value)
}

fn point(bytes: [u8; 32]) -> Result<VerifyingKey, PublicKeyError> {
    VerifyingKey::from_bytes(&bytes)
        .ok()
        .filter(|k| !k.is_weak())
        .ok_or(PublicKeyError::NotAPoint)
}

/// An approver public key given on the command line: 64 hex digits, an `ssh-ed25519` line, or
/// the path of a file whose first line of either shape is the key (other lines, blank ones and
/// `#` comments, are passed over).
pub fn read(arg: &str) -> Result<VerifyingKey, PublicKeyError> {
    if let Some(key) = parse_text(arg) {
        return key;
    }
    let path = PathBuf::from(arg);
    if !path.is_file() {
        return Err(PublicKeyError::NotAKey(arg.chars().take(80).collect()));
    }
    let read_err = |source| PublicKeyError::Read {
        path: path.clone(),
        source,
    };
    let file = std::fs::File::open(&path).map_err(read_err)?;
    let mut text = String::new();
    use std::io::Read;
    file.take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(read_err)?;
    text.lines()
        .find_map(parse_text)
        .unwrap_or(Err(PublicKeyError::NoKeyInFile { path }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::ApproverKey;

    #[test]
    fn hex_and_ssh_line_read_back_as_the_key_and_as_a_file() {
        let key = ApproverKey::generate().public();
        let (hex, line) = (to_hex(&key), to_ssh_line(&key));
        assert!(
            line.starts_with("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"),
            "{line}"
        );
        assert!(line.ends_with(" agent-vault-approver"));
        for text in [
            hex.clone(),
            hex.to_uppercase(),
            format!("  {hex}\n"),
            line.clone(),
            line.replace(" agent-vault-approver", ""),
            line.replace("agent-vault-approver", "someone@laptop"),
        ] {
            assert_eq!(read(&text).unwrap(), key, "{text}");
        }
        let dir = std::env::temp_dir().join(format!("av-pubkey-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, body) in [
            ("hex", format!("{hex}\n")),
            ("ssh", format!("# the approver of my vault\n\n{line}\n")),
            ("both", format!("{hex}\n{line}\n")),
        ] {
            let f = dir.join(name);
            std::fs::write(&f, body).unwrap();
            assert_eq!(read(f.to_str().unwrap()).unwrap(), key, "{name}");
        }
        let empty = dir.join("empty");
        std::fs::write(&empty, "# nothing\n").unwrap();
        assert!(matches!(
            read(empty.to_str().unwrap()),
            Err(PublicKeyError::NoKeyInFile { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_is_not_a_usable_key_is_refused_with_the_reason() {
        let key = ApproverKey::generate().public();
        let line = to_ssh_line(&key);
        assert!(matches!(read("abcd"), Err(PublicKeyError::NotAKey(_))));
        assert!(matches!(
            read("/nonexistent/approver.pub"),
            Err(PublicKeyError::NotAKey(_))
        ));
        // The identity point: anyone can sign for it.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert!(matches!(
            read(&hex::encode(identity)),
            Err(PublicKeyError::NotAPoint)
        ));
        let b64 = line.split(' ').nth(1).unwrap();
        let cut = format!("ssh-ed25519 {}", &b64[..b64.len() - 8]);
        assert!(matches!(read(&cut), Err(PublicKeyError::BadSshLine(_))));
        let rsa = line.replacen("AAAAC3NzaC1lZDI1NTE5", "AAAAB3NzaC1yc2EAAAAD", 1);
        assert!(matches!(read(&rsa), Err(PublicKeyError::BadSshLine(_))));
    }
}
