//! A request body as `vault run`'s proxy reads it for a swap (docs/design.md §8): framed by
//! `content-length`, or chunked (`transfer-encoding: chunked`, each size line parsed by
//! `httparse`, trailers read and dropped), any bytes, whole up to a bound or refused. What the
//! agent gets is the body itself; the executor sends it with a `content-length` of its own.
use std::io::Read;

/// How the request says its body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    Length(usize),
    Chunked,
}

/// Why a body was not read: the status for the client and the words.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Unread {
    pub status: u16,
    pub why: String,
}

fn unread(status: u16, why: impl Into<String>) -> Unread {
    Unread {
        status,
        why: why.into(),
    }
}

/// A chunk-size line or the trailers larger than this are refused.
const LINE_MAX: usize = 16 * 1024;

/// The body after the head: `already` is what came with the head. At most `max` bytes.
pub(super) fn read(
    conn: &mut impl Read,
    framing: Framing,
    already: Vec<u8>,
    max: usize,
) -> Result<Vec<u8>, Unread> {
    let too_big = || {
        unread(
            413,
            format!("the body is larger than the {max} bytes the vault relays"),
        )
    };
    match framing {
        Framing::Length(length) if length > max => Err(too_big()),
        Framing::Length(length) => {
            let mut body = already;
            while body.len() < length {
                let mut chunk = vec![0u8; (length - body.len()).min(64 * 1024)];
                match conn.read(&mut chunk) {
                    Ok(0) | Err(_) => return Err(unread(400, "the body ended early")),
                    Ok(n) => body.extend_from_slice(&chunk[..n]),
                }
            }
            body.truncate(length);
            Ok(body)
        }
        Framing::Chunked => Chunks {
            conn,
            buf: already,
            at: 0,
        }
        .body(max)
        .map_err(|e| match e {
            Some(u) => u,
            None => too_big(),
        }),
    }
}

/// The chunked reader's state: what was read and not yet used, from `at`.
struct Chunks<'a, R> {
    conn: &'a mut R,
    buf: Vec<u8>,
    at: usize,
}

impl<R: Read> Chunks<'_, R> {
    /// `Err(None)`: over `max`.
    fn body(mut self, max: usize) -> Result<Vec<u8>, Option<Unread>> {
        let mut body = Vec::new();
        loop {
            let size = self.size()?;
            if size == 0 {
                self.trailers()?;
                return Ok(body);
            }
            let size = usize::try_from(size).map_err(|_| None)?;
            if body.len().saturating_add(size) > max {
                return Err(None);
            }
            self.want(size + 2)?;
            body.extend_from_slice(&self.buf[self.at..self.at + size]);
            if &self.buf[self.at + size..self.at + size + 2] != b"\r\n" {
                return Err(Some(unread(
                    400,
                    "a chunk does not end where its size says",
                )));
            }
            self.at += size + 2;
            // What was used is dropped now and then, so the buffer stays about a chunk long.
            if self.at > 64 * 1024 {
                self.buf.drain(..self.at);
                self.at = 0;
            }
        }
    }

    /// The next chunk's size line.
    fn size(&mut self) -> Result<u64, Option<Unread>> {
        loop {
            match httparse::parse_chunk_size(&self.buf[self.at..]) {
                Ok(httparse::Status::Complete((used, size))) => {
                    self.at += used;
                    return Ok(size);
                }
                Ok(httparse::Status::Partial) if self.buf.len() - self.at < LINE_MAX => {
                    self.more()?
                }
                _ => return Err(Some(unread(400, "a chunk's size line does not parse"))),
            }
        }
    }

    /// After the last chunk: the trailers (dropped) up to the blank line.
    fn trailers(&mut self) -> Result<(), Option<Unread>> {
        loop {
            let rest = &self.buf[self.at..];
            if rest.starts_with(b"\r\n") || memchr::memmem::find(rest, b"\r\n\r\n").is_some() {
                return Ok(());
            }
            if rest.len() > LINE_MAX {
                return Err(Some(unread(400, "the trailers are too long")));
            }
            self.more()?;
        }
    }

    /// At least `n` unused bytes in the buffer.
    fn want(&mut self, n: usize) -> Result<(), Option<Unread>> {
        while self.buf.len() - self.at < n {
            self.more()?;
        }
        Ok(())
    }

    fn more(&mut self) -> Result<(), Option<Unread>> {
        let mut chunk = [0u8; 16 * 1024];
        match self.conn.read(&mut chunk) {
            Ok(0) | Err(_) => Err(Some(unread(400, "the body ended early"))),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{read, Framing};

    fn chunked(wire: &[u8], split: usize, max: usize) -> Result<Vec<u8>, (u16, String)> {
        let (head, rest) = wire.split_at(split.min(wire.len()));
        let mut rest = rest;
        read(&mut rest, Framing::Chunked, head.to_vec(), max).map_err(|u| (u.status, u.why))
    }

    #[test]
    fn a_chunked_body_is_read_whole_however_it_arrives() {
        let wire = b"4\r\nWiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: y\r\n\r\n";
        for split in 0..wire.len() {
            assert_eq!(
                chunked(wire, split, 1024).unwrap(),
                b"Wikipedia in\r\n\r\nchunks.",
                "split at {split}"
            );
        }
        let binary: Vec<u8> = (0..=255u8).collect();
        let mut wire = format!("{:x}\r\n", binary.len()).into_bytes();
        wire.extend_from_slice(&binary);
        wire.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(chunked(&wire, 3, 1024).unwrap(), binary);
    }

    #[test]
    fn a_chunked_body_over_the_bound_or_malformed_is_refused() {
        let wire = b"8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n";
        assert_eq!(chunked(wire, 0, 15).unwrap_err().0, 413);
        assert_eq!(chunked(wire, 0, 16).unwrap().len(), 16);
        for bad in [
            &b"zz\r\nab\r\n0\r\n\r\n"[..],
            b"2\r\nabc\r\n0\r\n\r\n",
            b"2\r\nab\r\n",
            b"ffffffffffffffffff\r\n",
        ] {
            let (status, why) = chunked(bad, 0, 1024).unwrap_err();
            assert!(status == 400 || status == 413, "{bad:?}: {status} {why}");
        }
        let mut long = b"5\r\nabcde\r\n".to_vec();
        long.extend_from_slice(b"10000000\r\n");
        assert_eq!(chunked(&long, 0, 1024).unwrap_err().0, 413);
    }

    #[test]
    fn a_length_body_is_read_to_its_length_and_no_further() {
        let mut rest = &b"defgh"[..];
        let got = read(&mut rest, Framing::Length(6), b"abc".to_vec(), 10).unwrap();
        assert_eq!(got, b"abcdef");
        let mut short = &b"d"[..];
        let err = read(&mut short, Framing::Length(6), b"abc".to_vec(), 10).unwrap_err();
        assert_eq!(err.status, 400);
        let err = read(&mut &b""[..], Framing::Length(11), Vec::new(), 10).unwrap_err();
        assert_eq!(err.status, 413);
    }
}
