//! The custody agent's wire protocol: versioned, newline-delimited JSON of typed requests and
//! replies (serde enums with unknown fields refused), a frame cap, and the splitter both ends use
//! (lines, and the encrypted channel's length-prefixed messages). Frames that may carry a secret
//! (a person's `vault add`) are read into and wiped from zeroizing buffers.
use crate::wire::NormalizedAction;
use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

pub use crate::wire::protocol::*;
/// Types the frames carry, for the agent's clients.
pub use crate::wire::{ClientInfo, State};

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
        let body_ok = match (normalized.body_blake3(), self.body_withheld_bytes) {
            // Withheld, too large for a frame, where the hash covers a body: it cannot be
            // checked here, and the card cannot be approved (`CardData::approvable`); the agent
            // checks it before sending. Sent and withheld at once is no view the agent gives.
            (Some(Some(_)), Some(_)) => body.is_none(),
            (Some(want), None) => want == body_hash.as_deref(),
            (Some(None), Some(_)) => false,
            (None, withheld) => body.is_none() && withheld.is_none(),
        };
        if !body_ok {
            return Err(format!(
                "action {}'s body is not the one its hash covers",
                a.id
            ));
        }
        let (id, version, name) = match normalized.credential() {
            Some(c) => (c.id.as_str(), c.version, c.name.as_str()),
            None => ("", 0, ""),
        };
        if id != a.credential_id || version != a.credential_version || name != a.credential_name {
            return Err(format!(
                "action {} names another credential version than its request",
                a.id
            ));
        }
        Ok(normalized)
    }
}

/// One frame as a line, in a buffer that is wiped when dropped (and as it grows).
pub fn encode<T: Serialize>(frame: &T) -> Zeroizing<Vec<u8>> {
    let mut line = Zeroizing::new(Vec::with_capacity(256));
    serde_json::to_writer(Wiped(&mut line), frame).expect("protocol frames always serialize");
    reserve_wiped(&mut line, 1);
    line.push(b'\n');
    line
}

/// Makes room for `more` bytes in `buf` without leaving a copy behind: a `Vec` that outgrows
/// its allocation moves to a new one and frees the old unwiped, so this moves it by hand (at
/// least doubling, as `Vec` would) and lets the old buffer be wiped as it drops.
pub fn reserve_wiped(buf: &mut Zeroizing<Vec<u8>>, more: usize) {
    let need = buf.len().saturating_add(more);
    if need <= buf.capacity() {
        return;
    }
    let mut grown = Zeroizing::new(Vec::with_capacity(need.max(buf.capacity() * 2)));
    grown.extend_from_slice(buf);
    std::mem::swap(buf, &mut grown);
}

/// An `io::Write` into a zeroizing buffer that grows with `reserve_wiped`.
struct Wiped<'a>(&'a mut Zeroizing<Vec<u8>>);

impl std::io::Write for Wiped<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        reserve_wiped(self.0, bytes.len());
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("a frame is longer than {MAX_FRAME} bytes")]
    TooLong,
    #[error("the frame is not a valid message: {0}")]
    Malformed(String),
}

/// Splits a byte stream into lines (refusing a line past `MAX_FRAME` as soon as it is too
/// long) or, once a connection runs over the encrypted channel, into its length-prefixed
/// messages (`next_sealed`). Bytes are wiped as they are consumed, as the buffer grows and when
/// it is dropped.
#[derive(Default)]
pub struct Splitter {
    buf: Zeroizing<Vec<u8>>,
    /// Where the unconsumed bytes start; everything before is already wiped.
    start: usize,
    /// How much of the unconsumed bytes is known to hold no newline.
    scanned: usize,
}

impl Splitter {
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.buf.len() + bytes.len() > self.buf.capacity() {
            // Move the unconsumed bytes to the front rather than grow.
            let (len, start) = (self.buf.len(), self.start);
            self.buf.copy_within(start.., 0);
            self.buf[len - start..].fill(0);
            self.buf.truncate(len - start);
            self.start = 0;
        }
        reserve_wiped(&mut self.buf, bytes.len());
        self.buf.extend_from_slice(bytes);
    }

    /// Takes `n` bytes from the front, wiping them; `skip` more are wiped and dropped.
    fn take(&mut self, n: usize, skip: usize) -> Zeroizing<Vec<u8>> {
        let (from, to) = (self.start, self.start + n);
        let taken = Zeroizing::new(self.buf[from..to].to_vec());
        self.buf[from..to + skip].fill(0);
        self.start = to + skip;
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        taken
    }

    /// The next complete line (without its `\n`), if one is buffered.
    pub fn next_line(&mut self) -> Result<Option<Zeroizing<Vec<u8>>>, FrameError> {
        let rest = &self.buf[self.start..];
        match memchr::memchr(b'\n', &rest[self.scanned..]) {
            Some(i) => {
                let i = self.scanned + i;
                self.scanned = 0;
                let mut line = self.take(i, 1);
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                Ok(Some(line))
            }
            None if rest.len() > MAX_FRAME => Err(FrameError::TooLong),
            None => {
                self.scanned = rest.len();
                Ok(None)
            }
        }
    }

    /// The next whole message of the encrypted channel (a big-endian `u16` length, then that
    /// many bytes; the length is not returned), if one is buffered.
    pub fn next_sealed(&mut self) -> Option<Zeroizing<Vec<u8>>> {
        let rest = &self.buf[self.start..];
        let n = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
        if rest.len() < 2 + n {
            return None;
        }
        self.scanned = 0;
        // The length goes too, wiped like the rest of what was consumed.
        self.buf[self.start..self.start + 2].fill(0);
        self.start += 2;
        Some(self.take(n, 0))
    }
}

