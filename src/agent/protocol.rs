//! The custody agent's wire protocol: versioned, newline-delimited JSON of typed requests and
//! replies (serde enums with unknown fields refused), a frame cap, and the line splitter both
//! ends use. Frames that may carry a secret (a person's `vault add`) are read into and wiped from
//! zeroizing buffers.
use crate::wire::NormalizedAction;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

pub use crate::wire::protocol::*;

impl ApprovalView {
    /// The normalized request, after checking that it hashes to the action's hash, that the body
    /// is the one it names, and that it is for the action's credential version: what an
    /// approver shows is then what it signs.
    pub fn verified_request(&self) -> Result<NormalizedAction, String> {
        let a = &self.action;
        let (normalized, hash) = crate::policy::read_normalized(&self.normalized)
            .ok_or_else(|| format!("action {} carries no readable request", a.id))?;
        if hash != a.action_hash {
            return Err(format!(
                "action {} does not match its hash; refusing to show or sign it",
                a.id
            ));
        }
        let body = match self.body_hex.as_deref().map(hex::decode) {
            None => None,
            Some(Ok(b)) => Some(b),
            Some(Err(_)) => return Err(format!("action {}'s body is malformed", a.id)),
        };
        let body_hash = body.as_ref().map(|b| blake3::hash(b).to_hex().to_string());
        let body_ok = match normalized.body_blake3() {
            Some(want) => want == body_hash.as_deref(),
            None => body.is_none(),
        };
        if !body_ok {
            return Err(format!(
                "action {}'s body is not the one its hash covers",
                a.id
            ));
        }
        let c = normalized.credential();
        if c.id != a.credential_id
            || c.version != a.credential_version
            || c.name != a.credential_name
        {
            return Err(format!(
                "action {} names another credential version than its request",
                a.id
            ));
        }
        Ok(normalized)
    }
}

/// One frame as a line, in a buffer that is wiped when dropped.
pub fn encode<T: Serialize>(frame: &T) -> Zeroizing<Vec<u8>> {
    let mut line = Zeroizing::new(Vec::with_capacity(256));
    serde_json::to_writer(&mut *line, frame).expect("protocol frames always serialize");
    line.push(b'\n');
    line
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame is longer than {MAX_FRAME} bytes")]
    TooLong,
    #[error("the frame is not a valid message: {0}")]
    Malformed(String),
}

/// Splits a byte stream into lines, refusing a line past `MAX_FRAME` as soon as it is too long.
/// The buffer is zeroized as it is consumed and when dropped.
#[derive(Default)]
pub struct Splitter {
    buf: Zeroizing<Vec<u8>>,
    /// How much of `buf` is known to hold no newline.
    scanned: usize,
}

impl Splitter {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line (without its `\n`), if one is buffered.
    pub fn next_line(&mut self) -> Result<Option<Zeroizing<Vec<u8>>>, FrameError> {
        match self.buf[self.scanned..].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let i = self.scanned + i;
                self.scanned = 0;
                let mut line = Zeroizing::new(self.buf[..i].to_vec());
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                let rest = self.buf[i + 1..].to_vec();
                self.buf.iter_mut().for_each(|b| *b = 0);
                *self.buf = rest;
                Ok(Some(line))
            }
            None if self.buf.len() > MAX_FRAME => Err(FrameError::TooLong),
            None => {
                self.scanned = self.buf.len();
                Ok(None)
            }
        }
    }
}

/// Parses one line as `T`.
pub fn decode<T: for<'de> Deserialize<'de>>(line: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(line).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_unknown_fields_are_refused() {
        let f = ClientFrame {
            id: 7,
            req: Request::Pause { reason: "x".into() },
        };
        let line = encode(&f);
        let back: ClientFrame = decode(&line[..line.len() - 1]).unwrap();
        assert!(matches!(back.req, Request::Pause { reason } if reason == "x"));
        for bad in [
            r#"{"id":1,"req":{"op":"pause","reason":"x","extra":1}}"#,
            r#"{"id":1,"req":{"op":"nope"}}"#,
            r#"{"id":1,"req":{"op":"pause","reason":"x"},"more":2}"#,
            r#"{"id":-1,"req":{"op":"status"}}"#,
        ] {
            assert!(decode::<ClientFrame>(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn splitter_caps_frames_and_keeps_the_rest() {
        let mut s = Splitter::default();
        s.push(b"ab\ncd");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"ab");
        assert!(s.next_line().unwrap().is_none());
        s.push(b"\n");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"cd");
        s.push(&vec![b'x'; MAX_FRAME + 1]);
        assert!(matches!(s.next_line(), Err(FrameError::TooLong)));
    }
}
