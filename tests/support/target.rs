//! The loopback HTTP target for the tests: the server is `src/demo/target.rs` (the same file the
//! demo and the benches run), with the routes a careless or hostile API would have, and HTTPS
//! through rustls. Every request is recorded; tests count at the target.
//!
//! Routes:
//!   /echo            200 JSON echoing the request's headers, query and body
//!   /leak            200 text echoing the planted secret raw, base64, URL-encoded (and X-Echo)
//!   /status/NNN      that status
//!   /redirect?to=URL 302 to URL
//!   /forms?kind=K    200 text echoing the credential it received (K: bearer, basic, header,
//!                    query) in every form (`forms_of`), in the body and in the X-Request-Id,
//!                    ETag, Link, Location and Cache-Control headers
//!   /forms.json?kind=K  the same as a JSON document whose escapes, decoded, spell it out
//!   /cut?kind=K      a body that ends in the middle of the received credential
//!   /big?mb=N        N MiB of text
//!   /slow?s=N        answers after N seconds
//!   /inject?c=HEX    200 JSON with the text HEX encodes (so the request does not carry it) in
//!                    a string field, a nested array, a key and a value with an escape, and in
//!                    the X-Request-Id, ETag and Cache-Control headers
//!   /inject.txt?c=HEX  the same as a text body
//!   anything else    200 {"ok": true, "path": ...}
#[path = "../../src/demo/target.rs"]
mod server;

use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Map, Value};
use server::{Request, Response, Stream};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

pub struct HttpTarget {
    pub port: u16,
    scheme: &'static str,
    server: server::Target,
}

impl HttpTarget {
    /// Starts the server; `secret` is what `/leak` echoes back in every encoding.
    pub fn start(secret: &str) -> Self {
        let secret = secret.to_owned();
        let server = server::Target::start(move |r| route(r, &secret))
            .expect("start the loopback HTTP target");
        Self {
            port: server.port,
            scheme: "http",
            server,
        }
    }

