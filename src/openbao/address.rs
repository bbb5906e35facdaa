//! Where requests go: the server's address (https, or http for loopback only), the TLS roots
//! that verify it (the platform's, or a private CA's file), and API paths built from a
//! reference's mount and path so that they cannot leave the mount.

use super::Error;

/// `scheme://host[:port]` from the address: https, or http for a loopback host only; no path
/// beyond `/`, no query, fragment or user info.
pub(super) fn check_address(address: &str) -> Result<String, Error> {
    let bad = |why| Error::BadAddress {
        address: address.to_owned(),
        why,
    };
    let url = url::Url::parse(address.trim()).map_err(|_| bad("it is not a URL"))?;
    let host = url.host_str().ok_or_else(|| bad("it names no host"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(host) => {}
        "http" => {
            return Err(bad(
                "plain http:// is allowed only for a loopback host; use https://",
            ))
        }
        _ => return Err(bad("it must start with https://")),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("it must not hold a user name or password"));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(bad(
            "it must be only scheme://host[:port], without a path (the client adds /v1/)",
        ));
    }
    Ok(url.origin().ascii_serialization())
}

fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The TLS roots: the CA file's certificates, else the platform's verifier.
pub(super) fn tls_config(ca_file: Option<&std::path::Path>) -> Result<ureq::tls::TlsConfig, Error> {
    let tls = ureq::tls::TlsConfig::builder();
    let Some(ca) = ca_file else {
        return Ok(tls
            .root_certs(ureq::tls::RootCerts::PlatformVerifier)
            .build());
    };
    let bad = |why: String| Error::CaFile {
        path: ca.display().to_string(),
        why,
    };
    let pem = std::fs::read(ca).map_err(|e| bad(e.to_string()))?;
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(Result::ok)
        .filter_map(|item| match item {
            ureq::tls::PemItem::Certificate(c) => Some(c),
            _ => None,
        })
        .collect();
    if certs.is_empty() {
        return Err(bad("it holds no PEM certificate".to_owned()));
    }
    Ok(tls
        .root_certs(ureq::tls::RootCerts::new_with_certs(&certs))
        .build())
}

/// `MOUNT/<kind>/PATH` (or `MOUNT/PATH` without a kind) with each segment percent-encoded;
/// refuses empty, `.` and `..` segments so a reference cannot reach outside its mount.
pub(super) fn api_path(mount: &str, kind: Option<&str>, path: &str) -> Result<String, Error> {
    let mut out = segments(mount)?;
    out.extend(kind.map(str::to_owned));
    out.extend(segments(path)?);
    Ok(out.join("/"))
}

fn segments(part: &str) -> Result<Vec<String>, Error> {
    part.trim_matches('/')
        .split('/')
        .map(|s| {
            let why = match s {
                "" => "it has an empty segment",
                "." | ".." => "it has a `.` or `..` segment",
                s if s.chars().any(char::is_control) => "it holds a control character",
                s => return Ok(percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()),
            };
            Err(Error::BadPath {
                path: part.to_owned(),
                why,
            })
        })
        .collect()
}

/// Everything but RFC 3986's unreserved characters is encoded in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_https_or_loopback_http_and_only_an_origin() {
        assert_eq!(
            check_address("https://bao.example:8200/").unwrap(),
            "https://bao.example:8200"
        );
        assert_eq!(
            check_address("http://127.0.0.1:8200").unwrap(),
            "http://127.0.0.1:8200"
        );
        assert_eq!(
            check_address("http://[::1]:8200").unwrap(),
            "http://[::1]:8200"
        );
        for bad in [
            "http://bao.example:8200",
            "ftp://bao.example",
            "https://bao.example/v1",
            "https://u:p@bao.example",
            "https://bao.example/?x=1",
            "bao.example",
        ] {
            assert!(
                matches!(check_address(bad), Err(Error::BadAddress { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn api_paths_stay_inside_their_mount() {
        assert_eq!(
            api_path("secret", Some("data"), "team/api key").unwrap(),
            "secret/data/team/api%20key"
        );
        assert_eq!(
            api_path("ssh", Some("sign"), "dev").unwrap(),
            "ssh/sign/dev"
        );
        for bad in ["../sys/seal", "a//b", "a/./b", ""] {
            assert!(
                matches!(
                    api_path("secret", Some("data"), bad),
                    Err(Error::BadPath { .. })
                ),
                "{bad}"
            );
        }
    }
}
