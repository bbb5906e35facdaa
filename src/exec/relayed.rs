//! The files of `<vault>/relayed/`: a body too large for a frame, passed between the agent and
//! `vault run`'s proxy (docs/design.md §8). A response past the reply's bound goes to
//! `<action id>.body`, written by the executor; a request body past a frame's to
//! `<32 hex>.request`, written by the proxy. Each is made new (`create_new`, 0600, never through
//! a symbolic link) in a 0700 directory, and taken by the other side only as the sealed link
//! describes it (its length and blake3), then removed. The contained client never sees the
//! directory (its view of the vault holds `vault.id` and `config.toml` alone).
use crate::wire::RelayedFile;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The file a response body past the reply's bound is written to: action `id`'s, in `dir`
/// (`VaultPaths::relayed`). The proxy that reads it back names it the same way.
pub fn relayed_body(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.body"))
}

/// The file of a request body the proxy wrote, by the name it gave (32 lowercase hex digits,
/// nothing else: no path, no other file of the directory).
pub fn relayed_request(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let hex = name.len() == 32
        && name
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex {
        return Err(format!(
            "the relayed request body's name {name:?} is not one the proxy gives"
        ));
    }
    Ok(dir.join(format!("{name}.request")))
}

/// A relayed file older than this was never taken: its reader went away before it could.
const ABANDONED: std::time::Duration = std::time::Duration::from_secs(600);

/// A new file at `path`: its directory made 0700 if missing (and rid of abandoned files), the
/// file 0600 and new, never through a symbolic link.
pub(crate) fn new_file(path: &Path) -> Result<std::fs::File, String> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        let _ = std::fs::DirBuilder::new().mode(0o700).create(dir);
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let age = entry.metadata().ok().and_then(|m| m.modified().ok());
            if age
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|a| a > ABANDONED)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes a request body to a new file of `dir` under a random name; what the agent is told of
/// it. The caller removes the file once the agent answered (the agent removes it as it takes it).
pub fn write_request(dir: &Path, body: &[u8]) -> Result<RelayedFile, String> {
    let mut name = [0u8; 16];
    getrandom::fill(&mut name).map_err(|e| format!("no random name for a file: {e}"))?;
    let name = hex::encode(name);
    let path = relayed_request(dir, &name)?;
    let mut file = new_file(&path)?;
    if let Err(e) = file.write_all(body).and_then(|()| file.flush()) {
        let _ = std::fs::remove_file(&path);
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    Ok(RelayedFile {
        name,
        bytes: body.len() as u64,
        blake3: blake3::hash(body).to_hex().to_string(),
    })
}

/// What `file` holds, if it is exactly `len` bytes (at most `max`) whose blake3 is `hash`;
/// `what` names it in an error. The file is removed once opened (or found unopenable): it is one
/// request's or one response's alone.
pub fn take(file: &Path, len: u64, hash: &str, max: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let unreadable = |e: std::io::Error| format!("{what}'s file {}: {e}", file.display());
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(file);
    let _ = std::fs::remove_file(file);
    let f = opened.map_err(unreadable)?;
    if len > max {
        return Err(format!(
            "{what}'s {len} bytes are more than the {max} the vault relays"
        ));
    }
    let mut body = Vec::with_capacity(len as usize);
    f.take(len + 1).read_to_end(&mut body).map_err(unreadable)?;
    if body.len() as u64 != len || blake3::hash(&body).to_hex().as_str() != hash {
        return Err(format!(
            "{what}'s file {} is not what was written (its length or blake3 differs); nothing of it was used",
            file.display()
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_file_is_named_by_the_proxy_alone() {
        let dir = Path::new("/v/relayed");
        let name = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            relayed_request(dir, name).unwrap(),
            dir.join(format!("{name}.request"))
        );
        for bad in [
            "",
            "../../vault.db",
            "0123456789ABCDEF0123456789ABCDEF",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef/123456789abcdef",
            "0123456789abcdef0123456789abcdeg",
        ] {
            assert!(relayed_request(dir, bad).is_err(), "{bad:?}");
        }
    }

    /// A request body written for the agent is taken back whole, once, and only as written.
    #[test]
    fn a_written_request_is_taken_once_as_written() {
        let dir = std::env::temp_dir().join(format!("av-relayed-req-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let body: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let f = write_request(&dir, &body).unwrap();
        let path = relayed_request(&dir, &f.name).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!((mode(&dir), mode(&path)), (0o700, 0o600));
        assert_eq!(f.bytes, body.len() as u64);
        let got = take(&path, f.bytes, &f.blake3, 1 << 20, "the body").unwrap();
        assert_eq!(got, body);
        assert!(!path.exists(), "taken means removed");
        assert!(take(&path, f.bytes, &f.blake3, 1 << 20, "the body").is_err());
        // Over the bound the reader holds: refused before a byte is read.
        let f = write_request(&dir, &body).unwrap();
        let path = relayed_request(&dir, &f.name).unwrap();
        let err = take(&path, f.bytes, &f.blake3, 1000, "the body").unwrap_err();
        assert!(err.contains("more than the 1000"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
