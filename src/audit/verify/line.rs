//! Reading one `export-audit` line as a row: a fast path for each exact layout `export` writes (the
//! current one, `{"v":2,"prev","hash",` then the canonical row's members, and the first one,
//! `{"seq",…,"hash"}`) and serde for everything else. Each fast path accepts a subset of what
//! serde accepts and yields the same row (tested against serde on every line shape), so the
//! verdict never depends on which path read a line. The current layout's fast path also hands
//! over the row's hash, taken over the canonical text as it stands in the line: for every line
//! it accepts, that text is exactly what re-serialising the row gives (tested), so hashing it in
//! place changes nothing but the time.
use super::RowRef;
use crate::audit::EXPORT_V2_PREFIX as V2_PREFIX;
use std::borrow::Cow;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportLine<'a> {
    /// 2 in the current format, absent in the first; the fields are the same.
    #[serde(default)]
    v: Option<u64>,
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

/// One export line as a row, given to `push` with the row's hash when the line held its canonical
/// text (else the caller computes it); `Err` says why it is not one, in words that follow `line N`
/// (the caller knows N).
pub(super) fn parse_line(
    text: &[u8],
    push: impl FnOnce(&RowRef<'_>, Option<[u8; 32]>),
) -> Result<(), String> {
    let (mut prev, mut hash) = ([0u8; 32], [0u8; 32]);
    if text.starts_with(V2_PREFIX.as_bytes()) {
        if let Some((row, computed)) = fast_v2(text, &mut prev, &mut hash) {
            push(&row, Some(computed));
            return Ok(());
        }
    } else if let Some(row) = fast(text, &mut prev, &mut hash) {
        push(&row, None);
        return Ok(());
    }
    parse_with_serde(text, |row| push(row, None))
}

/// The general reader: any JSON object with exactly the eight fields (and `"v":2`, or no `v`), in
/// any order and spacing.
pub(super) fn parse_with_serde(text: &[u8], push: impl FnOnce(&RowRef<'_>)) -> Result<(), String> {
    let l = serde_json::from_slice::<ExportLine<'_>>(text)
        .map_err(|e| format!(" is not a journal row: {e}"))?;
    if let Some(v) = l.v.filter(|v| *v != 2) {
        return Err(format!(
            " is in export format {v}, which this build does not read (it reads 2, and the first, with no \"v\")"
        ));
    }
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

/// `{"v":2,"prev":"<64 hex>","hash":"<64 hex>",` then the canonical row after its `{`:
/// `"action":A,"body":B,"kind":"K","seq":N,"session":S,"ts":"T"}`, with no escape or control
/// character in a string field and a body `plain_json` accepts; `None` for anything else.
/// `prev` and `hash` receive the decoded hashes the row borrows; the second value is
/// blake3(prev ‖ `{` ‖ the rest of the line), the row's hash as the chain defines it.
pub(super) fn fast_v2<'a>(
    text: &'a [u8],
    prev: &'a mut [u8; 32],
    hash: &'a mut [u8; 32],
) -> Option<(RowRef<'a>, [u8; 32])> {
    let s = std::str::from_utf8(text).ok()?;
    let rest = s.strip_prefix(V2_PREFIX)?;
    let (prev_hex, rest) = (rest.get(..64)?, rest.get(64..)?);
    let rest = rest.strip_prefix(r#"","hash":""#)?;
    let (hash_hex, rest) = (rest.get(..64)?, rest.get(64..)?);
    // The canonical row's members and its closing brace.
    let members = rest.strip_prefix(r#"","#)?;
    *prev = crate::audit::hex32(prev_hex)?;
    *hash = crate::audit::hex32(hash_hex)?;
    let mut c = Cursor { s: members, at: 0 };
    c.eat(r#""action":"#)?;
    let action = c.opt_str()?;
    c.eat(r#","body":"#)?;
    let body_at = c.at;
    // From the end: ts, session, seq and kind are plain strings and digits, so each one's start
    // is the nearest quote (or non-digit) before its end.
    let mut e = Back(members.strip_suffix(r#""}"#)?);
    let ts = e.plain_str()?;
    e.eat(r#","ts":""#)?;
    let session = if e.eat("null").is_some() {
        None
    } else {
        e.eat("\"")?;
        let s = e.plain_str()?;
        e.eat("\"")?;
        Some(s)
    };
    e.eat(r#","session":"#)?;
    let seq = e.seq()?;
    e.eat(r#","seq":"#)?;
    e.eat("\"")?;
    let kind = e.plain_str()?;
    e.eat(r#","kind":""#)?;
    let body = e.0.get(body_at..)?;
    if !plain_json(body) {
        return None;
    }
    let mut h = blake3::Hasher::new();
    h.update(&prev[..]);
    h.update(b"{");
    h.update(members.as_bytes());
    let computed = *h.finalize().as_bytes();
    let row = RowRef {
        seq,
        ts,
        kind,
        session,
        action,
        body,
        prev,
        hash,
    };
    Some((row, computed))
}

/// A cursor taking a line apart from its end.
struct Back<'a>(&'a str);

impl<'a> Back<'a> {
    fn eat(&mut self, lit: &str) -> Option<()> {
        self.0 = self.0.strip_suffix(lit)?;
        Some(())
    }

    /// The contents of a plain string whose closing quote was just eaten: back to the nearest
    /// quote (not eaten), with no escape and no control character.
    fn plain_str(&mut self) -> Option<&'a str> {
        let b = self.0.as_bytes();
        let from = memchr::memrchr(b'"', b)? + 1;
        let out = &self.0[from..];
        let bad = out
            .bytes()
            .fold(false, |any, c| any | (c < 0x20) | (c == b'\\'));
        self.0 = &self.0[..from];
        (!bad).then_some(out)
    }

    /// A seq as `Cursor::seq` reads it, from its end.
    fn seq(&mut self) -> Option<i64> {
        let b = self.0.as_bytes();
        let len = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
        let digits = &self.0[b.len() - len..];
        if len == 0 || len > 18 || (len > 1 && digits.starts_with('0')) {
            return None;
        }
        self.0 = &self.0[..b.len() - len];
        digits.parse().ok()
    }
}

/// What follows the body in the first format: `,"prev":"<64 hex>","hash":"<64 hex>"}`.
const TAIL: usize = r#","prev":""#.len() + 64 + r#"","hash":""#.len() + 64 + r#""}"#.len();

/// `{"seq":N,"ts":"…","kind":"…","session":"…"|null,"action":"…"|null,"body":…,"prev":"<64
/// hex>","hash":"<64 hex>"}` exactly as the first format's `export` wrote it, with no escape or control character
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
