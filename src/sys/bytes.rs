//! Scanning bytes with the CPU's vector compares: where the quotes are, and whether a backslash or
//! a control character is there, 64 bytes at a time (the audit verifier's plain-JSON reader, one
//! call per 64 bytes of an export; SSE2 on x86_64, which every x86_64 target has, plain words
//! elsewhere, tested against the same definition); and text that is ASCII taken as UTF-8 in one
//! pass (the verifier reads five text columns per row).

/// `bytes` as text: ASCII is UTF-8 as it stands, found in one pass with no early exit (an OR of
/// every byte, which compiles to vector code); anything else goes to `std::str::from_utf8`.
/// Same answer as `from_utf8`; verifying vault.db on one reader took ~2% less CPU with it
/// (alternating runs, 1M rows), the journal's text being ASCII but for what people typed.
pub fn utf8(bytes: &[u8]) -> Result<&str, std::str::Utf8Error> {
    if bytes.iter().fold(0u8, |any, &b| any | b) < 0x80 {
        // SAFETY: every byte is below 0x80, and a string of ASCII bytes is valid UTF-8.
        Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes)
    }
}

/// One bit per byte of `block`, set for a quote; and whether `block` holds a backslash or a
/// control character. SSE2, which every x86_64 target has: 16 bytes per compare.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub fn scan(block: &[u8; 64]) -> (u64, bool) {
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
pub use scan_words as scan;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_answers_as_from_utf8_does() {
        let cases: &[&[u8]] = &[
            b"",
            b"plain ascii, with \"quotes\" and \\ and \x01 and \x7f",
            "caf\u{e9} \u{1f512}".as_bytes(),
            b"\x80",
            b"ok then \xff",
            b"\xe2\x82",
            b"\xed\xa0\x80",
            &[b'a'; 200],
        ];
        for &bytes in cases {
            let mut long = bytes.to_vec();
            long.extend_from_slice(&[b'x'; 70]);
            for b in [bytes, &long[..]] {
                assert_eq!(utf8(b).ok(), std::str::from_utf8(b).ok(), "{b:?}");
            }
        }
    }

    #[test]
    fn every_quote_and_refused_byte_is_found() {
        let mut x = 0x9407e_u64;
        // xorshift: the same blocks on every run.
        let mut below = |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        // Bytes next to a quote's, a backslash's and 0x1f/0x20 in value and in each bit, and the
        // high half.
        const NEAR: &[u8] = b"\"!#\x02\xa2\x22\x62\x20\xff\x00a\\\x5d\x1f\x9f\x7f ";
        for round in 0..2000 {
            let mut block = [b' '; 64];
            for c in block.iter_mut().take(below(65)) {
                *c = NEAR[below(NEAR.len())];
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
}
