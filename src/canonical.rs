//! Canonical JSON: the one byte form that audit hashes and action hashes are computed over.
//!
//! Rules (also in docs/design.md §9): object keys sorted by their UTF-8 bytes at every level, no
//! whitespace, strings escaped as JSON requires and nothing more (`"` `\\` and U+0000..U+001F,
//! the latter as `\b \f \n \r \t` or `\u00xx` in lowercase hex), everything else as raw UTF-8.
//! Numbers are written as serde_json writes them; the vault only puts integers in hashed JSON.
use serde_json::Value;

/// The canonical bytes of a JSON value.
pub(crate) fn to_string(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(k, out);
                out.push(':');
                write_value(v, out);
            }
            out.push('}');
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sorts_keys_at_every_level_without_whitespace() {
        let v = json!({"b": 1, "a": {"z": [3, {"y": null, "x": true}], "c": "é\n\u{1}"}});
        assert_eq!(
            to_string(&v),
            r#"{"a":{"c":"é\n\u0001","z":[3,{"x":true,"y":null}]},"b":1}"#
        );
    }

    #[test]
    fn agrees_with_serde_json_on_strings() {
        for s in [
            "plain",
            "quote\"back\\slash",
            "tab\tnul\u{0}del\u{7f}",
            "\u{2028}",
        ] {
            let v = Value::String(s.to_owned());
            assert_eq!(to_string(&v), serde_json::to_string(&v).unwrap());
        }
    }
}
