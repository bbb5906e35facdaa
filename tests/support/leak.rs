//! Every form a decoy secret could leak in, and the search for them: shared by the leak sweep
//! (`tests/leak_sweep.rs`) and the import sweep (`tests/import.rs`).
use base64::Engine;

/// Every form of `secret` to search for: (label, bytes, compare ASCII case-insensitively).
pub fn forms(secret: &[u8]) -> Vec<(String, Vec<u8>, bool)> {
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let text = String::from_utf8_lossy(secret);
    let mut out = vec![("raw".to_owned(), secret.to_vec(), false)];
    for (name, engine) in [
        ("standard", &STANDARD_NO_PAD),
        ("url-safe", &URL_SAFE_NO_PAD),
    ] {
        for k in 0..3usize {
            // The base64 characters that depend only on the secret at this byte alignment.
            let mut data = vec![0u8; k];
            data.extend_from_slice(secret);
            let enc = engine.encode(&data);
            let (start, end) = ((8 * k).div_ceil(6), 8 * (k + secret.len()) / 6);
            out.push((
                format!("base64 {name} at offset {k}"),
                enc.as_bytes()[start..end].to_vec(),
                false,
            ));
        }
    }
    let pct: String = secret.iter().map(|b| format!("%{b:02X}")).collect();
    out.push(("percent (any case)".into(), pct.into_bytes(), true));
    let partial = percent_encoding::percent_encode(secret, percent_encoding::NON_ALPHANUMERIC);
    out.push((
        "percent, partial".into(),
        partial.to_string().into_bytes(),
        true,
    ));
    let form: String = url::form_urlencoded::byte_serialize(secret).collect();
    out.push(("form-encoded".into(), form.into_bytes(), false));
    // A secret holding `"`, `\` or a control character is escaped in any JSON output.
    if let Ok(utf8) = std::str::from_utf8(secret) {
        let escaped = serde_json::to_string(utf8).unwrap();
        let escaped = &escaped[1..escaped.len() - 1];
        if escaped != utf8 {
            out.push(("JSON-escaped".into(), escaped.as_bytes().to_vec(), false));
        }
    }
    let json_u: String = text.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
    out.push(("JSON \\u-escaped".into(), json_u.into_bytes(), true));
    out.push(("hex".into(), hex::encode(secret).into_bytes(), true));
    out
}

/// Panics if any form of any decoy occurs in `haystack`.
#[track_caller]
pub fn assert_clean(what: &str, haystack: &[u8], decoys: &[(&str, Vec<u8>)]) {
    // Case-folded forms are searched in the lowercased haystack (the same match as
    // `eq_ignore_ascii_case` at every offset), with memchr's substring search.
    let lower = haystack.to_ascii_lowercase();
    for (kind, secret) in decoys {
        for (form, needle, fold) in forms(secret) {
            let hit = if fold {
                memchr::memmem::find(&lower, &needle.to_ascii_lowercase()).is_some()
            } else {
                memchr::memmem::find(haystack, &needle).is_some()
            };
            assert!(!hit, "{what} holds the {kind} secret ({form})");
        }
    }
}
