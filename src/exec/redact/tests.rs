//! The scrubber against every form in which the vault sends a secret or a target echoes it, at
//! every chunk boundary.
use super::*;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};

/// Has `~`, `*`, a space, `&`, `<`, `>`, `/`, `+`, `=` and a non-ASCII character, so that every
/// encoding differs from the raw text.
const SECRET: &str = "s3cr~t*T0k en&<a>/b+c=d\u{e9}9";

fn scrub_stream(secret: &str, chunks: &[&[u8]]) -> Vec<u8> {
    let mut r = Redactor::new(secret.as_bytes(), None, "api");
    let mut out = Vec::new();
    for c in chunks {
        out.extend(r.push(c));
    }
    out.extend(r.finish());
    out
}

fn percent_all(s: &str, upper: bool) -> String {
    s.bytes()
        .map(|b| {
            if upper {
                format!("%{b:02X}")
            } else {
                format!("%{b:02x}")
            }
        })
        .collect()
}

/// Every form a target could echo the secret in, each with a label.
fn echoes(secret: &str) -> Vec<(String, Vec<u8>)> {
    let b = secret.as_bytes();
    let mut out: Vec<(String, Vec<u8>)> = vec![
        ("raw".into(), b.to_vec()),
        (
            "form-encoded (what the vault sends for a query credential)".into(),
            url::form_urlencoded::byte_serialize(b)
                .collect::<String>()
                .into_bytes(),
        ),
        ("percent upper".into(), percent_all(secret, true).into()),
        ("percent lower".into(), percent_all(secret, false).into()),
        ("hex".into(), hex::encode(b).into()),
        ("HEX".into(), hex::encode_upper(b).into()),
    ];
    // Percent-encoding of every other byte, in alternating case.
    let mixed: String = b
        .iter()
        .enumerate()
        .map(|(i, &c)| match i % 3 {
            0 => format!("%{c:02X}"),
            1 => format!("%{c:02x}"),
            _ if c.is_ascii_alphanumeric() => (c as char).to_string(),
            _ => format!("%{c:02x}"),
        })
        .collect();
    out.push(("percent mixed and partial".into(), mixed.into()));
    // JSON as Go writes it (`&`, `<`, `>` as \u00XX), and with every character escaped.
    let go = serde_json::to_string(secret)
        .unwrap()
        .replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003E");
    out.push(("JSON, Go escaping".into(), go.into()));
    let every: String = secret
        .encode_utf16()
        .enumerate()
        .map(|(i, u)| {
            if i % 2 == 0 {
                format!("\\u{u:04x}")
            } else {
                format!("\\u{u:04X}")
            }
        })
        .collect();
    out.push(("JSON, every character \\u-escaped".into(), every.into()));
    // base64 inside a longer base64 string, at each alignment, standard and URL-safe.
    for prefix in ["", "B", "Be", "Bearer ", "bot:", "x:", "Token "] {
        let mut data = prefix.as_bytes().to_vec();
        data.extend_from_slice(b);
        data.extend_from_slice(b" and more");
        for (name, enc) in [
            ("standard", STANDARD.encode(&data)),
            ("standard no pad", STANDARD_NO_PAD.encode(&data)),
            ("url-safe", URL_SAFE.encode(&data)),
            ("url-safe no pad", URL_SAFE_NO_PAD.encode(&data)),
        ] {
            out.push((format!("base64 {name} of {prefix:?}+secret"), enc.into()));
        }
    }
    out
}

/// The stable inner base64 runs of the secret at the three alignments, standard and URL-safe.
fn runs(secret: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for e in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        for k in 0..3 {
            out.push(base64_run(e, secret.as_bytes(), k));
        }
    }
    out
}

#[track_caller]
fn assert_clean(what: &str, out: &[u8], secret: &str) {
    let mut forms: Vec<Vec<u8>> = runs(secret);
    forms.push(secret.as_bytes().to_vec());
    forms.push(hex::encode(secret).into());
    forms.push(percent_all(secret, true).into());
    for f in forms {
        assert!(
            !out.windows(f.len()).any(|w| w.eq_ignore_ascii_case(&f)),
            "{what}: {:?} survived in {:?}",
            String::from_utf8_lossy(&f),
            String::from_utf8_lossy(out)
        );
    }
}

