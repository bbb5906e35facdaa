//! The network guard: after resolving, which addresses a credentialed request may reach.
//! Link-local and cloud-metadata addresses never; loopback, private and CGNAT ranges only when
//! the credential's own host names such an address. The checked addresses are then the only ones
//! the connection may use (a pinned resolver), so DNS rebinding cannot swap them.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

/// Why no address was acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuardError {
    #[error("cannot resolve {0}")]
    Resolve(String),
    #[error("{host} resolves to {addr}, which a credentialed request may not reach ({why})")]
    Forbidden {
        host: String,
        addr: IpAddr,
        why: &'static str,
    },
}

/// The address class of an IP.
pub fn classify(ip: IpAddr) -> Option<&'static str> {
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_link_local() || o == [169, 254, 169, 254] {
        Some("link-local / cloud metadata")
    } else if o == [100, 100, 100, 200] || o == [192, 0, 0, 192] {
        Some("cloud metadata")
    } else if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private network")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("carrier-grade NAT")
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if (s[0] & 0xffc0) == 0xfe80 || ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("link-local / cloud metadata")
    } else if ip.is_unspecified() || ip.is_multicast() {
        Some("not a unicast address")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private network")
    } else {
        None
    }
}

/// Resolves `host:port` and keeps only the addresses this credential may reach.
/// `credential_host` is the host as the person wrote it when adding the credential.
pub fn resolve_checked(
    host: &str,
    port: u16,
    credential_host: &str,
) -> Result<Vec<SocketAddr>, GuardError> {
    let literal: Option<IpAddr> = credential_host.parse().ok();
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| GuardError::Resolve(host.to_owned()))?
        .collect();
    if addrs.is_empty() {
        return Err(GuardError::Resolve(host.to_owned()));
    }
    let mut ok = Vec::new();
    let mut first_refusal = None;
    for a in addrs {
        let why = classify(a.ip());
        let allowed = match why {
            None => true,
            Some("link-local / cloud metadata")
            | Some("cloud metadata")
            | Some("not a unicast address") => false,
            // Loopback / private / CGNAT: only when the person bound the credential to that very address
            // (or to `localhost` for loopback).
            Some(class) => {
                literal == Some(a.ip()) || (class == "loopback" && credential_host == "localhost")
            }
        };
        if allowed {
            ok.push(a);
        } else if first_refusal.is_none() {
            first_refusal = Some(GuardError::Forbidden {
                host: host.to_owned(),
                addr: a.ip(),
                why: why.unwrap_or(""),
            });
        }
    }
    if ok.is_empty() {
        return Err(first_refusal.unwrap_or_else(|| GuardError::Resolve(host.to_owned())));
    }
    Ok(ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        for (ip, class) in [
            ("169.254.169.254", Some("link-local / cloud metadata")),
            ("fe80::1", Some("link-local / cloud metadata")),
            (
                "::ffff:169.254.169.254",
                Some("link-local / cloud metadata"),
            ),
            ("127.0.0.1", Some("loopback")),
            ("::1", Some("loopback")),
            ("10.1.2.3", Some("private network")),
            ("192.168.0.1", Some("private network")),
            ("100.64.0.1", Some("carrier-grade NAT")),
            ("fd12::1", Some("private network")),
            ("93.184.216.34", None),
            ("2606:4700::1111", None),
        ] {
            assert_eq!(classify(ip.parse().unwrap()), class, "{ip}");
        }
    }

    #[test]
    fn loopback_only_for_a_loopback_credential_and_metadata_never() {
        assert!(resolve_checked("127.0.0.1", 80, "127.0.0.1").is_ok());
        assert!(resolve_checked("127.0.0.1", 80, "api.example.com").is_err());
        assert!(resolve_checked("localhost", 80, "localhost").is_ok());
        assert!(matches!(
            resolve_checked("169.254.169.254", 80, "169.254.169.254"),
            Err(GuardError::Forbidden { .. })
        ));
    }
}
