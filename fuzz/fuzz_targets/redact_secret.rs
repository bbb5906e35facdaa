//! Fuzzes the scrubber (`exec::redact::Redactor`): a secret planted in arbitrary data, in one of
//! the encodings a target may echo, fed in arbitrary chunks, never survives in any form.
//!
//! Input layout: byte 0 = secret length (1..=48), byte 1 = encoding, byte 2 = base64 prefix
//! length (0..=5), byte 3 = chunk-length count; then the chunk lengths, the secret, junk before,
//! junk after (the rest, split at its middle). Encodings: raw, percent (a per-byte mask picks
//! literal or `%xx` and its case), JSON (a per-character mask picks literal, `\u` lower or upper,
//! or a short escape), base64 standard or URL-safe after a prefix (padded or not), hex (mixed
//! case), form encoding as the vault sends a query credential.
//!
//! Invariants: no panic; between two `[REDACTED:x]` markers of the output there is no complete
//! form of the secret (raw and form-encoded exactly; percent, hex and JSON `\u` forms,
//! case-insensitively; the base64
//! runs of at least 4 characters that depend only on the secret, at each alignment, in both
//! alphabets); a planted form of 4 or more bytes leaves a marker; scrubbing a complete value
//! (`scrub`) obeys the same rule.
#![no_main]

use agent_vault::exec::redact::Redactor;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use libfuzzer_sys::fuzz_target;

const MARKER: &[u8] = b"[REDACTED:x]";

fn base64_runs(secret: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for e in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let mut data = vec![0u8; k];
            data.extend_from_slice(secret);
            let enc = e.encode(&data);
            let (start, end) = ((8 * k).div_ceil(6), 8 * (k + secret.len()) / 6);
            if end >= start + 4 {
                out.push(enc.as_bytes()[start..end].to_vec());
            }
        }
    }
    out
}

/// (form, compare case-insensitively).
fn forms(secret: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let text = String::from_utf8_lossy(secret);
    let mut out = vec![(secret.to_vec(), false)];
    out.push((
        secret
            .iter()
            .map(|b| format!("%{b:02X}"))
            .collect::<String>()
            .into_bytes(),
        true,
    ));
    out.push((hex::encode(secret).into_bytes(), true));
    // Exactly as the vault sends it (folding would also fold its literal letters).
    out.push((
        url::form_urlencoded::byte_serialize(secret)
            .collect::<String>()
            .into_bytes(),
        false,
    ));
    if std::str::from_utf8(secret).is_ok() {
        let u: String = text.encode_utf16().map(|c| format!("\\u{c:04x}")).collect();
        out.push((u.into_bytes(), true));
    }
    out.extend(base64_runs(secret).into_iter().map(|r| (r, false)));
    out
}

fn planted(secret: &[u8], how: u8, k: usize, mask: &[u8]) -> Vec<u8> {
    let bit = |i: usize| mask.get(i % mask.len().max(1)).copied().unwrap_or(0);
    match how % 8 {
        0 => secret.to_vec(),
        1 => secret
            .iter()
            .enumerate()
            .flat_map(|(i, &b)| match bit(i) % 3 {
                0 => vec![b],
                1 => format!("%{b:02x}").into_bytes(),
                _ => format!("%{b:02X}").into_bytes(),
            })
            .collect(),
        2 => {
            let text = String::from_utf8_lossy(secret);
            let mut out = String::new();
            for (i, c) in text.chars().enumerate() {
                match (bit(i) % 4, c) {
                    (0, c) if !c.is_control() && c != '"' && c != '\\' => out.push(c),
                    (3, '/') => out.push_str("\\/"),
                    (3, '"') => out.push_str("\\\""),
                    (3, '\\') => out.push_str("\\\\"),
                    (3, '\n') => out.push_str("\\n"),
                    (n, c) => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            out.push_str(&if n == 2 {
                                format!("\\u{u:04X}")
                            } else {
                                format!("\\u{u:04x}")
                            });
                        }
                    }
                }
            }
            out.into_bytes()
        }
        3 | 4 => {
            let mut data = vec![b'B'; k];
            data.extend_from_slice(secret);
            data.extend_from_slice(b" tail");
            let e = match (how % 8 == 3, bit(0) % 2 == 0) {
                (true, true) => STANDARD.encode(&data),
                (true, false) => STANDARD_NO_PAD.encode(&data),
                (false, true) => URL_SAFE.encode(&data),
                (false, false) => URL_SAFE_NO_PAD.encode(&data),
            };
            e.into_bytes()
        }
        5 => hex::encode(secret)
            .bytes()
            .enumerate()
            .map(|(i, c)| {
                if bit(i) % 2 == 0 {
                    c
                } else {
                    c.to_ascii_uppercase()
                }
            })
            .collect(),
        _ => url::form_urlencoded::byte_serialize(secret)
            .collect::<String>()
            .into_bytes(),
    }
}

#[track_caller]
fn assert_scrubbed(out: &[u8], secret: &[u8]) {
    let forms = forms(secret);
    let mut rest = out;
    loop {
        let cut = rest.windows(MARKER.len()).position(|w| w == MARKER);
        let piece = &rest[..cut.unwrap_or(rest.len())];
        for (f, fold) in &forms {
            let hit = piece.windows(f.len()).any(|w| {
                if *fold {
                    w.eq_ignore_ascii_case(f)
                } else {
                    w == &f[..]
                }
            });
            assert!(
                !hit,
                "{:?} survived in {:?}",
                String::from_utf8_lossy(f),
                String::from_utf8_lossy(out)
            );
        }
        match cut {
            Some(c) => rest = &rest[c + MARKER.len()..],
            None => break,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (len, how, k, nchunks) = (
        data[0] as usize % 48 + 1,
        data[1],
        data[2] as usize % 6,
        data[3] as usize % 16,
    );
    let rest = &data[4..];
    let (lens, rest) = rest.split_at(nchunks.min(rest.len()));
    if rest.len() < len {
        return;
    }
    let (secret, junk) = rest.split_at(len);
    let (before, after) = junk.split_at(junk.len() / 2);
    let form = planted(secret, how, k, lens);
    let mut text = before.to_vec();
    text.extend_from_slice(&form);
    text.extend_from_slice(after);

    let mut r = Redactor::new(secret, None, "x");
    let mut out = Vec::new();
    let mut pos = 0;
    let mut i = 0;
    while pos < text.len() {
        let n = if lens.is_empty() {
            text.len()
        } else {
            lens[i % lens.len()] as usize + 1
        };
        let end = (pos + n).min(text.len());
        out.extend(r.push(&text[pos..end]));
        pos = end;
        i += 1;
    }
    out.extend(r.finish());
    assert_scrubbed(&out, secret);
    let whole = r.scrub(&text);
    assert_scrubbed(&whole, secret);
    // A base64 run of a secret under 4 bytes may be shorter than the scrubber's 4-character floor.
    let base64_short = matches!(how % 8, 3 | 4) && secret.len() < 4;
    if form.len() >= 4 && !base64_short {
        assert!(
            out.windows(MARKER.len()).any(|w| w == MARKER),
            "planted {:?} left no marker",
            String::from_utf8_lossy(&form)
        );
    }
});