    /// The same server, keeping each connection open for the client's next request (as real
    /// APIs do) until the client closes it.
    pub fn start_kept(secret: &str) -> Self {
        let secret = secret.to_owned();
        let server =
            server::Target::start_with(move |r| route(r, &secret), |s| Some(Box::new(s)), true)
                .expect("start the loopback HTTP target");
        Self {
            port: server.port,
            scheme: "http",
            server,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.server.connections()
    }

    /// The same server speaking HTTPS only, with this certificate chain and key (PEM files). A
    /// failed handshake is dropped before any request is read, so it records nothing.
    pub fn start_tls(secret: &str, cert: &Path, key: &Path) -> Self {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("read the leaf certificate")
            .collect::<Result<_, _>>()
            .expect("parse the leaf certificate");
        let key = PrivateKeyDer::from_pem_file(key).expect("read the leaf key");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("the leaf certificate and key");
        let config = Arc::new(config);
        let secret = secret.to_owned();
        let server = server::Target::start_wrapped(
            move |r| route(r, &secret),
            move |tcp| {
                let conn = rustls::ServerConnection::new(config.clone()).ok()?;
                let mut tls = Tls(rustls::StreamOwned::new(conn, tcp));
                // Complete the handshake before a request is read; a failed one records nothing.
                while tls.0.conn.is_handshaking() {
                    if tls.0.conn.complete_io(&mut tls.0.sock).ok()? == (0, 0) {
                        return None;
                    }
                }
                Some(Box::new(tls) as Box<dyn Stream>)
            },
        )
        .expect("start the loopback HTTPS target");
        Self {
            port: server.port,
            scheme: "https",
            server,
        }
    }

    pub fn base(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    /// Every request received so far, as JSON: method, path, headers (names lower-case),
    /// body_b64.
    pub fn requests(&self) -> Vec<Value> {
        self.server
            .requests()
            .iter()
            .map(|r| {
                let headers: Map<String, Value> = r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect();
                json!({"method": r.method, "path": r.path, "headers": headers,
                       "body_b64": STANDARD.encode(&r.body)})
            })
            .collect()
    }
}

/// A TLS connection that says close_notify when the response is done.
struct Tls(rustls::StreamOwned<rustls::ServerConnection, TcpStream>);

impl Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Tls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl Drop for Tls {
    fn drop(&mut self) {
        self.0.conn.send_close_notify();
        let _ = self.0.flush();
    }
}

/// Python's `urllib.parse.quote(s, safe="")`: everything but unreserved characters.
const QUOTE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

fn quote(s: &str) -> String {
    utf8_percent_encode(s, QUOTE).to_string()
}

/// The query as lists of decoded values per key.
fn query_of(r: &Request) -> BTreeMap<String, Vec<String>> {
    let mut q: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in url::form_urlencoded::parse(r.query().as_bytes()) {
        if !v.is_empty() {
            q.entry(k.into_owned()).or_default().push(v.into_owned());
        }
    }
    q
}

/// The credential as this request carried it, or "" if it did not.
fn received_secret(r: &Request, kind: &str, q: &BTreeMap<String, Vec<String>>) -> String {
    let auth = r.header("authorization").unwrap_or("");
    let found = match kind {
        "bearer" => auth.strip_prefix("Bearer ").map(str::to_owned),
        "basic" => auth
            .strip_prefix("Basic ")
            .and_then(|b| STANDARD.decode(b).ok())
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|d| d.split_once(':').map(|(_, p)| p.to_owned())),
        "header" => r
            .header("x-api-key")
            .and_then(|v| v.strip_prefix("Token "))
            .map(str::to_owned),
        "query" => q.get("api_key").map(|v| v[0].clone()),
        _ => None,
    };
    found.unwrap_or_default()
}

/// Every form of `s` a careless or hostile target could echo, named.
pub fn forms_of(s: &str) -> Vec<(String, String)> {
    let b = s.as_bytes();
    let mut out = vec![("raw".to_owned(), s.to_owned())];
    for prefix in [&b""[..], b"B", b"Be", b"Bearer ", b"user:"] {
        let input = [prefix, b].concat();
        for (name, e) in [
            ("std", STANDARD.encode(&input)),
            ("url", URL_SAFE.encode(&input)),
        ] {
            let n = prefix.len();
            let nopad = e.trim_end_matches('=').to_owned();
            out.push((format!("b64-{name}-{n}"), e));
            out.push((format!("b64-{name}-{n}-nopad"), nopad));
        }
    }
    let pct = |f: &dyn Fn(usize) -> bool| -> String {
        b.iter()
            .enumerate()
            .map(|(i, c)| {
                if f(i) {
                    format!("%{c:02X}")
                } else {
                    format!("%{c:02x}")
                }
            })
            .collect()
    };
    out.push(("pct-upper".into(), pct(&|_| true)));
    out.push(("pct-lower".into(), pct(&|_| false)));
    out.push(("pct-mixed".into(), pct(&|i| i % 2 == 1)));
    out.push(("pct-partial".into(), quote(s)));
    out.push(("form".into(), quote(s).replace("%20", "+")));
    let units = |upper: bool| -> String {
        s.encode_utf16()
            .map(|u| {
                if upper {
                    format!("\\u{u:04X}")
                } else {
                    format!("\\u{u:04x}")
                }
            })
            .collect()
    };
    out.push(("json-u".into(), units(false)));
    out.push(("json-U".into(), units(true)));
    let go = serde_json::to_string(s).unwrap();
    let go = go[1..go.len() - 1]
        .replace('&', "\\u0026")
        .replace('<', "\\u003c")
        .replace('>', "\\u003e");
    out.push(("json-go".into(), go));
    out.push(("hex".into(), hex::encode(b)));
    out.push(("HEX".into(), hex::encode_upper(b)));
    out
}

fn route(r: &Request, planted: &str) -> Response {
    let q = query_of(r);
    let answer = match r.route() {
        "/echo" => {
            let headers: Map<String, Value> = r
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect();
            Response::json(
                200,
                &json!({"headers": headers, "query": q, "body": String::from_utf8_lossy(&r.body)}),
            )
        }
        "/leak" => {
            let forms = [
                planted.to_owned(),
                STANDARD.encode(planted),
                URL_SAFE.encode(planted).trim_end_matches('=').to_owned(),
                quote(planted),
            ];
            let text = format!("here it is: {} \x1b[31mred\x1b[0m", forms.join(" | "));
            Response::new(200, "text/plain", text)
                .with_header("X-Echo", &forms[0])
                .with_header("Location", format!("/x?t={}", forms[3]))
        }
        "/forms" | "/forms.json" | "/cut" => forms_route(r, &q),
        "/inject" | "/inject.txt" => {
            let c = q
                .get("c")
                .and_then(|v| hex::decode(&v[0]).ok())
                .map_or("canary".to_owned(), |b| {
                    String::from_utf8_lossy(&b).into_owned()
                });
            let c = c.as_str();
            let doc = json!({"title": c, "nested": {"comments": [{"text": c}, [c, 1]]},
                c: "a key", "escaped": format!("\u{1b}[2J{c}")});
            let answer = if r.route() == "/inject" {
                Response::json(200, &doc)
            } else {
                Response::new(200, "text/plain", format!("a text body: {c}\nend"))
            };
            answer
                .with_header("X-Request-Id", c)
                .with_header("ETag", format!("\"{c}\""))
                .with_header("Cache-Control", format!("private, {c}"))
        }
        "/redirect" => Response::new(302, "text/plain", "").with_header(
            "Location",
            q.get("to").map_or("/".to_owned(), |v| v[0].clone()),
        ),
        "/big" => {
            let mb: usize = q.get("mb").and_then(|v| v[0].parse().ok()).unwrap_or(1);
            return Response::new(200, "text/plain", vec![b'x'; mb << 20]);
        }
        path => {
            if let Some(code) = path.strip_prefix("/status/") {
                let code = code.parse().unwrap_or(500);
                Response::json(code, &json!({"status": "set"}))
            } else {
                if path == "/slow" {
                    let s: f64 = q.get("s").and_then(|v| v[0].parse().ok()).unwrap_or(1.0);
                    std::thread::sleep(std::time::Duration::from_secs_f64(s));
                }
                Response::json(200, &json!({"ok": true, "path": path}))
            }
        }
    };
    answer.with_header("Set-Cookie", "session=should-never-reach-the-agent")
}

fn forms_route(r: &Request, q: &BTreeMap<String, Vec<String>>) -> Response {
    let kind = q.get("kind").map_or("", |v| v[0].as_str());
    let secret = received_secret(r, kind, q);
    if secret.is_empty() {
        return Response::json(400, &json!({"error": "no credential received"}));
    }
    let forms = forms_of(&secret);
    let form = |name: &str| forms.iter().find(|(n, _)| n == name).unwrap().1.clone();
    if r.route() == "/cut" {
        let half = &secret.as_bytes()[..secret.len() / 2];
        let body = [&b"{\"token\": \""[..], half].concat();
        return Response::new(200, "text/plain", body);
    }
    let with_headers = |resp: Response| {
        resp.with_header("X-Request-Id", &secret)
            .with_header("ETag", format!("\"{}\"", form("b64-std-7")))
            .with_header(
                "Link",
                format!("<https://x/?t={}>; rel=next", form("pct-mixed")),
            )
            .with_header(
                "Location",
                format!("/x?t={}&h={}", form("form"), form("hex")),
            )
            .with_header(
                "Cache-Control",
                format!("private, tag={}", form("b64-url-2-nopad")),
            )
    };
    if r.route() == "/forms.json" {
        let doc: Map<String, Value> = forms
            .iter()
            .map(|(n, v)| (n.clone(), Value::from(v.as_str())))
            .collect();
        // A string whose escapes, once decoded, are the secret itself.
        let text = Value::Object(doc).to_string().replace(
            &serde_json::to_string(&secret).unwrap(),
            &format!("\"{}\"", form("json-u")),
        );
        return with_headers(Response::new(200, "application/json", text));
    }
    let text: Vec<String> = forms.iter().map(|(n, v)| format!("{n}: {v}")).collect();
    with_headers(Response::new(200, "text/plain", text.join("\n")))
}

/// A loopback TCP port that refuses connections for as long as this lives: a socket bound to it
/// but not listening (a connection gets a reset), so no other test's server can take the port
/// meanwhile, as it could a port that was only "just free".
pub struct ClosedPort {
    _socket: std::os::fd::OwnedFd,
    pub port: u16,
}

impl ClosedPort {
    pub fn new() -> Self {
        use rustix::net::{bind, getsockname, socket, AddressFamily, SocketType};
        use std::net::{Ipv4Addr, SocketAddrV4};
        let socket = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        bind(&socket, &SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = SocketAddrV4::try_from(getsockname(&socket).unwrap()).unwrap();
        let refused = std::net::TcpStream::connect(addr).map_err(|e| e.kind());
        assert_eq!(
            refused.err(),
            Some(std::io::ErrorKind::ConnectionRefused),
            "a bound socket that does not listen refuses"
        );
        assert!(
            std::net::TcpListener::bind(addr).is_err(),
            "nobody else can take the port"
        );
        Self {
            _socket: socket,
            port: addr.port(),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}
