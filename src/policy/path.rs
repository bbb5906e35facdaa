//! The path of a request URL, as the agent wrote it, in an explicit safe alphabet, so that no
//! server, proxy or framework between the vault and the target can normalise it into something
//! outside the credential's path prefix (Tomcat's `..;/`, double decoding of `%252e`, overlong
//! UTF-8 `%c0%ae`, IIS `%u002e` and `\`, fullwidth dots, `//`, NUL truncation, …).
//!
//! Allowed, byte by byte: ASCII letters and digits, `- . _ ~ ! $ & ' ( ) * + , = : @ /`, and
//! `%XX` escapes of printable ASCII other than `/ \ . % ;` and the unreserved characters (which
//! must be written plainly). Refused: `;` (path parameters), `\`, any other byte (non-ASCII,
//! controls, spaces), `%` not followed by two hex digits, escapes of bytes 0x00–0x1F and
//! 0x7F–0xFF, empty segments (`//`) and `.` / `..` segments. The URL parser then has nothing to
//! normalise: the path that is shown is the path that is sent.

/// Why a raw path was refused: (what is wrong, how to fix it).
pub(super) type PathRefusal = (String, &'static str);

/// The path of `raw` exactly as written: after `scheme://authority`, up to `?` or `#`. `None`
/// when `raw` does not start with `http://` or `https://` (any case) or has a `\` before the
/// end of its path.
pub(super) fn raw_path(raw: &str) -> Result<&str, PathRefusal> {
    let lower = raw.get(..8).unwrap_or(raw).to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &raw[8..]
    } else if lower.starts_with("http://") {
        &raw[7..]
    } else {
        return Err((
            "the URL does not start with http:// or https://".into(),
            "write an absolute URL: https://host/path",
        ));
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let upto_query = &rest[..end];
    if upto_query.contains('\\') {
        return Err((
            "the URL has a '\\' before its query".into(),
            "use '/' to separate path segments",
        ));
    }
    Ok(match upto_query.find('/') {
        Some(i) => &upto_query[i..],
        None => "",
    })
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Checks a raw path against the safe alphabet (see the module documentation).
pub(super) fn check(path: &str) -> Result<(), PathRefusal> {
    const PLAIN: &[u8] = b"-._~!$&'()*+,=:@/";
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() || PLAIN.contains(&c) {
            i += 1;
            continue;
        }
        if c == b';' {
            return Err((
                "the path has a ';' (a path parameter, which servers such as Tomcat strip before routing)".into(),
                "remove the ';'; if the target needs one, ask the person to use a credential for that path",
            ));
        }
        if c != b'%' {
            let shown = path[i..].chars().next().unwrap_or('?');
            return Err((
                format!(
                    "the path has the character U+{:04X}, outside the plain ASCII a path may use",
                    shown as u32
                ),
                "write the path in plain ASCII letters, digits and - . _ ~ / (percent-encode other printable ASCII)",
            ));
        }
        let v = match (b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (Some(h), Some(l)) => h * 16 + l,
            _ => {
                return Err((
                    "the path has a '%' that is not followed by two hex digits (%u.... is not an escape)".into(),
                    "percent-encode as %XX",
                ))
            }
        };
        let refused = match v {
            0x00..=0x1f | 0x7f..=0xff => {
                Some("a control or non-ASCII byte (overlong or multi-byte UTF-8)")
            }
            b'%' => Some("'%' (a double-encoded escape)"),
            b'/' | b'\\' => Some("a path separator"),
            b'.' => Some("'.'"),
            b';' => Some("';'"),
            v if v.is_ascii_alphanumeric() || b"-_~".contains(&v) => {
                Some("an unreserved character, which must be written plainly")
            }
            _ => None,
        };
        if let Some(what) = refused {
            return Err((
                format!("the path has {} encoded as {}", what, &path[i..i + 3]),
                "write the path plainly, without encoded separators, dots, '%' or non-ASCII bytes",
            ));
        }
        i += 3;
    }
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let last = segments.len().saturating_sub(1);
    for (n, s) in segments.iter().enumerate() {
        if *s == "." || *s == ".." {
            return Err((
                "the path has a . or .. segment".into(),
                "write the path without . and .. segments",
            ));
        }
        if s.is_empty() && n != last {
            return Err((
                "the path has an empty segment (//)".into(),
                "write the path with single slashes",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_path_is_what_follows_the_authority() {
        assert_eq!(raw_path("https://h/v1/x?q=/a").unwrap(), "/v1/x");
        assert_eq!(raw_path("HTTP://h:8/v1#f").unwrap(), "/v1");
        assert_eq!(raw_path("https://h").unwrap(), "");
        assert_eq!(raw_path("https://h?x").unwrap(), "");
        assert!(raw_path("https://h\\@e/v1").is_err());
        assert!(raw_path("http:h/v1").is_err());
        assert!(raw_path("//h/v1").is_err());
    }

    #[test]
    fn the_alphabet() {
        for ok in [
            "/",
            "",
            "/v1/",
            "/v1/items/42",
            "/a%20b/c%3Fd",
            "/x:y@z/(1)!",
            "/v1/%7B%7D",
        ] {
            assert!(check(ok).is_ok(), "{ok}");
        }
        for bad in [
            "/v1/..;/admin",
            "/v1/%252e%252e/admin",
            "/v1/%c0%ae%c0%ae/admin",
            "/v1/%u002e%u002e/admin",
            "/v1/..%2fadmin",
            "/v1/%5cadmin",
            "/v1/./admin",
            "/v1//admin",
            "/v1/\u{ff0e}\u{ff0e}/admin",
            "/v1/..%00/admin",
            "/v1/admin%2f",
            "/v1/%2e%2e/admin",
            "/v1/%76/x",
            "/v1/%41",
            "/xy%20%2e",
            "/v1/a%3Bb",
            "/v1/a%3bb",
            "/v1/a b",
            "/v1/%",
            "/v1/%4",
            "/v1/x/..",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }
}
