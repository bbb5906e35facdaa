//! The demo's loopback HTTP target: a tiny HTTP/1.1 server on 127.0.0.1 that records each
//! request and answers with JSON that echoes the Authorization header back (so the demo can show
//! the vault scrubbing its own secret out of the response).
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as the target saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
    /// Bytes of the request body.
    pub body_len: usize,
}

/// A running target; it stops when the process ends.
#[derive(Debug)]
pub(super) struct Target {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Target {
    pub(super) fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = log.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &log);
                });
            }
        });
        Ok(Self { port, seen })
    }

    pub(super) fn requests(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let (mut length, mut authorization) = (0usize, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap_or(0).min(1 << 20),
                "authorization" => authorization = Some(v.trim().to_owned()),
                _ => {}
            }
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let answer = serde_json::json!({
        "created": {"id": 101, "name": serde_json::from_slice::<serde_json::Value>(&body).ok().and_then(|v| v["name"].as_str().map(str::to_owned))},
        "debug_echo_of_your_authorization_header": authorization,
    })
    .to_string();
    if let Ok(mut l) = log.lock() {
        l.push(Seen {
            method,
            path,
            authorization,
            body_len: body.len(),
        });
    }
    let mut out = stream;
    write!(out, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len())?;
    out.flush()
}