#[test]
fn every_echo_is_scrubbed_whole_and_at_every_chunk_boundary() {
    for (what, form) in echoes(SECRET) {
        let mut text = b"before ".to_vec();
        text.extend_from_slice(&form);
        text.extend_from_slice(b" middle ");
        text.extend_from_slice(&form);
        text.extend_from_slice(b" after");
        let whole = scrub_stream(SECRET, &[&text]);
        assert_clean(&what, &whole, SECRET);
        assert!(
            String::from_utf8_lossy(&whole)
                .matches("[REDACTED:api]")
                .count()
                >= 2,
            "{what}: {}",
            String::from_utf8_lossy(&whole)
        );
        for split in 1..text.len() {
            let out = scrub_stream(SECRET, &[&text[..split], &text[split..]]);
            assert_clean(&format!("{what}, split at {split}"), &out, SECRET);
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_clean(
            &format!("{what}, byte by byte"),
            &scrub_stream(SECRET, &bytes),
            SECRET,
        );
    }
}

#[test]
fn text_around_the_secret_is_kept_exactly() {
    let text = format!("a{SECRET}b %41 \\u0041 {}", hex::encode("x"));
    assert_eq!(
        String::from_utf8(scrub_stream(SECRET, &[text.as_bytes()])).unwrap(),
        "a[REDACTED:api]b %41 \\u0041 78"
    );
    assert_eq!(
        scrub_stream(SECRET, &[b"no secret here }"]),
        b"no secret here }"
    );
}

#[test]
fn a_body_cut_mid_secret_drops_the_held_back_tail() {
    for cut in [MIN_PARTIAL, SECRET.len() / 2, SECRET.len() - 1] {
        let text = format!("{{\"token\": \"{}", &SECRET[..cut]);
        let out = scrub_stream(SECRET, &[text.as_bytes()]);
        let s = String::from_utf8_lossy(&out);
        assert_eq!(s, "{\"token\": \"[REDACTED:api]", "cut at {cut}");
        // The same through `scrub` of a complete (truncated) value.
        let r = Redactor::new(SECRET.as_bytes(), None, "api");
        assert!(!r.scrub_str(&text).contains(&SECRET[..cut]));
    }
    // base64 of the secret, cut: the run's beginning is dropped too.
    let b64 = STANDARD.encode(format!("Bearer {SECRET}"));
    let out = scrub_stream(SECRET, &[&b64.as_bytes()[..b64.len() / 2]]);
    assert!(String::from_utf8_lossy(&out).ends_with("[REDACTED:api]"));
}

#[test]
fn parsed_json_is_scrubbed_again() {
    let r = Redactor::new(SECRET.as_bytes(), None, "api");
    let mut v = serde_json::json!({"a": [SECRET, {"k": format!("x{SECRET}")}], SECRET: 1});
    r.scrub_json(&mut v);
    assert_clean("json", v.to_string().as_bytes(), SECRET);
    assert_eq!(v["a"][1]["k"], "x[REDACTED:api]");
}

#[test]
fn the_redactor_holds_no_secret_in_debug_and_an_empty_secret_scrubs_nothing() {
    let r = Redactor::new(SECRET.as_bytes(), Some("bot"), "api");
    assert!(!format!("{r:?}").contains("s3cr"));
    let mut e = Redactor::new(b"", None, "x");
    assert_eq!(e.push(b"abc"), b"abc");
    assert_eq!(e.finish(), b"");
    // A secret that is not UTF-8.
    let raw = [0xffu8, 0xfe, b'a', b'b', b'c', b'd', 0x80];
    let mut r = Redactor::new(&raw, None, "x");
    let mut text = b"<".to_vec();
    text.extend_from_slice(&raw);
    text.extend_from_slice(b">");
    let mut out = r.push(&text);
    out.extend(r.finish());
    assert_eq!(out, b"<[REDACTED:x]>");
}
