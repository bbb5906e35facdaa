//! Escaping agent-derived text before it reaches a terminal, so nothing an agent wrote can move
//! the cursor, repaint a line, retitle the window or reorder what a person reads.
//!
//! One rule for every terminal output (the approval card and its full view, notes, `notify-send`
//! arguments, `vault pending`, `vault log`, `vault sessions`): C0 and C1 controls, DEL (so ESC and
//! every escape sequence it would start), line and paragraph separators, and Unicode format
//! characters (general category `Cf`: the bidi embeddings, overrides and isolates U+202A–U+202E,
//! U+2066–U+2069, the marks U+200E/U+200F/U+061C, zero-width characters U+200B–U+200D, U+2060–
//! U+2064, U+FEFF, tag characters, …) are shown as visible escapes such as `\u{202e}`. Nothing is
//! dropped: the person sees that something was there.

/// Whether `c` must be shown escaped: a control (C0, DEL, C1), a line/paragraph separator, or a
/// format (`Cf`) character.
pub fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') || is_format(c)
}

/// Whether `c` is a control character (C0, DEL or C1): refused in agent fields that reach a
/// terminal, such as header values, URLs and query parameters.
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// Unicode general category `Cf` (format characters), as of Unicode 16.
pub fn is_format(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x0600..=0x0605
            | 0x061C
            | 0x06DD
            | 0x070F
            | 0x0890..=0x0891
            | 0x08E2
            | 0x180E
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x2064
            | 0x2066..=0x206F
            | 0xFEFF
            | 0xFFF9..=0xFFFB
            | 0x110BD
            | 0x110CD
            | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3
            | 0x1D173..=0x1D17A
            | 0xE0001
            | 0xE0020..=0xE007F
    )
}

fn push_escaped(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
    }
}

/// `s` on one line, every character of `needs_escape` (newlines and tabs included) escaped.
pub fn escape(s: &str) -> String {
    if crate::mutation::off("term_escape") {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Like `escape`, but `\n` stays a line break (each line still escaped): for multi-line text
/// that the caller indents or frames so that a line of it cannot pass for the caller's own.
pub fn escape_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '\n' {
            out.push('\n');
        } else if needs_escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `s` holds nothing that `escape` would change.
pub fn is_plain(s: &str) -> bool {
    !s.chars().any(needs_escape)
}

/// Most bytes of text a request body may take when shown to a person (`show_body`): the approval
/// card's full view shows a body whole, and nobody can approve what they cannot read. A request
/// whose body shows longer is refused at submission when it may need a card.
pub const MAX_SHOWN_BODY_BYTES: usize = 16 * 1024;

/// A request body as a person reads it. When it is JSON that re-serializes to exactly these bytes
/// (as every `json` argument does), it is indented two spaces per level with keys and strings in
/// JSON quotes (`"` and `\` inside a string escaped as in JSON) and only control and format
/// characters escaped; anything else is shown as text, line by line, escaped (`escape_lines`).
/// Lossless either way: a duplicate key or a number that does not round-trip shows as text.
pub fn show_body(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) {
        if serde_json::to_vec(&v).is_ok_and(|again| again == body) {
            let mut out = String::with_capacity(body.len() * 2);
            pretty(&v, 0, &mut out);
            return out;
        }
    }
    escape_lines(&String::from_utf8_lossy(body))
}

fn quoted(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if needs_escape(c) => push_escaped(out, c),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn pretty(v: &serde_json::Value, depth: usize, out: &mut String) {
    use serde_json::Value;
    let indent = |out: &mut String, d: usize| out.extend(std::iter::repeat_n("  ", d));
    match v {
        Value::String(s) => quoted(s, out),
        Value::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                indent(out, depth + 1);
                pretty(item, depth + 1, out);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push_str("{\n");
            for (i, (k, item)) in map.iter().enumerate() {
                indent(out, depth + 1);
                quoted(k, out);
                out.push_str(": ");
                pretty(item, depth + 1, out);
                out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
            }
            indent(out, depth);
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_escapes_and_bidi_are_visible() {
        assert_eq!(
            escape("a\r\u{1b}[2K\u{1b}[1Ab"),
            "a\\r\\u{1b}[2K\\u{1b}[1Ab"
        );
        assert_eq!(escape("x\u{7f}\u{9b}31m"), "x\\u{7f}\\u{9b}31m");
        assert_eq!(escape("evil\u{202e}gpj.exe"), "evil\\u{202e}gpj.exe");
        for c in [
            '\u{202a}',
            '\u{202d}',
            '\u{2066}',
            '\u{2069}',
            '\u{200b}',
            '\u{200f}',
            '\u{feff}',
            '\u{61c}',
            '\u{2028}',
            '\u{e0041}',
            '\u{ad}',
        ] {
            assert!(needs_escape(c), "{:x}", c as u32);
            assert!(!escape(&c.to_string()).contains(c));
        }
        assert_eq!(escape("héllo 世界 ok"), "héllo 世界 ok");
        assert_eq!(escape_lines("a\nb\u{1b}c"), "a\nb\\u{1b}c");
        assert!(is_plain("GET https://x/y"));
        assert_eq!(
            show_body(
                &serde_json::to_vec(
                    &serde_json::json!({"a": [1, {"b": "x\"y\u{1b}\u{202e}"}], "e": {}, "n": null})
                )
                .unwrap()
            ),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x\\\"y\\u{1b}\\u{202e}\"\n    }\n  ],\n  \"e\": {},\n  \"n\": null\n}"
        );
        // Not byte-for-byte JSON (a duplicate key, spacing): shown as the text it is.
        assert_eq!(show_body(br#"{"a":1,"a":2}"#), r#"{"a":1,"a":2}"#);
        assert_eq!(show_body(b"x=1\r\ny"), "x=1\\r\ny");
        assert!(!is_plain("a\u{202e}"));
    }
}
