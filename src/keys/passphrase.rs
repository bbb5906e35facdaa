//! Reading a passphrase or a secret: from the terminal without echo, from stdin, or from a file.
//! Never from argv. The value is the first line of its input, without the line ending.
use secrecy::{ExposeSecret, SecretString};
use std::fmt;
use std::io::{self, BufRead};
use std::path::PathBuf;
use zeroize::Zeroizing;

/// Longest line we accept from stdin or a file (a passphrase or an API token, not a document).
const MAX_LINE: usize = 64 * 1024;
/// Shortest passphrase `vault init` accepts.
pub(super) const MIN_PASSPHRASE_CHARS: usize = 8;

/// Errors reading a passphrase or secret.
#[derive(Debug, thiserror::Error)]
pub enum PassphraseError {
    #[error("no terminal to ask for the {what} on: {instead}")]
    NoTerminal {
        what: &'static str,
        /// How to give it without a terminal.
        instead: &'static str,
    },
    // The OS error is the source: `{:#}` chains print it once, after this.
    #[error("cannot read the {what} from {from} (check the path and its permissions)")]
    Io {
        what: &'static str,
        from: String,
        source: io::Error,
    },
    #[error("the {what} read from {from} is empty; give it on the first line")]
    Empty { what: &'static str, from: String },
    #[error("the {what} from {from} is longer than {MAX_LINE} bytes; is this the right input?")]
    TooLong { what: &'static str, from: String },
    #[error("the {what} from {from} is not valid UTF-8")]
    NotUtf8 { what: &'static str, from: String },
    #[error(
        "the two passphrases differed three times; nothing was changed. Run the command again"
    )]
    Mismatch,
    #[error(
        "a new passphrase needs at least {MIN_PASSPHRASE_CHARS} characters; choose a longer one"
    )]
    TooShort,
}

/// A passphrase held in a `SecretString` (zeroized on drop, redacted in `Debug`).
pub struct Passphrase(SecretString);

impl Passphrase {
    pub fn from_string(s: String) -> Self {
        Self(SecretString::from(s))
    }
    pub fn secret(&self) -> &SecretString {
        &self.0
    }
    fn char_count(&self) -> usize {
        self.0.expose_secret().chars().count()
    }
}

impl fmt::Debug for Passphrase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Passphrase(<redacted>)")
    }
}

/// Where the passphrase comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PassphraseSource {
    Stdin,
    File(PathBuf),
    Terminal,
}

impl PassphraseSource {
    /// `--passphrase-stdin`, else `$VAULT_PASSPHRASE_FILE`, else the terminal.
    pub fn choose(stdin_flag: bool) -> Self {
        if stdin_flag {
            return Self::Stdin;
        }
        match std::env::var_os("VAULT_PASSPHRASE_FILE").filter(|v| !v.is_empty()) {
            Some(p) => Self::File(PathBuf::from(p)),
            None => Self::Terminal,
        }
    }

    /// What to tell a person whose passphrase from this source did not open the vault: where it
    /// was read from and how else to give it (`None` for the terminal: "try again" says it).
    pub fn wrong_hint(&self) -> Option<String> {
        match self {
            Self::Stdin => Some("the passphrase read from standard input (--passphrase-stdin) does not open this vault; check what is piped in, or run the command in a terminal to type it".into()),
            Self::File(p) => Some(format!("the passphrase read from VAULT_PASSPHRASE_FILE ({}) does not open this vault; correct that file, or unset VAULT_PASSPHRASE_FILE to type it in a terminal (or pipe it with --passphrase-stdin)", p.display())),
            Self::Terminal => None,
        }
    }

    /// Reads an existing passphrase.
    pub fn read(&self, prompt: &str) -> Result<Passphrase, PassphraseError> {
        let text = match self {
            Self::Stdin => read_stdin_line("passphrase")?,
            Self::File(path) => read_file_line("passphrase", path)?,
            Self::Terminal => read_terminal("passphrase", prompt, PASSPHRASE_INSTEAD)?,
        };
        Ok(Passphrase(SecretString::from(text.as_str())))
    }

    /// Reads a new passphrase: on a terminal it is asked twice, and asked again (up to three
    /// times, the prompt saying why) when it is too short or the two differ; from stdin or a
    /// file, either is an error at once.
    pub fn read_new(&self) -> Result<Passphrase, PassphraseError> {
        let mut prompt = "New vault passphrase: ".to_owned();
        for attempt in 1..=NEW_PASSPHRASE_TRIES {
            let last = attempt == NEW_PASSPHRASE_TRIES;
            let first = self.read(&prompt)?;
            // Too short is said at once, not after it was typed twice.
            if first.char_count() < MIN_PASSPHRASE_CHARS {
                if *self != Self::Terminal || last {
                    return Err(PassphraseError::TooShort);
                }
                prompt = format!("That is shorter than {MIN_PASSPHRASE_CHARS} characters. New vault passphrase: ");
                continue;
            }
            if *self != Self::Terminal {
                return Ok(first);
            }
            let again = self.read("Repeat the passphrase: ")?;
            if again.0.expose_secret() == first.0.expose_secret() {
                return Ok(first);
            }
            if last {
                break;
            }
            prompt = "The two differ; type it again. New vault passphrase: ".to_owned();
        }
        Err(PassphraseError::Mismatch)
    }
}

