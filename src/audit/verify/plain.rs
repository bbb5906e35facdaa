//! Reading plain JSON fast: text with no backslash and no control character, as the journal
//! writes its rows. One pass (SSE2 on x86_64) checks that and marks every quote in a bit set; after it, each
//! string ends at the next marked quote, found without looking at its bytes again. Whatever the reader
//! accepts, serde_json accepts as the same value; it refuses the rest (an escape, whitespace,
//! nesting past `MAX_DEPTH`), which callers leave to serde, so no verdict depends on which
//! reader read a row.

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

/// One bit per byte of `block`, set for a quote; and whether `block` holds a backslash or a
/// control character. SSE2, which every x86_64 target has: 16 bytes per compare.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[allow(unsafe_code)]
fn scan(block: &[u8; 64]) -> (u64, bool) {
    use std::arch::x86_64::*;
    // SAFETY: the cfg above says SSE2 is enabled at compile time, and each load reads the 16
    // bytes of `block` at `16 * k`, all inside it (the slice index checks that).
    unsafe {
        let quote = _mm_set1_epi8(b'"' as i8);
        let backslash = _mm_set1_epi8(b'\\' as i8);
        let below_space = _mm_set1_epi8(0x1f);
        let (mut quotes, mut bad) = (0u64, _mm_setzero_si128());
        for k in 0..4 {
            let v = _mm_loadu_si128(block[16 * k..16 * k + 16].as_ptr().cast());
            let q = _mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u32 as u64;
            quotes |= q << (16 * k);
            // A control character is one that min(c, 0x1f) leaves unchanged.
            let control = _mm_cmpeq_epi8(_mm_min_epu8(v, below_space), v);
            bad = _mm_or_si128(bad, _mm_or_si128(control, _mm_cmpeq_epi8(v, backslash)));
        }
        (quotes, _mm_movemask_epi8(bad) != 0)
    }
}

/// `scan` anywhere else, in plain words: a vector-friendly fold for the refused bytes, and SWAR
/// over eight bytes at a time for the quotes (exact, with no carry between bytes).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn scan_words(block: &[u8; 64]) -> (u64, bool) {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let bad = block
        .iter()
        .fold(false, |any, &c| any | (c < 0x20) | (c == b'\\'));
    let mut bits = 0;
    for (k, word) in block.chunks_exact(8).enumerate() {
        // Zero bytes where `word` has a quote; then the high bit of each zero byte, gathered.
        let x = u64::from_le_bytes(word.try_into().expect("8 bytes")) ^ 0x2222_2222_2222_2222;
        let zero = !(((x & LOW7).wrapping_add(LOW7)) | x) & !LOW7;
        bits |= ((zero >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * k);
    }
    (bits, bad)
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use scan_words as scan;

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
    use crate::audit::proptests::Rng;

    /// Whether `s` is exactly one value `Plain::value` reads.
    fn plain_json(s: &str) -> bool {
        let mut buf = Vec::new();
        Plain::new(s, &mut buf).is_some_and(|mut p| p.value().is_some() && p.done())
    }

    #[test]
    fn every_quote_and_refused_byte_is_found() {
        let mut rng = Rng(0x9407e);
        // Bytes next to a quote's, a backslash's and 0x1f/0x20 in value and in each bit, and the
        // high half.
        const NEAR: &[u8] = b"\"!#\x02\xa2\x22\x62\x20\xff\x00a\\\x5d\x1f\x9f\x7f ";
        for round in 0..2000 {
            let mut block = [b' '; 64];
            for c in block.iter_mut().take(rng.below(65)) {
                *c = NEAR[rng.below(NEAR.len())];
            }
            if round % 2 == 0 {
                // Half the blocks hold no refused byte, so the quote bits are seen alone too.
                block.iter_mut().for_each(|c| {
                    if *c < 0x20 || *c == b'\\' {
                        *c = b'a'
                    }
                });
            }
            let want_bad = block.iter().any(|&c| c < 0x20 || c == b'\\');
            for (name, (bits, bad)) in [("scan", scan(&block)), ("words", scan_words(&block))] {
                assert_eq!(bad, want_bad, "{name}: {block:?}");
                for (i, &c) in block.iter().enumerate() {
                    assert_eq!(
                        bits >> i & 1 == 1,
                        c == b'"',
                        "{name}: byte {i} of {block:?}"
                    );
                }
            }
        }
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
