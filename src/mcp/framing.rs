//! stdio framing: bytes in, one frame per `\n`. A line longer than `MAX_LINE` is reported as soon
//! as the cap is passed, without buffering the rest of it; bytes after the last `\n` at EOF are a
//! truncated frame, never a message.
/// Longest line accepted (4 MiB), excluding its `\n`.
pub const MAX_LINE: usize = 4 * 1024 * 1024;

/// What the splitter produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its `\n`.
    Line(Vec<u8>),
    /// A line passed the cap (`MAX_LINE` in production) before its `\n`; the session must close.
    TooLong,
    /// EOF arrived after these bytes and no `\n`: an incomplete frame.
    Truncated(Vec<u8>),
}

/// Splits a byte stream into frames. Feed chunks with `push`, then call `finish` at EOF.
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    dead: bool,
    cap: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::new()
    }
}

impl LineSplitter {
    /// The production splitter: lines of at most `MAX_LINE` bytes.
    pub fn new() -> Self {
        Self::with_cap(MAX_LINE)
    }

    /// A splitter whose lines may hold at most `cap` bytes (the fuzzer uses a small cap, so its
    /// length-cap cases need no 4 MiB filler).
    pub fn with_cap(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            dead: false,
            cap,
        }
    }

    /// The longest line this splitter accepts.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Appends `chunk`, pushing every completed frame to `out`. After `TooLong` nothing more is
    /// produced: the stream has lost its framing.
    pub fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Frame>) {
        while !self.dead && !chunk.is_empty() {
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if self.buf.len() + i > self.cap {
                        self.overflow(out);
                        return;
                    }
                    self.buf.extend_from_slice(&chunk[..i]);
                    out.push(Frame::Line(std::mem::take(&mut self.buf)));
                    chunk = &chunk[i + 1..];
                }
                None => {
                    if self.buf.len() + chunk.len() > self.cap {
                        self.overflow(out);
                        return;
                    }
                    self.buf.extend_from_slice(chunk);
                    return;
                }
            }
        }
    }

    fn overflow(&mut self, out: &mut Vec<Frame>) {
        self.dead = true;
        self.buf = Vec::new();
        out.push(Frame::TooLong);
    }

    /// At EOF: leftover bytes without a `\n` are a truncated frame.
    pub fn finish(self) -> Option<Frame> {
        (!self.dead && !self.buf.is_empty()).then_some(Frame::Truncated(self.buf))
    }

    /// Bytes held for the current, incomplete line (never above the cap).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(chunks: &[&[u8]]) -> Vec<Frame> {
        let mut s = LineSplitter::new();
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn lines_across_chunks_and_truncation_at_eof() {
        assert_eq!(
            split(&[b"{\"a\"", b":1}\n{", b"}\nrest"]),
            vec![
                Frame::Line(b"{\"a\":1}".to_vec()),
                Frame::Line(b"{}".to_vec()),
                Frame::Truncated(b"rest".to_vec())
            ]
        );
        assert_eq!(split(&[b"\n"]), vec![Frame::Line(Vec::new())]);
        assert_eq!(split(&[]), vec![]);
    }

    #[test]
    fn an_oversized_line_is_refused_without_holding_it() {
        let mut s = LineSplitter::new();
        let mut out = Vec::new();
        let block = vec![b'x'; 1024 * 1024];
        for _ in 0..4 {
            s.push(&block, &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(s.buffered(), MAX_LINE);
        s.push(b"y", &mut out);
        assert_eq!(out, vec![Frame::TooLong]);
        assert_eq!(s.buffered(), 0);
        s.push(b"\n{}\n", &mut out);
        assert_eq!(out.len(), 1, "nothing after the stream lost its framing");
        assert_eq!(s.finish(), None);
        // Exactly MAX_LINE bytes then \n is still a line.
        let mut s = LineSplitter::new();
        let mut out = Vec::new();
        s.push(&vec![b'z'; MAX_LINE], &mut out);
        s.push(b"\n", &mut out);
        assert!(matches!(&out[..], [Frame::Line(l)] if l.len() == MAX_LINE));
        // A small cap behaves the same way.
        let mut s = LineSplitter::with_cap(3);
        let mut out = Vec::new();
        s.push(b"abc\nabcd", &mut out);
        assert_eq!(out, vec![Frame::Line(b"abc".to_vec()), Frame::TooLong]);
    }
}
