//! Team mode's secret reference, `openbao:MOUNT/PATH#FIELD`: parsing what a person types and
//! checking a stored one, so only a plain KV v2 path (no `..`, no query, no control characters)
//! ever reaches the OpenBao client.
use super::{invalid, CredentialError};
use crate::wire::OpenBaoRef;

/// The scheme that marks a reference rather than a source read once.
pub const SCHEME: &str = "openbao:";

/// `openbao:MOUNT/PATH#FIELD` → the reference (the mount is the first path segment).
pub fn parse(text: &str) -> Result<OpenBaoRef, CredentialError> {
    let bad = |why: &str| {
        invalid(
            "--secret-from",
            format!("{text:?} is not openbao:MOUNT/PATH#FIELD ({why}), e.g. openbao:secret/team/github#token"),
        )
    };
    let rest = text
        .strip_prefix(SCHEME)
        .ok_or_else(|| bad("no openbao: prefix"))?;
    let (location, field) = rest.rsplit_once('#').ok_or_else(|| bad("no #FIELD"))?;
    let (mount, path) = location
        .split_once('/')
        .ok_or_else(|| bad("no PATH after the mount"))?;
    let r = OpenBaoRef {
        mount: mount.to_owned(),
        path: path.to_owned(),
        field: field.to_owned(),
    };
    check(&r)?;
    Ok(r)
}

/// Each of mount and path is segments of letters, digits, `.`, `_`, `-` (never `.` or `..`
/// alone); the field is 1-128 printable characters without `/`, `#` or `?`.
pub fn check(r: &OpenBaoRef) -> Result<(), CredentialError> {
    let segment = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.len() <= 128
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
    };
    if !segment(&r.mount) {
        return Err(invalid(
            "--secret-from",
            format!(
                "the mount {:?} must be one path segment of letters, digits, '.', '_' or '-'",
                r.mount
            ),
        ));
    }
    if r.path.len() > 512 || !r.path.split('/').all(segment) {
        return Err(invalid(
            "--secret-from",
            format!("the path {:?} must be segments of letters, digits, '.', '_' or '-' separated by '/'", r.path),
        ));
    }
    let field_ok = !r.field.is_empty()
        && r.field.len() <= 128
        && r.field
            .chars()
            .all(|c| !c.is_control() && !matches!(c, '/' | '#' | '?'));
    if !field_ok {
        return Err(invalid(
            "--secret-from",
            format!(
                "the field {:?} must be 1-128 printable characters without '/', '#' or '?'",
                r.field
            ),
        ));
    }
    Ok(())
}

/// `openbao:MOUNT/sign/ROLE` → (mount, role): where the team's SSH CA signs certificates.
pub fn parse_cert(text: &str) -> Result<(String, String), CredentialError> {
    let bad = || {
        invalid(
            "--cert-from",
            format!("{text:?} is not openbao:MOUNT/sign/ROLE, e.g. openbao:ssh/sign/deploy"),
        )
    };
    let rest = text.strip_prefix(SCHEME).ok_or_else(bad)?;
    let mut parts = rest.split('/');
    let (Some(mount), Some("sign"), Some(role), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    check_cert(mount, role)?;
    Ok((mount.to_owned(), role.to_owned()))
}

/// A mount and a role are each one segment of letters, digits, `.`, `_`, `-`.
pub fn check_cert(mount: &str, role: &str) -> Result<(), CredentialError> {
    for (what, s) in [("mount", mount), ("role", role)] {
        if !is_segment(s) {
            return Err(invalid(
                "--cert-from",
                format!(
                    "the {what} {s:?} must be one path segment of letters, digits, '.', '_' or '-'"
                ),
            ));
        }
    }
    Ok(())
}

fn is_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.len() <= 128
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_bad_ones_say_why() {
        let r = parse("openbao:secret/team/github#token").unwrap();
        assert_eq!(
            (r.mount.as_str(), r.path.as_str(), r.field.as_str()),
            ("secret", "team/github", "token")
        );
        assert_eq!(r.to_string(), "openbao:secret/team/github#token");
        for bad in [
            "env:x#y",
            "openbao:secret#token",
            "openbao:secret/team",
            "openbao:secret/../sys#token",
            "openbao:secret/a//b#token",
            "openbao:secret/a?list=1#t",
            "openbao:secret/a#",
            "openbao:/a#t",
        ] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains("--secret-from"), "{bad}: {e}");
        }
        assert_eq!(
            parse_cert("openbao:ssh/sign/deploy").unwrap(),
            ("ssh".into(), "deploy".into())
        );
        for bad in [
            "openbao:ssh/deploy",
            "openbao:ssh/sign/a/b",
            "openbao:ssh/issue/x",
            "ssh/sign/x",
        ] {
            assert!(
                parse_cert(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("--cert-from"),
                "{bad}"
            );
        }
    }
}