/// Parses one line as `T`.
pub fn decode<T: for<'de> Deserialize<'de>>(line: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(line).map_err(|e| FrameError::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The view of an HTTP action whose normalized request names `body_blake3`, with the body
    /// sent as `body_hex` or withheld for its size (`withheld`).
    fn view(body_blake3: Option<&str>, body: Option<&[u8]>, withheld: Option<u64>) -> ApprovalView {
        let mut n = serde_json::json!({"kind": "http", "method": "PUT", "url": "https://h/x",
            "headers": [], "timeout_s": 30, "max_output_bytes": 65536, "proxied": true,
            "credential": {"id": "cred_1", "version": 1, "name": "git", "profile": "default"}});
        if let Some(b) = body_blake3 {
            n["body_blake3"] = serde_json::json!(b);
        }
        let normalized =
            crate::policy::canonical_text(&serde_json::from_value(n).expect("a normalized action"));
        let at = "2026-12-07T00:00:00Z".to_owned();
        ApprovalView {
            action: crate::wire::Action {
                id: "act_1".into(),
                session_id: "ses_1".into(),
                client: "git (network)".into(),
                profile: "default".into(),
                tool: "http_request".into(),
                credential_id: "cred_1".into(),
                credential_name: "git".into(),
                credential_version: 1,
                state: State::Pending,
                summary: "PUT https://h/x".into(),
                action_hash: crate::policy::hash_of_text(&normalized),
                created_at: at.clone(),
                updated_at: at.clone(),
                expires_at: at,
                reason: None,
                result: None,
            },
            normalized,
            body_hex: body.map(hex::encode),
            body_withheld_bytes: withheld,
            session: None,
            changed: None,
            policy: None,
            touch_keys: None,
        }
    }

    /// A body withheld for its size passes the approver's check only where the request's hash
    /// covers a body; a body that is sent is always held to that hash.
    #[test]
    fn a_withheld_body_is_accepted_only_where_the_hash_covers_one() {
        let body = b"\x00pack";
        let hash = blake3::hash(body).to_hex().to_string();
        assert!(view(Some(&hash), Some(body), None)
            .verified_request()
            .is_ok());
        assert!(view(Some(&hash), None, Some(6_000_000))
            .verified_request()
            .is_ok());
        // Withheld where the request names no body, or named and neither sent nor withheld.
        assert!(view(None, None, Some(6_000_000))
            .verified_request()
            .is_err());
        assert!(view(Some(&hash), None, None).verified_request().is_err());
        // Sent and withheld at once, even the hash's own body.
        assert!(view(Some(&hash), Some(b"other"), Some(5))
            .verified_request()
            .is_err());
        assert!(view(Some(&hash), Some(body), Some(6))
            .verified_request()
            .is_err());
        assert!(view(None, None, None).verified_request().is_ok());
    }

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

    #[test]
    fn sealed_messages_are_split_by_their_length_and_wait_for_their_last_byte() {
        let mut s = Splitter::default();
        s.push(b"{\"open\":1}\n\x00\x03ab");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"{\"open\":1}");
        assert!(s.next_sealed().is_none(), "one byte short");
        s.push(b"c\x00");
        assert_eq!(&s.next_sealed().unwrap()[..], b"abc");
        assert!(s.next_sealed().is_none(), "half a length");
        s.push(b"\x00\xff\xff");
        assert_eq!(
            &s.next_sealed().unwrap()[..],
            b"",
            "an empty message is split, not refused here"
        );
        s.push(&[0xff; 100]);
        assert!(s.next_sealed().is_none());
        s.push(&vec![7; 65535 - 99]);
        let m = s.next_sealed().unwrap();
        assert_eq!((m.len(), m[0], m[65534]), (65535, 0xff, 7));
    }

    #[test]
    fn a_sealed_message_and_its_length_are_wiped_once_taken() {
        let mut s = Splitter::default();
        s.push(b"\x00\x02hi\x00\x05");
        assert_eq!(&s.next_sealed().unwrap()[..], b"hi");
        assert_eq!(s.start, 4);
        assert!(
            s.buf[..4].iter().all(|&b| b == 0),
            "length and message wiped"
        );
    }

    #[test]
    fn the_splitter_wipes_what_it_consumed_and_keeps_the_rest_in_order() {
        let mut s = Splitter::default();
        s.push(b"secret-one\nsecret-two\npart");
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"secret-one");
        let (start, buf) = (s.start, &s.buf[..]);
        assert_eq!(start, 11);
        assert!(
            buf[..start].iter().all(|&b| b == 0),
            "consumed bytes are wiped"
        );
        // Pushing past the capacity moves the rest to the front instead of growing.
        let cap = s.buf.capacity();
        s.push(&vec![b'y'; cap - s.buf.len() + 1]);
        assert_eq!(s.start, 0);
        assert_eq!(&s.next_line().unwrap().unwrap()[..], b"secret-two");
        s.push(b"\n");
        let last = s.next_line().unwrap().unwrap();
        assert!(last.starts_with(b"party"));
        assert_eq!(s.buf.len(), 0);
    }

    #[test]
    fn reserve_wiped_keeps_the_bytes_and_at_least_doubles() {
        let mut v = Zeroizing::new(Vec::with_capacity(4));
        v.extend_from_slice(b"abcd");
        reserve_wiped(&mut v, 1);
        assert_eq!((&v[..], v.capacity() >= 8), (&b"abcd"[..], true));
        let cap = v.capacity();
        reserve_wiped(&mut v, 1);
        assert_eq!(v.capacity(), cap, "room already there: no move");
        let line = encode(&ClientFrame {
            id: 1,
            req: Request::Status,
        });
        assert!(line.ends_with(b"}\n"));
    }
}
