//! A response for `vault run`'s proxy (a request a tool inside sent with a placeholder, issue
//! 47): handed back byte for byte, not as the tool's text. The status; every header but the
//! hop-by-hop ones, the framing (the proxy frames what it writes) and `Set-Cookie` (a session the
//! vault opened with the secret is the vault's), each value scrubbed; the body through the same
//! streaming scrubber as every output, whole up to `PROXIED_MAX_BYTES` or not at all (a body cut
//! short would be a corrupt file, not a shorter answer). A body up to `INLINE_MAX_BYTES` goes
//! back in the agent's reply; a larger one is written to `<vault>/relayed/<action id>.body`
//! (`exec::relayed`), and the reply carries its length and blake3, which the proxy checks.
use super::bounded::Scrubber;
use super::Outcome;
use crate::approvals::State;
use base64::Engine;
use serde_json::json;
use std::io::{Read, Write};
use std::path::Path;

/// The largest body that goes back inside the agent's reply (a frame holds it in base64).
pub(super) const INLINE_MAX_BYTES: usize = 4 * 1024 * 1024;

/// The body as it is read: in memory, then (past the inline bound) in the action's file.
struct Body<'a> {
    inline: Vec<u8>,
    file: Option<std::fs::File>,
    spill: Option<&'a Path>,
    hash: blake3::Hasher,
    len: u64,
}

impl Body<'_> {
    fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.hash.update(bytes);
        self.len += bytes.len() as u64;
        if self.file.is_none() && self.inline.len() + bytes.len() <= INLINE_MAX_BYTES {
            self.inline.extend_from_slice(bytes);
            return Ok(());
        }
        let Some(spill) = self.spill else {
            return Err(format!(
                "the response body is larger than the {INLINE_MAX_BYTES} bytes the vault relays here"
            ));
        };
        let written = |e: std::io::Error| format!("cannot write the response body: {e}");
        let file = match &mut self.file {
            Some(f) => f,
            None => {
                let f = self.file.insert(super::relayed::new_file(spill)?);
                f.write_all(&std::mem::take(&mut self.inline))
                    .map_err(written)?;
                f
            }
        };
        file.write_all(bytes).map_err(written)
    }
}

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

/// Reads `response` whole (at most `max` bytes of body) through `scrubber`; past
/// `INLINE_MAX_BYTES`, into the file `spill` (without one, such a body is refused).
pub(super) fn read(
    mut response: ureq::http::Response<ureq::Body>,
    max: u64,
    mut scrubber: Scrubber,
    spill: Option<&Path>,
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
    let mut body = Body {
        inline: Vec::new(),
        file: None,
        spill,
        hash: blake3::Hasher::new(),
        len: 0,
    };
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
                if let Err(e) = body.push(&scrubber.push(&buf[..n])) {
                    error = Some(e);
                    break;
                }
            }
            Err(e) => {
                error = Some(scrubber.scrub_str(&format!("the response body ended early: {e}")));
                break;
            }
        }
    }
    if error.is_none() {
        error = body.push(&scrubber.finish()).err();
    }
    let spilled = body.file.is_some();
    if let Some(Err(e)) = body.file.as_mut().map(Write::flush) {
        error.get_or_insert(format!("cannot write the response body: {e}"));
    }
    let whole = error.is_none();
    if let (Some(path), true, false) = (spill, spilled, whole) {
        let _ = std::fs::remove_file(path);
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut proxied = json!({
        "status": status,
        "headers": headers,
        "body_base64": if whole { b64.encode(&body.inline) } else { String::new() },
        "body_bytes_seen": seen,
        "whole": whole,
    });
    // Spilled: the reply says how long the file is and what it holds; the proxy checks both.
    if whole && spilled {
        proxied["body_file_bytes"] = json!(body.len);
        proxied["body_file_blake3"] = json!(body.hash.finalize().to_hex().as_str());
    }
    let result = json!({ "proxied": proxied });
    Outcome {
        // The target answered (a status was observed), whatever became of the body.
        state: State::Completed,
        result,
        reason: error,
    }
}
