//! Scrubbing a secret out of everything an executor returns, before anything is retained,
//! returned, logged or journaled: every encoding the vault itself produces and the usual echoes,
//! replaced by `[REDACTED:<credential>]`, across chunk boundaries.
//!
//! Forms caught (see `patterns`):
//! - the secret as text where each character may independently be literal, percent-encoded
//!   (`%xx` in either case, so mixed case and partial encoding; `+` for a space, as the
//!   form encoding of a query credential sends it), or JSON-escaped (`\u00XX` in either case,
//!   surrogate pairs, and the short escapes `\"` `\\` `\/` `\n` …);
//! - base64 of the secret, standard and URL-safe, at each of the three byte alignments it can
//!   have inside a longer base64 string (`Bearer <secret>`, `user:<secret>`): the run of base64
//!   characters that depends only on the secret's bytes;
//! - hex of the secret, in either case.
//!
//! A stream is held back by the longest possible match, so a match split across chunks is still
//! found; at the end of a stream (or of a complete value) a held-back tail that could be the
//! beginning of a match is dropped, never flushed, and marked.
use base64::Engine;
use zeroize::Zeroizing;

/// A trailing partial match of at least this many bytes is dropped at the end of a stream.
const MIN_PARTIAL: usize = 4;

/// One way of writing one unit of the secret.
struct Alt {
    bytes: Zeroizing<Vec<u8>>,
    /// Compare ASCII case-insensitively (hex digits of `%xx`, `\uXXXX`, hex).
    fold: bool,
}

/// A sequence of units, each written in any of its alternatives.
struct Pattern {
    units: Vec<Vec<Alt>>,
    max_len: usize,
}

/// How a pattern fares at a position.
#[derive(Debug, Default, PartialEq, Eq)]
struct Probe {
    /// The end of the longest complete match.
    end: Option<usize>,
    /// The data ended while a match was still possible.
    partial: bool,
}

