//! Fuzzes the MCP stdio boundary below the tools: arbitrary bytes, fed in arbitrary chunkings
//! through `LineSplitter`, every frame through `jsonrpc::classify`.
//!
//! Input layout: the low 4 bits of byte 0 count the chunk-length bytes that follow (each a chunk
//! length 1..=256, cycled); the rest is the stream. Byte 0 = 0xff instead puts the stream behind
//! a line of filler that ends `next byte` bytes short of the cap of a splitter made with
//! `LineSplitter::with_cap(CAP)`, to hit the length cap exactly (the production cap, `MAX_LINE`,
//! is the same code with a 4 MiB constant; a small cap keeps each such case microseconds long).
//!
//! Invariants: no panic; chunking never changes the frames; a `Line` never exceeds the cap
//! and never holds `\n`; without `TooLong` the frames rebuild the stream exactly; nothing follows
//! `TooLong`, which comes exactly when a line passes the cap; `classify` is `Ok` only for a JSON object with `jsonrpc: "2.0"`, a string `method`
//! and a string or integer `id`; its errors are -32700 or -32600 only.
#![no_main]

use agent_vault::mcp::framing::{Frame, LineSplitter, MAX_LINE};
use agent_vault::mcp::jsonrpc::{classify, Message, INVALID_REQUEST, PARSE_ERROR};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

/// The cap of the length-cap cases: above 255 (the largest `short`), far below `MAX_LINE`.
const CAP: usize = 1024;

fn filler() -> &'static [u8] {
    static F: OnceLock<Vec<u8>> = OnceLock::new();
    F.get_or_init(|| vec![b' '; CAP])
}

fn split<'a>(parts: impl Iterator<Item = &'a [u8]>) -> Vec<Frame> {
    split_capped(MAX_LINE, parts)
}

fn split_capped<'a>(cap: usize, parts: impl Iterator<Item = &'a [u8]>) -> Vec<Frame> {
    let mut s = LineSplitter::with_cap(cap);
    assert_eq!(s.cap(), cap);
    let mut out = Vec::new();
    for p in parts {
        s.push(p, &mut out);
        assert!(s.buffered() <= cap, "buffered {} > cap {cap}", s.buffered());
    }
    out.extend(s.finish());
    out
}

fn chunked<'a>(stream: &'a [u8], lens: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
    let mut rest = stream;
    let mut i = 0;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = if lens.is_empty() {
            1
        } else {
            lens[i % lens.len()] as usize + 1
        };
        i += 1;
        let (a, b) = rest.split_at(n.min(rest.len()));
        rest = b;
        Some(a)
    })
}

fn check_classify(line: &[u8]) {
    match classify(line) {
        Ok(msg) => {
            let v: Value = serde_json::from_slice(line).expect("Ok only for valid JSON");
            let obj = v.as_object().expect("Ok only for a JSON object");
            assert_eq!(obj.get("jsonrpc"), Some(&Value::String("2.0".into())));
            assert!(obj
                .keys()
                .all(|k| matches!(k.as_str(), "jsonrpc" | "id" | "method" | "params")));
            let method = obj
                .get("method")
                .and_then(Value::as_str)
                .expect("a string method");
            match msg {
                Message::Request {
                    id,
                    method: m,
                    params,
                } => {
                    assert_eq!(m, method);
                    assert!(id.is_string() || id.is_i64() || id.is_u64(), "id {id}");
                    assert_eq!(obj.get("id"), Some(&id));
                    assert_eq!(obj.get("params"), params.as_ref());
                }
                Message::Notification { method: m, params } => {
                    assert_eq!(m, method);
                    assert!(!obj.contains_key("id"));
                    assert_eq!(obj.get("params"), params.as_ref());
                }
            }
        }
        Err(e) => {
            assert!(
                e.code == PARSE_ERROR || e.code == INVALID_REQUEST,
                "unexpected code {} ({})",
                e.code,
                e.message
            );
            // Not JSON at all (or not UTF-8) must be a parse error, never "invalid request".
            if serde_json::from_slice::<Value>(line).is_err() {
                assert_eq!(e.code, PARSE_ERROR, "{}", e.message);
            }
        }
    }
}

/// Behind a filler line ending `short` bytes before the cap: the cap must hit exactly. The
/// oracle is arithmetic on the stream, and what follows the first line must split as if alone
/// (under the same cap).
fn check_cap(short: usize, stream: &[u8], lens: &[u8]) {
    let prefix = &filler()[..CAP - short];
    let frames = split_capped(CAP, std::iter::once(prefix).chain(chunked(stream, lens)));
    let nl = stream.iter().position(|&b| b == b'\n');
    let first_len = CAP - short + nl.unwrap_or(stream.len());
    if first_len > CAP {
        assert_eq!(frames, vec![Frame::TooLong], "a line of {first_len} bytes");
        return;
    }
    let (first, rest) = frames.split_first().expect("a frame");
    match (first, nl) {
        (Frame::Line(l), Some(i)) => {
            assert_eq!(l.len(), first_len);
            assert_eq!(&l[CAP - short..], &stream[..i]);
            assert_eq!(
                rest,
                &split_capped(CAP, std::iter::once(&stream[i + 1..]))[..]
            );
        }
        (Frame::Truncated(t), None) => {
            assert_eq!(t.len(), first_len);
            assert!(rest.is_empty());
        }
        other => panic!("unexpected first frame {:?}", other.0),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let nlens = (flags & 0x0f) as usize;
    let (lens, rest) = rest.split_at(nlens.min(rest.len()));
    if flags == 0xff {
        if let Some((&short, stream)) = rest.split_first() {
            check_cap(short as usize, stream, lens);
        }
        return;
    }
    let stream = rest;

    let whole = split(std::iter::once(stream));
    let pieces = split(chunked(stream, lens));
    assert_eq!(whole, pieces, "chunking changed the frames");

    let mut rebuilt = Vec::new();
    let mut too_long = false;
    for (i, f) in whole.iter().enumerate() {
        assert!(!too_long, "a frame after TooLong");
        match f {
            Frame::Line(l) => {
                assert!(l.len() <= MAX_LINE, "line of {} bytes", l.len());
                assert!(!l.contains(&b'\n'));
                rebuilt.extend_from_slice(l);
                rebuilt.push(b'\n');
                check_classify(l);
            }
            Frame::Truncated(t) => {
                assert_eq!(i, whole.len() - 1, "Truncated is last");
                assert!(!t.is_empty() && t.len() <= MAX_LINE && !t.contains(&b'\n'));
                rebuilt.extend_from_slice(t);
                check_classify(t);
            }
            Frame::TooLong => too_long = true,
        }
    }
    if !too_long {
        assert_eq!(rebuilt, stream, "frames do not rebuild the stream");
    }
});
