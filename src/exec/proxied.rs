//! A response for `vault run`'s proxy (a request a tool inside sent with a placeholder, issue
//! 47): handed back byte for byte, not as the tool's text. The status; every header but the
//! hop-by-hop ones, the framing (the proxy frames what it writes) and `Set-Cookie` (a session the
//! vault opened with the secret is the vault's), each value scrubbed; the body through the same
//! streaming scrubber as every output, whole up to `PROXIED_MAX_BYTES` or not at all (a body cut
//! short would be a corrupt file, not a shorter answer).
use super::bounded::Scrubber;
use super::Outcome;
use crate::approvals::State;
use base64::Engine;
use serde_json::json;
use std::io::Read;

/// Headers that end at the hop, or that the proxy sets itself.
const DROPPED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
    "set-cookie",
    "alt-svc",
];

/// Reads `response` whole (at most `max` bytes of body) through `scrubber`.
pub(super) fn read(
    mut response: ureq::http::Response<ureq::Body>,
    max: u64,
    mut scrubber: Scrubber,
) -> Outcome {
    let status = response.status().as_u16();
    let mut headers = Vec::new();
    for (name, value) in response.headers() {
        let n = name.as_str().to_ascii_lowercase();
        if DROPPED.contains(&n.as_str()) {
            continue;
        }
        let v = scrubber.scrub_str(&String::from_utf8_lossy(value.as_bytes()));
        // Scrubbing can only shorten a value or put the redaction mark in; a control character
        // cannot come in with it, but one the target sent is taken out (no header splitting).
        let v: String = v.chars().filter(|c| !c.is_control()).collect();
        headers.push(json!([n, scrubber.scrub_str(&v)]));
    }
    let mut reader = response.body_mut().with_config().limit(u64::MAX).reader();
    let mut body = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut seen, mut error) = (0u64, None);
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                seen += n as u64;
                if seen > max {
                    error = Some(format!(
                        "the response body is larger than the {max} bytes the vault relays"
                    ));
                    break;
                }
                body.extend_from_slice(&scrubber.push(&buf[..n]));
            }
            Err(e) => {
                error = Some(scrubber.scrub_str(&format!("the response body ended early: {e}")));
                break;
            }
        }
    }
    body.extend_from_slice(&scrubber.finish());
    let b64 = base64::engine::general_purpose::STANDARD;
    let result = json!({"proxied": {
        "status": status,
        "headers": headers,
        "body_base64": if error.is_none() { b64.encode(&body) } else { String::new() },
        "body_bytes_seen": seen,
        "whole": error.is_none(),
    }});
    Outcome {
        // The target answered (a status was observed), whatever became of the body.
        state: State::Completed,
        result,
        reason: error,
    }
}
