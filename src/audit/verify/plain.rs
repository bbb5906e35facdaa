//! Reading plain JSON fast: text with no backslash and no control character, as the journal
//! writes its rows. One pass (`sys::bytes::scan`) checks that and marks every quote in a bit set; after it, each
//! string ends at the next marked quote, found without looking at its bytes again. Whatever the reader
//! accepts, serde_json accepts as the same value; it refuses the rest (an escape, whitespace,
//! nesting past `MAX_DEPTH`), which callers leave to serde, so no verdict depends on which
//! reader read a row.

use crate::sys::bytes::scan;

/// Nesting the reader follows (serde_json's own limit is 128).
pub(super) const MAX_DEPTH: usize = 32;

/// A cursor over plain text: `at` is the next byte to read; bit `i % 64` of `quotes[i / 64]` is
/// set when byte `i` is a quote.
pub(super) struct Plain<'s, 'q> {
    s: &'s str,
    at: usize,
    quotes: &'q [u64],
}

impl<'s, 'q> Plain<'s, 'q> {
    /// A reader at the start of `s`, its quotes marked in `buf`; `None` when `s` holds a
    /// backslash or a control character.
    pub(super) fn new(s: &'s str, buf: &'q mut Vec<u64>) -> Option<Self> {
        let b = s.as_bytes();
        buf.clear();
        let mut blocks = b.chunks_exact(64);
        for c in &mut blocks {
            let (quotes, bad) = scan(c.try_into().expect("64 bytes"));
            if bad {
                return None;
            }
            buf.push(quotes);
        }
        // The last block padded with spaces (neither a quote nor refused).
        let mut last = [b' '; 64];
        last[..blocks.remainder().len()].copy_from_slice(blocks.remainder());
        let (quotes, bad) = scan(&last);
        if bad {
            return None;
        }
        buf.push(quotes);
        Some(Self {
            s,
            at: 0,
            quotes: buf,
        })
    }

    /// The index of the first quote at or after `from`.
    fn quote_from(&self, from: usize) -> Option<usize> {
        let mut w = from / 64;
        let mut bits = *self.quotes.get(w)? & (!0u64 << (from % 64));
        while bits == 0 {
            w += 1;
            bits = *self.quotes.get(w)?;
        }
        Some(w * 64 + bits.trailing_zeros() as usize)
    }

    /// Steps over `lit` if the text goes on with it (inlined: each `lit` is a constant, compared
    /// in place of a call).
    #[inline(always)]
    pub(super) fn eat(&mut self, lit: &str) -> Option<()> {
        if !self.s.as_bytes()[self.at..].starts_with(lit.as_bytes()) {
            return None;
        }
        self.at += lit.len();
        Some(())
    }

    /// Whether the whole text was read.
    pub(super) fn done(&self) -> bool {
        self.at == self.s.len()
    }

    /// A string: its contents, stepping over both quotes.
    pub(super) fn string(&mut self) -> Option<&'s str> {
        if self.s.as_bytes().get(self.at) != Some(&b'"') {
            return None;
        }
        let close = self.quote_from(self.at + 1)?;
        let out = &self.s[self.at + 1..close];
        self.at = close + 1;
        Some(out)
    }

    /// `null` or a string.
    pub(super) fn opt_str(&mut self) -> Option<Option<&'s str>> {
        if self.eat("null").is_some() {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// A non-negative integer as JSON writes it (no leading zero), fitting an i64.
    pub(super) fn seq(&mut self) -> Option<i64> {
        let rest = &self.s.as_bytes()[self.at..];
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if len == 0 || len > 18 || (len > 1 && rest[0] == b'0') {
            return None;
        }
        let n = self.s[self.at..self.at + len].parse().ok()?;
        self.at += len;
        Some(n)
    }

    /// One JSON value of objects, arrays, strings, `true`, `false`, `null` and numbers, with no
    /// whitespace, nested at most `MAX_DEPTH` deep: its text.
    pub(super) fn value(&mut self) -> Option<&'s str> {
        let from = self.at;
        let b = self.s.as_bytes();
        // Per open container: true for an object. A value is expected when `want_value`.
        let mut stack = [false; MAX_DEPTH];
        let mut depth = 0;
        let mut want_value = true;
        loop {
            if want_value {
                match b.get(self.at) {
                    Some(&open @ (b'{' | b'[')) => {
                        if depth == MAX_DEPTH {
                            return None;
                        }
                        let object = open == b'{';
                        (stack[depth], depth) = (object, depth + 1);
                        self.at += 1;
                        let close = if object { b'}' } else { b']' };
                        if b.get(self.at) == Some(&close) {
                            self.at += 1;
                            depth -= 1;
                            want_value = false;
                        } else if object {
                            self.key()?;
                        }
                    }
                    Some(b'"') => {
                        self.string()?;
                        want_value = false;
                    }
                    Some(b't') => (self.eat("true")?, want_value = false).1,
                    Some(b'f') => (self.eat("false")?, want_value = false).1,
                    Some(b'n') => (self.eat("null")?, want_value = false).1,
                    Some(b'-' | b'0'..=b'9') => {
                        self.at = number_end(b, self.at)?;
                        want_value = false;
                    }
                    _ => return None,
                }
                continue;
            }
            // After a value: its end, a comma, or the end of its container.
            if depth == 0 {
                return Some(&self.s[from..self.at]);
            }
            let object = stack[depth - 1];
            match b.get(self.at) {
                Some(b',') => {
                    self.at += 1;
                    if object {
                        self.key()?;
                    }
                    want_value = true;
                }
                Some(b'}') if object => (self.at, depth) = (self.at + 1, depth - 1),
                Some(b']') if !object => (self.at, depth) = (self.at + 1, depth - 1),
                _ => return None,
            }
        }
    }

    /// An object's key and its colon.
    pub(super) fn key(&mut self) -> Option<&'s str> {
        let k = self.string()?;
        self.eat(":")?;
        Some(k)
    }
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
mod tests {
    use super::*;

    /// Whether `s` is exactly one value `Plain::value` reads.
    fn plain_json(s: &str) -> bool {
        let mut buf = Vec::new();
        Plain::new(s, &mut buf).is_some_and(|mut p| p.value().is_some() && p.done())
    }

    #[test]
    fn plain_json_accepts_only_what_serde_accepts() {
        let accepted = [
            "{}",
            "[]",
            "0",
            "-0",
            "1.5e+3",
            "-12E-1",
            "true",
            "null",
            "\"é→\"",
            r#"{"a":[1,{"b":null}],"c":"d"}"#,
            "[[],[{}]]",
        ];
        let refused = [
            "",
            "{",
            "}",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "1e",
            "-",
            "+1",
            "tru",
            "nul",
            "{\"a\" :1}",
            "[1, 2]",
            " 1",
            "1 ",
            "\"a\\n\"",
            "\"\u{1}\"",
            "{1:2}",
            "{\"a\"}",
            "[1]]",
            "{}{}",
            "\"a",
            "[\"a\",]",
        ];
        for s in accepted {
            assert!(plain_json(s), "{s}");
            serde_json::from_str::<&serde_json::value::RawValue>(s).unwrap();
        }
        for s in refused {
            assert!(!plain_json(s), "{s}");
        }
        let deep = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        assert!(plain_json(&deep));
        let deeper = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(!plain_json(&deeper), "past the depth limit serde decides");
    }
}