/// How many times a terminal is asked for a new passphrase before giving up.
const NEW_PASSPHRASE_TRIES: u32 = 3;

/// The first line of stdin, without its line ending; empty or oversized input is an error.
/// When stdin is a terminal (a person typing or pasting at `--secret-stdin`), it is asked for
/// with a prompt and read with echo off, like the passphrase: a secret never appears on the
/// screen or in a terminal's scrollback.
pub fn read_stdin_line(what: &'static str) -> Result<Zeroizing<String>, PassphraseError> {
    use std::io::IsTerminal;
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return read_terminal(
            what,
            &format!("Paste the {what} (it is not shown), then Enter: "),
            "give it on standard input from a file or a pipe",
        );
    }
    let lock = stdin.lock();
    first_line(lock, what, "standard input")
}

/// The first line of a file.
pub fn read_file_line(
    what: &'static str,
    path: &std::path::Path,
) -> Result<Zeroizing<String>, PassphraseError> {
    let from = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| PassphraseError::Io {
        what,
        from: from.clone(),
        source,
    })?;
    first_line(io::BufReader::new(file), what, &from)
}

/// How a command is given the passphrase without a terminal.
pub const PASSPHRASE_INSTEAD: &str =
    "give it with --passphrase-stdin, or set VAULT_PASSPHRASE_FILE to a 0600 file holding it";

/// Asks on the controlling terminal with echo off; `instead` says how else to give it.
pub fn read_terminal(
    what: &'static str,
    prompt: &str,
    instead: &'static str,
) -> Result<Zeroizing<String>, PassphraseError> {
    match rpassword::prompt_password(prompt) {
        Ok(s) => {
            let s = Zeroizing::new(s);
            if s.is_empty() {
                return Err(PassphraseError::Empty {
                    what,
                    from: "the terminal".into(),
                });
            }
            Ok(s)
        }
        Err(_) => Err(PassphraseError::NoTerminal { what, instead }),
    }
}

fn first_line(
    reader: impl BufRead,
    what: &'static str,
    from: &str,
) -> Result<Zeroizing<String>, PassphraseError> {
    let mut buf = Zeroizing::new(Vec::with_capacity(256));
    let mut limited = reader.take(MAX_LINE as u64 + 1);
    limited
        .read_until(b'\n', &mut buf)
        .map_err(|source| PassphraseError::Io {
            what,
            from: from.to_owned(),
            source,
        })?;
    if buf.len() > MAX_LINE {
        return Err(PassphraseError::TooLong {
            what,
            from: from.to_owned(),
        });
    }
    while matches!(buf.last(), Some(b'\n' | b'\r')) {
        buf.pop();
    }
    if buf.is_empty() {
        return Err(PassphraseError::Empty {
            what,
            from: from.to_owned(),
        });
    }
    let text = std::str::from_utf8(&buf).map_err(|_| PassphraseError::NotUtf8 {
        what,
        from: from.to_owned(),
    })?;
    Ok(Zeroizing::new(text.to_owned()))
}

/// How far a passphrase file reaches beyond its owner (`vault doctor`): whoever reads it can sign
/// as the approver without the PIN (`vault approve --id … --approve`), so it must be its owner's
/// alone and live outside any project an AI client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileExposure {
    /// Its mode bits, when anyone but its owner may read or write it.
    pub open_mode: Option<u32>,
    /// It belongs to another user than this process's.
    pub other_owner: bool,
    /// The root of the git work tree it sits in (a directory holding `.git`), if any.
    pub work_tree: Option<PathBuf>,
}

/// The exposure of the passphrase file at `path`.
pub fn file_exposure(path: &std::path::Path) -> io::Result<FileExposure> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    let mode = meta.mode() & 0o7777;
    let full = std::fs::canonicalize(path)?;
    let work_tree = full
        .ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").exists())
        .map(std::path::Path::to_path_buf);
    Ok(FileExposure {
        open_mode: (mode & 0o077 != 0).then_some(mode),
        other_owner: meta.uid() != rustix::process::getuid().as_raw(),
        work_tree,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_line_strips_line_ending_only() {
        let got = first_line(&b"  s3cret pass \r\nsecond\n"[..], "x", "t").unwrap();
        assert_eq!(got.as_str(), "  s3cret pass ");
        assert!(matches!(
            first_line(&b"\n"[..], "x", "t"),
            Err(PassphraseError::Empty { .. })
        ));
        let long = vec![b'a'; MAX_LINE + 10];
        assert!(matches!(
            first_line(&long[..], "x", "t"),
            Err(PassphraseError::TooLong { .. })
        ));
    }

    #[test]
    fn debug_is_redacted() {
        let p = Passphrase::from_string("hunter2hunter2".into());
        assert_eq!(format!("{p:?}"), "Passphrase(<redacted>)");
    }
}