fn same(a: &[u8], b: &[u8], fold: bool) -> bool {
    if fold {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

impl Pattern {
    fn fixed(bytes: Vec<u8>, fold: bool) -> Self {
        Self::new(vec![vec![Alt {
            bytes: Zeroizing::new(bytes),
            fold,
        }]])
    }

    fn new(units: Vec<Vec<Alt>>) -> Self {
        let max_len = units
            .iter()
            .map(|u| u.iter().map(|a| a.bytes.len()).max().unwrap_or(0))
            .sum();
        Self { units, max_len }
    }

    /// Every match of this pattern that starts at `start`, at once (positions reachable after
    /// each unit), so ambiguous units (`%` vs `%25`) cost no backtracking.
    fn probe(&self, data: &[u8], start: usize) -> Probe {
        let mut partial = false;
        // Most positions fail on the first unit: decide that without allocating.
        let rest = &data[start..];
        let first_fits = self.units.first().is_some_and(|unit| {
            unit.iter().any(|alt| {
                let n = alt.bytes.len().min(rest.len());
                same(&rest[..n], &alt.bytes[..n], alt.fold)
            })
        });
        if !first_fits {
            return Probe::default();
        }
        let mut at = vec![start];
        for unit in &self.units {
            let mut next = Vec::new();
            for &p in &at {
                let rest = &data[p..];
                for alt in unit {
                    let n = alt.bytes.len();
                    if rest.len() >= n {
                        if same(&rest[..n], &alt.bytes, alt.fold) {
                            next.push(p + n);
                        }
                    } else if same(rest, &alt.bytes[..rest.len()], alt.fold) {
                        partial = true;
                    }
                }
            }
            if next.is_empty() {
                return Probe { end: None, partial };
            }
            next.sort_unstable();
            next.dedup();
            at = next;
        }
        Probe {
            end: at.last().copied(),
            partial,
        }
    }
}

fn alt(bytes: Vec<u8>, fold: bool) -> Alt {
    Alt {
        bytes: Zeroizing::new(bytes),
        fold,
    }
}

/// The ways one character may be written: literal, percent-encoded (per byte), `+` for a space,
/// JSON-escaped.
fn char_alts(c: char) -> Vec<Alt> {
    let mut utf8 = [0u8; 4];
    let raw = c.encode_utf8(&mut utf8).as_bytes().to_vec();
    let mut out = vec![alt(raw.clone(), false)];
    let percent: String = raw
        .iter()
        .map(|&b| percent_encoding::percent_encode_byte(b))
        .collect();
    out.push(alt(percent.into_bytes(), true));
    if c == ' ' {
        out.push(alt(b"+".to_vec(), false));
    }
    let mut units = [0u16; 2];
    let escaped: String = c
        .encode_utf16(&mut units)
        .iter()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    out.push(alt(escaped.into_bytes(), true));
    let short: Option<&[u8]> = match c {
        '"' => Some(b"\\\""),
        '\\' => Some(b"\\\\"),
        '/' => Some(b"\\/"),
        '\u{8}' => Some(b"\\b"),
        '\u{c}' => Some(b"\\f"),
        '\n' => Some(b"\\n"),
        '\r' => Some(b"\\r"),
        '\t' => Some(b"\\t"),
        _ => None,
    };
    if let Some(s) = short {
        out.push(alt(s.to_vec(), false));
    }
    out
}

/// The base64 characters that depend only on `secret` when it starts `k` bytes into a 3-byte
/// group (k = 0, 1, 2), in `engine`'s alphabet.
fn base64_run(engine: &base64::engine::GeneralPurpose, secret: &[u8], k: usize) -> Vec<u8> {
    let mut data = vec![0u8; k];
    data.extend_from_slice(secret);
    let enc = Zeroizing::new(engine.encode(&data));
    let start = (8 * k).div_ceil(6);
    let end = (8 * (k + secret.len())) / 6;
    enc.as_bytes()
        .get(start..end.min(enc.len()))
        .unwrap_or_default()
        .to_vec()
}

fn patterns(secret: &[u8]) -> Vec<Pattern> {
    let mut out = Vec::new();
    let text = String::from_utf8_lossy(secret);
    out.push(Pattern::new(text.chars().map(char_alts).collect()));
    if !secret.is_ascii() {
        // Non-ASCII (or not UTF-8): byte by byte, each raw or percent-encoded, so an encoder
        // that escapes only some bytes of a multi-byte character is caught too.
        out.push(Pattern::new(
            secret
                .iter()
                .map(|&b| {
                    let mut alts = vec![
                        alt(vec![b], false),
                        alt(percent_encoding::percent_encode_byte(b).into(), true),
                    ];
                    if b == b' ' {
                        alts.push(alt(b"+".to_vec(), false));
                    }
                    alts
                })
                .collect(),
        ));
    }
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for k in 0..3 {
            let run = base64_run(engine, secret, k);
            if run.len() >= MIN_PARTIAL {
                out.push(Pattern::fixed(run, false));
            }
        }
    }
    out.push(Pattern::fixed(hex::encode(secret).into_bytes(), true));
    out
}

/// A streaming scrubber for one secret.
pub struct Redactor {
    patterns: Vec<Pattern>,
    /// Bytes that can start a match (both cases where a pattern folds case).
    first: [bool; 256],
    marker: Vec<u8>,
    held: Vec<u8>,
    longest: usize,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} patterns, <redacted>)", self.patterns.len())
    }
}

