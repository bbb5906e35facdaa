//! Reading one `export-audit` line as a row: a fast path for the exact layout `export` writes and
//! serde for everything else. The fast path accepts a subset of what serde accepts and yields the
//! same row (tested against serde on every line shape), so the verdict never depends on which
//! path read a line.
use super::RowRef;
use std::borrow::Cow;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportLine<'a> {
    seq: i64,
    #[serde(borrow)]
    ts: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    session: Option<Cow<'a, str>>,
    #[serde(borrow)]
    action: Option<Cow<'a, str>>,
    #[serde(borrow)]
    body: &'a serde_json::value::RawValue,
    prev: &'a str,
    hash: &'a str,
}

/// Lowercase hex of exactly 32 bytes (as `export-audit` writes it), nothing else.
fn hex32(s: &str, field: &str) -> Result<[u8; 32], String> {
    crate::audit::hex32(s).ok_or_else(|| format!("{field} is not 64 lowercase hex digits"))
}

/// One export line as a row, given to `push`; `Err` says why it is not one, in words that follow
/// `line N` (the caller knows N).
pub(super) fn parse_line(text: &[u8], push: impl FnOnce(&RowRef<'_>)) -> Result<(), String> {
    let (mut prev, mut hash) = ([0u8; 32], [0u8; 32]);
    match fast(text, &mut prev, &mut hash) {
        Some(row) => {
            push(&row);
            Ok(())
        }
        None => parse_with_serde(text, push),
    }
}

/// The general reader: any JSON object with exactly the eight fields, in any order and spacing.
pub(super) fn parse_with_serde(text: &[u8], push: impl FnOnce(&RowRef<'_>)) -> Result<(), String> {
    let l = serde_json::from_slice::<ExportLine<'_>>(text)
        .map_err(|e| format!(" is not a journal row: {e}"))?;
    let prev = hex32(l.prev, "prev").map_err(|e| format!(": {e}"))?;
    let hash = hex32(l.hash, "hash").map_err(|e| format!(": {e}"))?;
    push(&RowRef {
        seq: l.seq,
        ts: &l.ts,
        kind: &l.kind,
        session: l.session.as_deref(),
        action: l.action.as_deref(),
        body: l.body.get(),
        prev: &prev,
        hash: &hash,
    });
    Ok(())
}

/// What follows the body: `,"prev":"<64 hex>","hash":"<64 hex>"}`.
const TAIL: usize = r#","prev":""#.len() + 64 + r#"","hash":""#.len() + 64 + r#""}"#.len();

/// `{"seq":N,"ts":"…","kind":"…","session":"…"|null,"action":"…"|null,"body":…,"prev":"<64
/// hex>","hash":"<64 hex>"}` exactly as `export` writes it, with no escape or control character
/// in a string field and a body `plain_json` accepts; `None` for anything else (serde reads
/// those, and says what is wrong with a line that is not a row).
/// `prev` and `hash` receive the decoded hashes the row borrows.
pub(super) fn fast<'a>(
    text: &'a [u8],
    prev: &'a mut [u8; 32],
    hash: &'a mut [u8; 32],
) -> Option<RowRef<'a>> {
    let s = std::str::from_utf8(text).ok()?;
    let tail_at = s.len().checked_sub(TAIL)?;
    let tail = s.get(tail_at..)?;
    let hexes = tail.strip_prefix(r#","prev":""#)?;
    let (prev_hex, hash_hex) = (hexes.get(..64)?, hexes.get(64..)?);
    let hash_hex = hash_hex
        .strip_prefix(r#"","hash":""#)?
        .strip_suffix(r#""}"#)?;
    *prev = crate::audit::hex32(prev_hex)?;
    *hash = crate::audit::hex32(hash_hex)?;
    let mut c = Cursor {
        s: &s[..tail_at],
        at: 0,
    };
    c.eat(r#"{"seq":"#)?;
    let seq = c.seq()?;
    c.eat(r#","ts":""#)?;
    let ts = c.plain_str()?;
    c.eat(r#","kind":""#)?;
    let kind = c.plain_str()?;
    c.eat(r#","session":"#)?;
    let session = c.opt_str()?;
    c.eat(r#","action":"#)?;
    let action = c.opt_str()?;
    c.eat(r#","body":"#)?;
    let body = &c.s[c.at..];
    plain_json(body).then_some(RowRef {
        seq,
        ts,
        kind,
        session,
        action,
        body,
        prev,
        hash,
    })
}

/// A cursor over one line.
struct Cursor<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn eat(&mut self, lit: &str) -> Option<()> {
        self.s[self.at..]
            .starts_with(lit)
            .then(|| self.at += lit.len())
    }

    /// A string with no escape and no control character, after its opening quote; returns its
    /// contents and steps over the closing quote.
    fn plain_str(&mut self) -> Option<&'a str> {
        let end = plain_string_len(&self.s.as_bytes()[self.at..])?;
        let out = &self.s[self.at..self.at + end];
        self.at += end + 1;
        Some(out)
    }

    /// `null` or a plain string.
    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        self.eat("\"")?;
        self.plain_str().map(Some)
    }

    /// A non-negative integer as JSON writes it (no leading zero), fitting an i64.
    fn seq(&mut self) -> Option<i64> {
        let rest = &self.s.as_bytes()[self.at..];
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || len > 18 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        let n = self.s[self.at..self.at + len].parse().ok()?;
        self.at += len;
        Some(n)
    }
}

/// Whether `s` is one JSON value made only of objects, arrays, plain strings (no escape, no
/// control character), `true`, `false`, `null` and numbers, nested at most `MAX_DEPTH` deep, with
/// no whitespace. Every text it accepts, serde_json accepts as the same value; it refuses some
/// that serde accepts (escapes, whitespace, deep nesting), which then go to serde.
pub(super) fn plain_json(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    // Per open container: true for an object. A value is expected when `want_value`.
    let mut stack: Vec<bool> = Vec::with_capacity(8);
    let mut want_value = true;
    loop {
        if want_value {
            match b.get(i) {
                Some(b'{') => {
                    i += 1;
                    if stack.len() == MAX_DEPTH {
                        return false;
                    }
                    stack.push(true);
                    if b.get(i) == Some(&b'}') {
                        i += 1;
                        stack.pop();
                        want_value = false;
                        continue;
                    }
                    // A key, then a colon, then its value.
                    if b.get(i) != Some(&b'"') {
                        return false;
                    }
                    match plain_string_end(b, i + 1) {
                        Some(end) if b.get(end) == Some(&b':') => i = end + 1,
                        _ => return false,
                    }
                }
                Some(b'[') => {
                    i += 1;
                    if stack.len() == MAX_DEPTH {
                        return false;
                    }
                    stack.push(false);
                    if b.get(i) == Some(&b']') {
                        i += 1;
                        stack.pop();
                        want_value = false;
                    }
                }
                Some(b'"') => match plain_string_end(b, i + 1) {
                    Some(end) => {
                        i = end;
                        want_value = false;
                    }
                    None => return false,
                },
                Some(b't') if b[i..].starts_with(b"true") => (i, want_value) = (i + 4, false),
                Some(b'f') if b[i..].starts_with(b"false") => (i, want_value) = (i + 5, false),
                Some(b'n') if b[i..].starts_with(b"null") => (i, want_value) = (i + 4, false),
                Some(b'-' | b'0'..=b'9') => match number_end(b, i) {
                    Some(end) => (i, want_value) = (end, false),
                    None => return false,
                },
                _ => return false,
            }
            continue;
        }
        // After a value: the end of the text, a comma, or the end of its container.
        let Some(&object) = stack.last() else {
            return i == b.len();
        };
        match b.get(i) {
            Some(b',') => {
                i += 1;
                if object {
                    if b.get(i) != Some(&b'"') {
                        return false;
                    }
                    match plain_string_end(b, i + 1) {
                        Some(end) if b.get(end) == Some(&b':') => i = end + 1,
                        _ => return false,
                    }
                }
                want_value = true;
            }
            Some(b'}') if object => {
                i += 1;
                stack.pop();
            }
            Some(b']') if !object => {
                i += 1;
                stack.pop();
            }
            _ => return false,
        }
    }
}

/// Nesting the fast path reads (serde_json's own limit is 128).
const MAX_DEPTH: usize = 32;

/// The index after the closing quote of a plain string whose contents start at `from`.
fn plain_string_end(b: &[u8], from: usize) -> Option<usize> {
    plain_string_len(b.get(from..)?).map(|len| from + len + 1)
}

/// The length of a plain string's contents up to its closing quote (`b` starts after the opening
/// one): `None` if an escape or a control character comes first, or there is no quote.
fn plain_string_len(b: &[u8]) -> Option<usize> {
    let len = memchr::memchr2(b'"', b'\\', b)?;
    // Without an early exit, so that it compiles to a vector loop.
    let control = b[..len].iter().fold(false, |any, &c| any | (c < 0x20));
    (b[len] == b'"' && !control).then_some(len)
}

/// The index after a JSON number starting at `from`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
fn number_end(b: &[u8], from: usize) -> Option<usize> {
    let digits = |i: usize| {
        b[i.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count()
    };
    let mut i = from + usize::from(b.get(from) == Some(&b'-'));
    match (b.get(i), digits(i)) {
        (Some(b'0'), 1) => i += 1,
        (Some(b'1'..=b'9'), n) => i += n,
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        match digits(i + 1) {
            0 => return None,
            n => i += 1 + n,
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        match digits(i) {
            0 => return None,
            n => i += n,
        }
    }
    Some(i)
}

#[cfg(test)]
#[path = "line_tests.rs"]
mod tests;
