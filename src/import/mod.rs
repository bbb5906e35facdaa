//! `--secret-from SOURCE`: one secret read once, at that moment, from where a person already
//! keeps it (a dotenv file, a `pass` entry, a Bitwarden JSON export, a KeePassXC database through
//! `keepassxc-cli`) into zeroizing memory; and, for a dotenv file, its line replaced by a comment
//! once the vault holds the secret. No value reaches argv, an error, a log or a temporary file.
mod bitwarden;
mod env;
mod program;

use std::io::Read;
use std::path::{Path, PathBuf};
use zeroize::Zeroizing;

pub use env::remove_key;

/// The sources `--secret-from` takes, for messages.
pub const SOURCES: &str =
    "env:FILE#KEY, pass:ENTRY, bitwarden:FILE#ITEM[/FIELD] or keepassxc:FILE#ENTRY";

/// Most bytes of a file read whole (a dotenv file, a Bitwarden export).
const MAX_FILE: u64 = 64 * 1024 * 1024;

/// Where a secret is read from: the parsed `--secret-from` string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A dotenv file and a key in it.
    Env { file: PathBuf, key: String },
    /// A `pass` entry; its first line.
    Pass { entry: String },
    /// A Bitwarden unencrypted JSON export: an item (name or id), its login password or, with
    /// `ITEM/FIELD`, a custom field.
    Bitwarden { file: PathBuf, item: String },
    /// A KeePassXC database and an entry path, through `keepassxc-cli`.
    Keepassxc { file: PathBuf, entry: String },
}

/// Why a secret could not be read or its source updated. No variant holds a value.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("--secret-from: {0}")]
    Syntax(String),
    #[error("--secret-from openbao: is a live reference, not a source read once: `vault add http` and `vault edit` take it (team mode, after `vault openbao login`)")]
    OpenBao,
    #[error("{label}: cannot read {}: {err}; check the path", path.display())]
    File {
        label: String,
        path: PathBuf,
        #[source]
        err: std::io::Error,
    },
    #[error("{label}: {} is larger than {max} bytes; is it the right file?", path.display())]
    TooLarge {
        label: String,
        path: PathBuf,
        max: u64,
    },
    #[error("{label}: {} has no key {key} (it defines: {defined}); check the key's spelling", file.display())]
    NoKey {
        label: String,
        file: PathBuf,
        key: String,
        defined: String,
    },
    #[error("{label}: {key} is defined more than once in {} (lines {lines}); keep one definition and run again", file.display())]
    DuplicateKey {
        label: String,
        file: PathBuf,
        key: String,
        lines: String,
    },
    #[error("{label}: the value of {key} on line {line} is not well formed ({reason}); fix the line and run again")]
    Malformed {
        label: String,
        key: String,
        line: usize,
        reason: &'static str,
    },
    #[error("{label}: the value is empty; store the secret there first")]
    Empty { label: String },
    #[error("{label}: no entry {entry} in the password store {}; `pass ls` lists the entries", store.display())]
    NoEntry {
        label: String,
        entry: String,
        store: PathBuf,
    },
    #[error("{label}: {reason}")]
    Export { label: String, reason: String },
    #[error("{label}: no item named {item:?} (nor with that id) in the export; check the item's name in Bitwarden")]
    NoItem { label: String, item: String },
    #[error(
        "{label}: {count} items are named {item:?} (ids {ids}); name the one you mean by its id"
    )]
    SameName {
        label: String,
        item: String,
        count: usize,
        ids: String,
    },
    #[error("{label}: item {item:?} has no custom field {field:?} (its fields: {fields})")]
    NoField {
        label: String,
        item: String,
        field: String,
        fields: String,
    },
    #[error("{label}: item {item:?} has no login password; name a custom field with {item}/FIELD")]
    NoPassword { label: String, item: String },
    #[error("{label}: no entry {entry:?} in the KeePassXC database; `keepassxc-cli ls FILE` lists the entries")]
    NoKeepassEntry { label: String, entry: String },
    #[error("{label}: the database password was not accepted; run the command again")]
    WrongPassword { label: String },
    #[error("{label}: the program {program} is not installed; install the package {package} (e.g. `apt-get install {package}`)")]
    Missing {
        label: String,
        program: &'static str,
        package: &'static str,
    },
    #[error("{label}: {program} failed ({status}); its own message, if any, is above")]
    Failed {
        label: String,
        program: &'static str,
        status: String,
    },
    #[error("{label}: {program} printed more than {max} bytes; is it the right entry?")]
    TooLong {
        label: String,
        program: &'static str,
        max: usize,
    },
    #[error("{label}: cannot run {program}: {err}")]
    Spawn {
        label: String,
        program: &'static str,
        #[source]
        err: std::io::Error,
    },
    #[error("{}: {key} changed since its value was read, so the file was left as it is; the credential holds the value read earlier. Remove {key}'s line by hand", file.display())]
    Changed { file: PathBuf, key: String },
    #[error("cannot rewrite {}: {err}; the file was left as it is. Remove the key's line by hand", file.display())]
    Rewrite {
        file: PathBuf,
        #[source]
        err: std::io::Error,
    },
}

