//! The one loopback HTTP/1.1 target: a small server on 127.0.0.1 that records every request it
//! receives and answers through a route function its user supplies. `vault demo` runs it with one
//! route; the tests (`tests/support/target.rs`) and the benches (`benches/common`) compile this
//! same file with `#[path]` and their own routes, so it uses std alone and nothing of the crate.
//! Every response closes its connection, but a target started with `keep_alive` answers a
//! connection's requests until its client closes it or asks to, as real servers do.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The largest request body read; a longer one is cut (the target is for tests and the demo).
const MAX_BODY: usize = 64 << 20;

/// A connection after the optional wrapping (TLS in the tests): bytes in, bytes out.
pub(crate) trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Wraps each accepted connection (a TLS handshake, say); `None` drops it before any request.
pub(crate) type Wrap = dyn Fn(TcpStream) -> Option<Box<dyn Stream>> + Send + Sync;
/// Answers one request.
pub(crate) type Route = dyn Fn(&Request) -> Response + Send + Sync;

/// One request as the target received it.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// The request target as sent: path and query.
    pub(crate) path: String,
    /// Header names lower-cased, in the order received.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
    /// When the request head had fully arrived.
    #[allow(dead_code, reason = "the benches time arrivals")]
    pub(crate) arrived: Instant,
}

impl Request {
    /// The first header of this (lower-case) name.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without its query.
    pub(crate) fn route(&self) -> &str {
        self.path.split_once('?').map_or(&self.path, |(p, _)| p)
    }

    /// The raw query string ("" without one).
    #[allow(dead_code, reason = "the tests' routes read queries")]
    pub(crate) fn query(&self) -> &str {
        self.path.split_once('?').map_or("", |(_, q)| q)
    }
}

/// What a route answers.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) status: u16,
    /// Sent after Content-Type and Content-Length.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    pub(crate) fn json(status: u16, value: &serde_json::Value) -> Self {
        Self::new(status, "application/json", value.to_string())
    }

    #[allow(dead_code, reason = "the tests' routes add headers")]
    pub(crate) fn with_header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }
}

/// A running target; it stops accepting when dropped.
pub(crate) struct Target {
    pub(crate) port: u16,
    seen: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
}

impl Target {
    /// Plain HTTP.
    pub(crate) fn start(
        route: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        Self::start_wrapped(route, |s| Some(Box::new(s)))
    }

    /// Each connection goes through `wrap` first.
    pub(crate) fn start_wrapped(
        route: impl Fn(&Request) -> Response + Send + Sync + 'static,
        wrap: impl Fn(TcpStream) -> Option<Box<dyn Stream>> + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        Self::start_with(route, wrap, false)
    }

    /// `keep_alive`: a connection serves requests until its client closes it or sends
    /// `Connection: close`; else every response closes it.
    pub(crate) fn start_with(
        route: impl Fn(&Request) -> Response + Send + Sync + 'static,
        wrap: impl Fn(TcpStream) -> Option<Box<dyn Stream>> + Send + Sync + 'static,
        keep_alive: bool,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (route, wrap): (Arc<Route>, Arc<Wrap>) = (Arc::new(route), Arc::new(wrap));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (log, stopped, count) = (seen.clone(), stop.clone(), accepted.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                // As real servers do: a small write (a TLS session ticket, then the answer) is
                // not held back for the client's delayed acknowledgement.
                let _ = stream.set_nodelay(true);
                let (log, route, wrap) = (log.clone(), route.clone(), wrap.clone());
                std::thread::spawn(move || {
                    let Some(conn) = wrap(stream) else { return };
                    let mut reader = BufReader::new(conn);
                    while let Ok(true) = serve(&mut reader, &*route, &log, keep_alive) {}
                });
            }
        });
        Ok(Self {
            port,
            seen,
            stop,
            accepted,
        })
    }

    /// Connections accepted so far.
    #[allow(dead_code, reason = "the tests of kept connections count them")]
    pub(crate) fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Every request received so far, in order of arrival.
    pub(crate) fn requests(&self) -> Vec<Request> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so that it sees the flag and lets the listener go.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Serves one request; whether the connection stays open for another.
fn serve(
    reader: &mut BufReader<Box<dyn Stream>>,
    route: &Route,
    log: &Mutex<Vec<Request>>,
    keep_alive: bool,
) -> std::io::Result<bool> {
    // Not an HTTP request line (e.g. a TLS ClientHello, which starts 0x16): answer 400 at once,
    // as a real plain-HTTP server does, and record nothing. A closed connection ends quietly.
    match reader.fill_buf()?.first() {
        None => return Ok(false),
        Some(b) if !b.is_ascii_uppercase() => {
            let out = reader.get_mut();
            out.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )?;
            out.flush()?;
            return Ok(false);
        }
        Some(_) => {}
    }
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("").to_owned(),
    );
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let arrived = Instant::now();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body)?;
    let request = Request {
        method,
        path,
        headers,
        body,
        arrived,
    };
    if let Ok(mut l) = log.lock() {
        l.push(request.clone());
    }
    let answer = route(&request);
    let keep = keep_alive
        && !request
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
    let mut head = format!("HTTP/1.1 {} {}\r\n", answer.status, reason(answer.status));
    for (k, v) in &answer.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!(
        "Content-Length: {}\r\nConnection: {}\r\n\r\n",
        answer.body.len(),
        if keep { "keep-alive" } else { "close" }
    ));
    // One write for the whole answer.
    let mut bytes = head.into_bytes();
    if request.method != "HEAD" {
        bytes.extend_from_slice(&answer.body);
    }
    let out = reader.get_mut();
    out.write_all(&bytes)?;
    out.flush()?;
    Ok(keep)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    }
}