impl Redactor {
    /// A scrubber for `secret`. The base64 runs already cover `user:secret` at any alignment;
    /// `basic_user` adds the whole basic-auth value, so an echoed `Authorization` header reads
    /// `Basic [REDACTED:…]` rather than keeping the user's part.
    pub fn new(secret: &[u8], basic_user: Option<&str>, credential: &str) -> Self {
        let mut patterns = if secret.is_empty() {
            Vec::new()
        } else {
            patterns(secret)
        };
        if let (Some(user), false) = (basic_user, secret.is_empty()) {
            let mut pair = Zeroizing::new(format!("{user}:").into_bytes());
            pair.extend_from_slice(secret);
            use base64::engine::general_purpose::STANDARD;
            patterns.push(Pattern::fixed(STANDARD.encode(&*pair).into_bytes(), false));
        }
        let mut first = [false; 256];
        for p in &patterns {
            for a in p.units.first().into_iter().flatten() {
                if let Some(&b) = a.bytes.first() {
                    first[usize::from(b)] = true;
                    if a.fold {
                        first[usize::from(b.to_ascii_lowercase())] = true;
                        first[usize::from(b.to_ascii_uppercase())] = true;
                    }
                }
            }
        }
        let longest = patterns.iter().map(|p| p.max_len).max().unwrap_or(1);
        Self {
            patterns,
            first,
            marker: format!("[REDACTED:{credential}]").into_bytes(),
            held: Vec::new(),
            longest,
        }
    }

    fn probe(&self, data: &[u8], i: usize) -> Probe {
        let mut best = Probe::default();
        if !self.first[usize::from(data[i])] {
            return best;
        }
        for p in &self.patterns {
            let r = p.probe(data, i);
            best.partial |= r.partial;
            if r.end > best.end {
                best.end = r.end;
            }
        }
        best
    }

    /// Scrubs `data[..upto]` (matches may read past `upto`); returns the output and where it
    /// stopped. At `end_of_data`, a tail that could begin a match is dropped and marked.
    fn scan(&self, data: &[u8], upto: usize, end_of_data: bool) -> (Vec<u8>, usize) {
        if crate::mutation::off("scrub") {
            return (data[..upto].to_vec(), upto);
        }
        let mut out = Vec::with_capacity(upto);
        let mut i = 0;
        while i < upto {
            let p = self.probe(data, i);
            if let Some(end) = p.end {
                out.extend_from_slice(&self.marker);
                i = end;
            } else if end_of_data && p.partial && data.len() - i >= MIN_PARTIAL {
                out.extend_from_slice(&self.marker);
                return (out, data.len());
            } else {
                out.push(data[i]);
                i += 1;
            }
        }
        (out, i)
    }

    /// Feeds a chunk; returns the scrubbed bytes that can no longer be part of a match.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(chunk);
        // A match starting before `upto` lies wholly inside what is held.
        let upto = self
            .held
            .len()
            .saturating_sub(self.longest.saturating_sub(1));
        let (out, used) = self.scan(&self.held, upto, false);
        self.held.drain(..used);
        out
    }

    /// Bytes held back now (a possible start of a match), waiting for the next chunk.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The most bytes `push` can leave held back: one less than the longest match.
    pub fn max_held(&self) -> usize {
        self.longest.saturating_sub(1)
    }

    /// Ends the stream: what is held, scrubbed; a tail that could begin a match is dropped.
    pub fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.held);
        self.scan(&rest, rest.len(), true).0
    }

    /// Scrubs a complete value (a header, an error message).
    pub fn scrub(&self, data: &[u8]) -> Vec<u8> {
        self.scan(data, data.len(), true).0
    }

    pub fn scrub_str(&self, s: &str) -> String {
        String::from_utf8_lossy(&self.scrub(s.as_bytes())).into_owned()
    }

    /// Scrubs every string (and object key) of a parsed JSON value: decoding `\u` escapes can
    /// spell out a secret that the bytes did not.
    pub fn scrub_json(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        match v {
            Value::String(s) => *s = self.scrub_str(s),
            Value::Array(items) => items.iter_mut().for_each(|i| self.scrub_json(i)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut item) in entries {
                    self.scrub_json(&mut item);
                    map.insert(self.scrub_str(&k), item);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
