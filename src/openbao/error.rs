//! What can go wrong talking to OpenBao, one variant per thing the person does differently about
//! it. Every message names what failed and what to do next. No variant holds a secret: the
//! token, a secret_id and a KV value are never copied into an error, and OpenBao's own error text
//! is kept only after the values sent in that request were scrubbed out of it (`server_text`).

/// Why OpenBao said no (403, or AppRole's 400 for a refused login).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// AppRole refused the role_id/secret_id pair. OpenBao answers a wrong role_id, a wrong
    /// secret_id and an expired or used-up secret_id with the same words, so this cannot say
    /// which of them it was.
    Login,
    /// The token's policies do not allow the path, or the token expired or was revoked (OpenBao
    /// answers all three with "permission denied").
    Permission,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OpenBao at {address} is unreachable: {why}. Check that the server runs and that the address is right, then try again")]
    Unreachable { address: String, why: &'static str },

    #[error("the TLS connection to OpenBao at {address} failed: {why}. If the server's certificate comes from a private CA, give that CA's certificate as the CA file")]
    Tls { address: String, why: &'static str },

    #[error("OpenBao at {address} is sealed, so it answers nothing. An operator must unseal it (`bao operator unseal`); nothing was read or written")]
    Sealed { address: String },

    #[error("{}", forbidden_text(.path, *.refusal))]
    Forbidden { path: String, refusal: Refusal },

    #[error("OpenBao has nothing at {path}{}. Check the mount and the path (and that the KV mount is version 2)", .detail.as_deref().map(|d| format!(" ({d})")).unwrap_or_default())]
    NotFound {
        path: String,
        detail: Option<String>,
    },

    #[error("the secret at {path} (KV version {version}) has no field `{field}`{}. Name one of its fields after `#`, or add the field in OpenBao", fields_text(.fields))]
    MissingField {
        path: String,
        version: u64,
        field: String,
        /// The names of the fields it has (names only, never values).
        fields: Vec<String>,
    },

    #[error("OpenBao refused the write to {path}: check-and-set expected version {cas}, but the secret has moved on. Read its metadata again and retry with the current version")]
    CasMismatch { path: String, cas: u64 },

    #[error("OpenBao answered {status} to {method} {path}: {message}. Check the request against the OpenBao admin's configuration for that path")]
    Http {
        method: &'static str,
        path: String,
        status: u16,
        /// OpenBao's own error text, scrubbed of the request's secrets and bounded.
        message: String,
    },

    #[error("OpenBao's answer to {path} was not understood: {what}. Check that the address points at OpenBao (or HashiCorp Vault) and not at another server")]
    Unexpected { path: String, what: String },

    #[error("the OpenBao address {address:?} is not usable: {why}")]
    BadAddress { address: String, why: &'static str },

    #[error("the OpenBao path {path:?} is not usable: {why}")]
    BadPath { path: String, why: &'static str },

    #[error("cannot use the CA file {path}: {why}")]
    CaFile { path: String, why: String },
}

fn forbidden_text(path: &str, refusal: Refusal) -> String {
    match refusal {
        Refusal::Login => format!(
            "OpenBao refused the AppRole login at {path}: the role_id or the secret_id is wrong, \
             or the secret_id expired or was used up (OpenBao does not say which). Ask the \
             OpenBao admin for a new secret_id and log in again"
        ),
        Refusal::Permission => format!(
            "OpenBao denied access to {path}: the token's policies do not allow it, or the token \
             expired or was revoked. Log in again; if that does not help, ask the OpenBao admin \
             to grant the path to the role's policy"
        ),
    }
}

fn fields_text(fields: &[String]) -> String {
    if fields.is_empty() {
        " (it has no fields)".to_owned()
    } else {
        format!(" (its fields: {})", fields.join(", "))
    }
}

/// OpenBao's `{"errors": [...]}` as one line: control characters dropped, every secret sent in
/// the request replaced (a server may quote its input back), and at most 300 characters.
pub(super) fn server_text(body: &[u8], secrets: &[&str]) -> String {
    #[derive(serde::Deserialize)]
    struct Errors {
        #[serde(default)]
        errors: Vec<String>,
    }
    let joined = match serde_json::from_slice::<Errors>(body) {
        Ok(e) if !e.errors.is_empty() => e.errors.join("; "),
        Ok(_) => return "(no error text)".to_owned(),
        Err(_) => return "(an answer that is not OpenBao's JSON)".to_owned(),
    };
    let mut text: String = joined
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        text = text.replace(s, "[REDACTED]");
    }
    if text.chars().count() > 300 {
        text = text.chars().take(300).collect::<String>() + "…";
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_scrubs_the_request_secrets_and_bounds_the_text() {
        let body = br#"{"errors":["bad value s3cr3t-decoy\n\tin request", "second"]}"#;
        let t = server_text(body, &["s3cr3t-decoy"]);
        assert_eq!(t, "bad value [REDACTED] in request; second");
        let long = format!(r#"{{"errors":["{}"]}}"#, "x".repeat(1000));
        assert!(server_text(long.as_bytes(), &[]).chars().count() <= 301);
        assert_eq!(
            server_text(b"<html>", &[]),
            "(an answer that is not OpenBao's JSON)"
        );
    }

    #[test]
    fn each_message_says_what_to_do_next() {
        let e = Error::MissingField {
            path: "secret/data/app".into(),
            version: 2,
            field: "token".into(),
            fields: vec!["user".into()],
        };
        let t = e.to_string();
        assert!(t.contains("`token`") && t.contains("its fields: user") && t.contains("version 2"));
        let f = Error::Forbidden {
            path: "auth/approle/login".into(),
            refusal: Refusal::Login,
        };
        assert!(f.to_string().contains("new secret_id"), "{f}");
    }
}
