//! `env:FILE#KEY`: a dotenv file, parsed as dotenv defines it (python-dotenv, docker compose):
//! `export ` before a key, blank lines and `#` comments, `KEY=value` with `=` kept inside the
//! value, an unquoted value's `#` starting a comment only after whitespace, single quotes taken
//! literally, double quotes with `\n \r \t \\ \" \' \$` escapes, and quoted values that run over
//! several lines. No `${VAR}` expansion: the value is what the file spells. Also the removal of a
//! key's line once the vault holds it (`--remove-from-source`).
use super::{exact, read_file, Fingerprint, ImportError};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use zeroize::Zeroizing;

/// One `KEY=value` of the file: where it stands (the line's start to its last line's end,
/// without the line break) and, for the key asked for, its value.
pub(super) struct Binding {
    pub(super) key: String,
    pub(super) line: usize,
    pub(super) span: Range<usize>,
    pub(super) value: Option<Zeroizing<Vec<u8>>>,
}

/// Every binding of `text` (values only for `wanted`); a malformed value of `wanted` is an error,
/// another key's malformed line is skipped as dotenv skips it.
pub(super) fn parse(text: &[u8], wanted: &str) -> Result<Vec<Binding>, (usize, &'static str)> {
    let mut out = Vec::new();
    let mut p = Parser {
        text,
        pos: 0,
        line: 1,
    };
    while p.pos < text.len() {
        let start = p.pos;
        let line = p.line;
        p.blanks();
        if p.at_eol() || p.peek() == Some(b'#') {
            p.skip_to_eol();
            p.eol();
            continue;
        }
        if text[p.pos..].starts_with(b"export") && matches!(text.get(p.pos + 6), Some(b' ' | b'\t'))
        {
            p.pos += 6;
            p.blanks();
        }
        let key_start = p.pos;
        while p
            .peek()
            .is_some_and(|c| !matches!(c, b'=' | b' ' | b'\t' | b'\r' | b'\n'))
        {
            p.pos += 1;
        }
        let key = String::from_utf8_lossy(&text[key_start..p.pos]).into_owned();
        p.blanks();
        if key.is_empty() || p.peek() != Some(b'=') {
            p.skip_to_eol();
            p.eol();
            continue;
        }
        p.pos += 1;
        p.blanks();
        let want = key == wanted;
        let mut value = want.then(|| Zeroizing::new(Vec::new()));
        match p.value(value.as_deref_mut()) {
            Ok(()) => {
                let span = start..p.pos;
                p.eol();
                if let Some(v) = value.as_mut() {
                    *v = exact(v);
                }
                out.push(Binding {
                    key,
                    line,
                    span,
                    value,
                });
            }
            Err(reason) if want => return Err((line, reason)),
            Err(_) => {
                // Resume on the line after the bad one, as python-dotenv does.
                p.pos = start;
                p.line = line;
                p.skip_to_eol();
                p.eol();
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }
    fn at_eol(&self) -> bool {
        matches!(self.peek(), None | Some(b'\n')) || self.text[self.pos..].starts_with(b"\r\n")
    }
    fn blanks(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }
    /// To the end of this line's content (before `\r\n` or `\n`).
    fn skip_to_eol(&mut self) {
        while !self.at_eol() {
            self.pos += 1;
        }
    }
    /// Past the line break, if any.
    fn eol(&mut self) {
        if self.text[self.pos..].starts_with(b"\r\n") {
            self.pos += 2;
        } else if self.peek() == Some(b'\n') {
            self.pos += 1;
        } else {
            return;
        }
        self.line += 1;
    }

    /// The value after `=` and blanks, up to the end of its (last) line's content.
    fn value(&mut self, mut out: Option<&mut Vec<u8>>) -> Result<(), &'static str> {
        let mut push = |b: &[u8]| {
            if let Some(o) = out.as_deref_mut() {
                o.extend_from_slice(b);
            }
        };
        match self.peek() {
            Some(q @ (b'\'' | b'"' | b'`')) => {
                self.pos += 1;
                loop {
                    let Some(c) = self.peek() else {
                        return Err("its quote is never closed");
                    };
                    self.pos += 1;
                    if c == q {
                        break;
                    }
                    if c == b'\n' {
                        self.line += 1;
                    }
                    if q == b'"' && c == b'\\' {
                        let decoded: &[u8] = match self.peek() {
                            Some(b'n') => b"\n",
                            Some(b'r') => b"\r",
                            Some(b't') => b"\t",
                            Some(b'\\') => b"\\",
                            Some(b'"') => b"\"",
                            Some(b'\'') => b"'",
                            Some(b'$') => b"$",
                            _ => {
                                push(b"\\");
                                continue;
                            }
                        };
                        self.pos += 1;
                        push(decoded);
                        continue;
                    }
                    push(&[c]);
                }
                // After the closing quote: blanks, then the line's end or a comment.
                self.blanks();
                if self.at_eol() || self.peek() == Some(b'#') {
                    self.skip_to_eol();
                    Ok(())
                } else {
                    Err("text follows its closing quote")
                }
            }
            _ => {
                let start = self.pos;
                let mut end = start;
                while !self.at_eol() {
                    let c = self.text[self.pos];
                    if c == b'#'
                        && self.pos > start
                        && matches!(self.text[self.pos - 1], b' ' | b'\t')
                    {
                        self.skip_to_eol();
                        break;
                    }
                    self.pos += 1;
                    if !matches!(c, b' ' | b'\t') {
                        end = self.pos;
                    }
                }
                push(&self.text[start..end]);
                Ok(())
            }
        }
    }
}

/// The value of `key` in the dotenv file `file`.
pub(super) fn read(label: &str, file: &Path, key: &str) -> Result<Zeroizing<Vec<u8>>, ImportError> {
    let text = read_file(label, file)?;
    let mut b = the_binding(label, file, key, &text)?;
    Ok(b.value.take().unwrap_or_default())
}

fn the_binding(label: &str, file: &Path, key: &str, text: &[u8]) -> Result<Binding, ImportError> {
    let all = parse(text, key).map_err(|(line, reason)| ImportError::Malformed {
        label: label.into(),
        key: key.into(),
        line,
        reason,
    })?;
    let (mut mine, others): (Vec<Binding>, Vec<Binding>) =
        all.into_iter().partition(|b| b.key == key);
    match mine.len() {
        1 => Ok(mine.pop().expect("one binding")),
        0 => {
            let mut names: Vec<&str> = others.iter().map(|b| b.key.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            Err(ImportError::NoKey {
                label: label.into(),
                file: file.into(),
                key: key.into(),
                defined: if names.is_empty() {
                    "no key at all".into()
                } else {
                    names.join(", ")
                },
            })
        }
        _ => Err(ImportError::DuplicateKey {
            label: label.into(),
            file: file.into(),
            key: key.into(),
            lines: mine
                .iter()
                .map(|b| b.line.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Replaces `key`'s line(s) in the dotenv file `file` by `comment` (one line, no value), once
/// its value still has `fingerprint`; every other byte stays as it was (order, line endings, the
/// last line's break or its absence), and so do the file's mode and owner. The new content is
/// written to a new file beside it (`create_new`, the original's mode) and renamed over it.
pub fn remove_key(
    file: &Path,
    key: &str,
    fingerprint: &Fingerprint,
    comment: &str,
) -> Result<(), ImportError> {
    let label = format!("env:{}#{key}", file.display());
    let rewrite = |err| ImportError::Rewrite {
        file: file.into(),
        err,
    };
    // The file itself, not a link to it, is replaced.
    let real = std::fs::canonicalize(file).map_err(rewrite)?;
    let text = read_file(&label, &real)?;
    let meta = std::fs::metadata(&real).map_err(rewrite)?;
    let b = the_binding(&label, file, key, &text)?;
    if b.value.as_deref().map(|v| Fingerprint::of(v)) != Some(fingerprint.clone()) {
        return Err(ImportError::Changed {
            file: file.into(),
            key: key.into(),
        });
    }
    let mut new = Zeroizing::new(Vec::with_capacity(text.len() + comment.len()));
    new.extend_from_slice(&text[..b.span.start]);
    new.extend_from_slice(comment.as_bytes());
    new.extend_from_slice(&text[b.span.end..]);

    let dir = real.parent().unwrap_or(Path::new("."));
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut nonce = [0u8; 6];
    getrandom::fill(&mut nonce).expect("the OS random source");
    let tmp = dir.join(format!(".{name}.vault-{}", hex::encode(nonce)));
    let mode = meta.permissions().mode() & 0o7777;
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        // The umask narrowed the mode given to open; the original's is set as it was.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        let here = f.metadata()?;
        if (here.uid(), here.gid()) != (meta.uid(), meta.gid()) {
            std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()))?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(&new)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &real)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(rewrite)
}