impl Source {
    /// Parses `env:FILE#KEY`, `pass:ENTRY`, `bitwarden:FILE#ITEM[/FIELD]`, `keepassxc:FILE#ENTRY`.
    /// FILE ends at the first `#`. An error never repeats the string (it could be a mistyped
    /// secret).
    pub fn parse(s: &str) -> Result<Self, ImportError> {
        let Some((scheme, rest)) = s.split_once(':') else {
            return Err(ImportError::Syntax(format!(
                "the source has no KIND: prefix; give one of {SOURCES}"
            )));
        };
        let file_and = |what: &str| -> Result<(PathBuf, String), ImportError> {
            match rest.split_once('#') {
                Some((f, k)) if !f.is_empty() && !k.is_empty() => Ok((PathBuf::from(f), k.into())),
                _ => Err(ImportError::Syntax(format!(
                    "{scheme}: wants FILE#{what} (the file, then # and the {})",
                    what.to_lowercase()
                ))),
            }
        };
        match scheme {
            "env" => {
                let (file, key) = file_and("KEY")?;
                Ok(Self::Env { file, key })
            }
            "pass" if !rest.is_empty() => Ok(Self::Pass {
                entry: rest.trim_matches('/').into(),
            }),
            "pass" => Err(ImportError::Syntax(
                "pass: wants the entry's name, e.g. pass:web/github".into(),
            )),
            "bitwarden" => {
                let (file, item) = file_and("ITEM")?;
                Ok(Self::Bitwarden { file, item })
            }
            "keepassxc" => {
                let (file, entry) = file_and("ENTRY")?;
                Ok(Self::Keepassxc { file, entry })
            }
            "openbao" => Err(ImportError::OpenBao),
            _ => Err(ImportError::Syntax(format!(
                "unknown source kind; give one of {SOURCES}"
            ))),
        }
    }

    /// The source as messages name it (paths and names, never a value).
    pub fn label(&self) -> String {
        match self {
            Self::Env { file, key } => format!("env:{}#{key}", file.display()),
            Self::Pass { entry } => format!("pass:{entry}"),
            Self::Bitwarden { file, item } => format!("bitwarden:{}#{item}", file.display()),
            Self::Keepassxc { file, entry } => format!("keepassxc:{}#{entry}", file.display()),
        }
    }

    /// Whether reading it takes standard input (`keepassxc-cli` asks for the database password
    /// there, or on the terminal that is stdin).
    pub fn reads_stdin(&self) -> bool {
        matches!(self, Self::Keepassxc { .. })
    }

    /// Reads the secret once. The result's capacity is its length, so turning it into a boxed
    /// slice moves it without a copy left behind.
    pub fn read(&self) -> Result<Zeroizing<Vec<u8>>, ImportError> {
        let label = self.label();
        let value = match self {
            Self::Env { file, key } => env::read(&label, file, key)?,
            Self::Pass { entry } => program::pass(&label, entry)?,
            Self::Bitwarden { file, item } => bitwarden::read(&label, file, item)?,
            Self::Keepassxc { file, entry } => program::keepassxc(&label, file, entry)?,
        };
        if value.is_empty() {
            return Err(ImportError::Empty { label });
        }
        Ok(value)
    }
}

/// A keyed hash of a value read (the key random per process): how the source is checked to still
/// hold it before it is rewritten, without keeping the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    pub fn of(value: &[u8]) -> Self {
        static KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
        let key = KEY.get_or_init(|| {
            let mut k = [0u8; 32];
            getrandom::fill(&mut k).expect("the OS random source");
            k
        });
        Self(*blake3::keyed_hash(key, value).as_bytes())
    }
}

impl std::fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fingerprint(<redacted>)")
    }
}

/// `bytes` copied into a zeroizing vector whose capacity is exactly its length.
fn exact(bytes: &[u8]) -> Zeroizing<Vec<u8>> {
    let mut v = Zeroizing::new(Vec::with_capacity(bytes.len()));
    v.extend_from_slice(bytes);
    v
}

/// A whole file into zeroizing memory, sized once from its length (no reallocation leaves a
/// copy behind).
fn read_file(label: &str, path: &Path) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let io = |err| ImportError::File {
        label: label.into(),
        path: path.into(),
        err,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len > MAX_FILE {
        return Err(ImportError::TooLarge {
            label: label.into(),
            path: path.into(),
            max: MAX_FILE,
        });
    }
    // One byte more than the length shows a file that grew meanwhile.
    let mut buf = Zeroizing::new(vec![0u8; len as usize + 1]);
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    if n == buf.len() {
        return Err(io(std::io::Error::other(
            "it changed while it was read; run the command again",
        )));
    }
    buf.truncate(n);
    Ok(buf)
}

#[cfg(test)]
mod tests;
