//! Tokens the tools never hold (docs/design.md §8, issue 47): `vault run --env NAME=CREDENTIAL`
//! gives the client a placeholder in `NAME`, and for the credential's bound host (and only there)
//! the proxy ends the client's TLS itself, with a leaf from the vault's own CA that only the
//! sandbox trusts. Each request inside is read whole; the header or query parameter holding the
//! placeholder (a bearer token, basic auth's password, a header, a query value) is taken out,
//! and the rest goes to the agent as an `http_request` of the proxy's session (`Swap`): the
//! credential's methods and paths, its policy, the card, grants, the executor that injects the
//! secret, the scrubbing and the journal are `http_request`'s own. The response comes back byte
//! for byte. A request that carries no placeholder reaches nothing: it gets a 401 asking for
//! it (which is how `git` learns to send its password). Only `http/1.1` is offered in ALPN.
use super::ask::Asker;
use super::body::{self, Framing};
use crate::agent::protocol::{Interception, Reply, Request, State};
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;

/// The largest request body passed on (a `git push`'s pack); past `INLINE_BODY_MAX` it goes to
/// the agent in a file of `<vault>/relayed/` (`exec::relayed`), not in the frame.
const BODY_MAX: usize = crate::exec::PROXIED_BODY_MAX_BYTES;
/// The largest body sent inside the `swap` frame (base64): `http_request`'s own bound.
const INLINE_BODY_MAX: usize = crate::exec::MAX_BODY_BYTES;

/// One credential the proxy swaps: the variable the client holds its placeholder in, the
/// placeholder, the bound host and port, and the TLS server for that host.
pub struct Swapped {
    pub name: String,
    pub credential: String,
    pub placeholder: String,
    pub host: String,
    pub port: u16,
    tls: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Swapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Swapped({} = {} at {}:{})",
            self.name, self.credential, self.host, self.port
        )
    }
}

/// A placeholder: `agent-vault-` and 32 random hex digits. It names no secret and opens
/// nothing anywhere but at this session's proxy.
pub fn placeholder() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS's random numbers");
    format!("agent-vault-{}", hex::encode(bytes))
}

impl Swapped {
    /// `name`'s swap of `credential`, from what the agent issued for its bound host.
    pub fn new(name: &str, credential: &str, issued: &Interception) -> Result<Self, String> {
        let bad =
            |e: &dyn std::fmt::Display| format!("the proxy's certificate for {}: {e}", issued.host);
        // The leaf alone: every client in the sandbox has the CA as a root (its bundle), and a
        // root sent along is one more certificate each handshake parses (0.13 ms a handshake
        // for Python's ssl here).
        let chain =
            vec![CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).map_err(|e| bad(&e))?];
        let key = PrivateKeyDer::from_pem_slice(issued.key_pem.expose()).map_err(|e| bad(&e))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad(&e))?;
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            name: name.to_owned(),
            credential: credential.to_owned(),
            placeholder: placeholder(),
            host: issued.host.clone(),
            port: issued.port,
            tls: Arc::new(tls),
        })
    }
}

/// The swaps of one `vault run`.
#[derive(Debug, Default)]
pub struct Swaps(pub Vec<Swapped>);

impl Swaps {
    /// The swap whose bound host is `host:port`.
    pub fn find(&self, host: &str, port: u16) -> Option<&Swapped> {
        self.0.iter().find(|s| s.host == host && s.port == port)
    }

    /// The swap whose placeholder a request head carries (in its request line or a header, as
    /// written or in basic auth's base64).
    pub fn sent_in(&self, head: &[u8]) -> Option<&Swapped> {
        let mut slots = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut slots);
        let parsed = req.parse(head).is_ok();
        self.0.iter().find(|s| {
            let ph = s.placeholder.as_bytes();
            memchr::memmem::find(head, ph).is_some()
                || (parsed && req.headers.iter().any(|h| holds(h.value, ph)))
        })
    }
}

/// Serves a `CONNECT` to `swap`'s host: TLS ends here, and each request goes to the agent.
pub(super) fn serve(mut conn: TcpStream, early: Vec<u8>, swap: &Swapped, asker: &Asker) {
    // The proxy writes TLS records of its own here (the session tickets, later the answer): a
    // small one is not held back for the client's delayed acknowledgement of the one before.
    let _ = conn.set_nodelay(true);
    if conn
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let Ok(mut server) = rustls::ServerConnection::new(swap.tls.clone()) else {
        return;
    };
    if !early.is_empty() && server.read_tls(&mut &early[..]).is_err() {
        return;
    }
    let mut tls = rustls::StreamOwned::new(server, conn);
    // One request per connection: `Connection: close` on every answer.
    let answer = match read_request(&mut tls, swap) {
        Ok(r) => relay(r, swap, asker),
        Err(a) => a,
    };
    let _ = tls.write_all(&answer.bytes());
    let _ = tls.flush();
    tls.conn.send_close_notify();
    let _ = tls.conn.write_tls(&mut tls.sock);
    let _ = tls.sock.shutdown(std::net::Shutdown::Both);
}

/// A request as the agent gets it.
struct Asked {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
    /// Whether the placeholder was found (and taken out).
    carried: bool,
}

/// An answer the proxy writes: status, headers, body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn said(status: u16, why: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "text/plain; charset=utf-8".into())],
            body: format!("agent-vault: {why}\n").into_bytes(),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let reason = ureq::http::StatusCode::from_u16(self.status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut out = format!("HTTP/1.1 {} {reason}\r\n", self.status).into_bytes();
        for (k, v) in &self.headers {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        out.extend_from_slice(
            format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                self.body.len()
            )
            .as_bytes(),
        );
        out.extend_from_slice(&self.body);
        out
    }
}

/// A request head larger than this is refused.
const HEAD_MAX: usize = 16 * 1024;

/// Reads the request head (up to the blank line); returns it with what followed it.
pub(super) fn read_head(conn: &mut impl Read) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut buf = Vec::with_capacity(2048);
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Ok((buf, rest));
        }
        if buf.len() > HEAD_MAX {
            return Err(format!("the request head is over {HEAD_MAX} bytes"));
        }
        match conn.read(&mut chunk) {
            Ok(0) => return Err("the connection closed before a whole request head".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(format!("reading the request: {e}")),
        }
    }
}

/// Headers that end at this hop or that the vault sets: never passed on. `accept-encoding`
/// too, so the answer comes back plain, where the scrubber can see the secret.
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
    "accept-encoding",
];

/// Reads one request from the client, the placeholder taken out of it.
fn read_request(
    tls: &mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>,
    swap: &Swapped,
) -> Result<Asked, Answer> {
    let (head, body) = read_head(tls).map_err(|why| Answer::said(400, &why))?;
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err(Answer::said(400, "not an HTTP/1.1 request")),
    }
    let (method, target) = (req.method.unwrap_or("").to_owned(), req.path.unwrap_or("/"));
    let ph = swap.placeholder.as_bytes();
    let mut carried = false;
    let (mut headers, mut framing, mut expect) = (Vec::new(), None, false);
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let framed = match name.as_str() {
            "content-length" => std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .map(Framing::Length)
                .ok_or_else(|| Answer::said(400, "a content-length that is not a number"))
                .map(Some)?,
            "transfer-encoding" if h.value.eq_ignore_ascii_case(b"chunked") => {
                Some(Framing::Chunked)
            }
            "transfer-encoding" => {
                return Err(Answer::said(
                    501,
                    "the vault relays a body sent plain or chunked, no other transfer-encoding",
                ))
            }
            "expect" => {
                expect = true;
                None
            }
            _ => None,
        };
        if let Some(f) = framed {
            // Two framings (or two lengths) are how a request is smuggled past a proxy.
            if framing.replace(f).is_some() {
                return Err(Answer::said(
                    400,
                    "the body's length is said twice (content-length and transfer-encoding, or two of one)",
                ));
            }
        }
        if holds(h.value, ph) {
            carried = true;
            continue;
        }
        if DROPPED.contains(&name.as_str()) {
            continue;
        }
        let value = std::str::from_utf8(h.value)
            .map_err(|_| Answer::said(400, &format!("the {name} header is not text")))?;
        headers.push((name, value.to_owned()));
    }
    let (target, in_query) = without_placeholder(target, &swap.placeholder);
    carried |= in_query;
    let framing = framing.unwrap_or(Framing::Length(0));
    let waiting = match framing {
        Framing::Length(n) if n > BODY_MAX => {
            return Err(Answer::said(
                413,
                &format!("the body is larger than the {BODY_MAX} bytes the vault relays"),
            ))
        }
        Framing::Length(n) => n > body.len(),
        Framing::Chunked => true,
    };
    if expect && waiting {
        let _ = tls.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let body =
        body::read(tls, framing, body, BODY_MAX).map_err(|u| Answer::said(u.status, &u.why))?;
    let body = (!body.is_empty()).then_some(body);
    Ok(Asked {
        method,
        target,
        headers,
        body,
        carried,
    })
}

/// Whether a header value holds `placeholder`: as written, or inside basic auth's base64.
fn holds(value: &[u8], placeholder: &[u8]) -> bool {
    let has = |v: &[u8]| memchr::memmem::find(v, placeholder).is_some();
    if has(value) {
        return true;
    }
    let text = String::from_utf8_lossy(value);
    let mut words = text.split_whitespace();
    match (words.next(), words.next()) {
        (Some(scheme), Some(b64)) if scheme.eq_ignore_ascii_case("basic") => {
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .is_ok_and(|pair| has(&pair))
        }
        _ => false,
    }
}

/// `target` without the query parameters whose value holds `placeholder`; whether any did.
fn without_placeholder(target: &str, placeholder: &str) -> (String, bool) {
    let Some((path, query)) = target.split_once('?') else {
        return (target.to_owned(), false);
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let decoded = percent_encoding::percent_decode_str(pair).decode_utf8_lossy();
            !decoded.contains(placeholder)
        })
        .collect();
    let found = kept.len() != query.split('&').count();
    match kept.is_empty() {
        true => (path.to_owned(), found),
        false => (format!("{path}?{}", kept.join("&")), found),
    }
}

/// The request to the agent, and its answer as the client gets it.
fn relay(asked: Asked, swap: &Swapped, asker: &Asker) -> Answer {
    if !asked.carried {
        let mut a = Answer::said(401, &format!("{}:{} is reached through the vault: send the placeholder ${} as the credential (a bearer token, basic auth's password, or as the credential says)", swap.host, swap.port, swap.name));
        a.headers.push((
            "www-authenticate".into(),
            "Basic realm=\"agent-vault\"".into(),
        ));
        return a;
    }
    let host = match swap.host.contains(':') {
        true => format!("[{}]", swap.host),
        false => swap.host.clone(),
    };
    let (body_base64, body_file) = match asked.body {
        Some(b) if b.len() > INLINE_BODY_MAX => match asker.relay_request_body(&b) {
            Ok(file) => (None, Some(file)),
            Err(why) => return Answer::said(502, &why),
        },
        b => (
            b.map(|b| base64::engine::general_purpose::STANDARD.encode(b)),
            None,
        ),
    };
    let written = body_file.as_ref().map(|f| f.name.clone());
    let reply = asker.call(Request::Swap {
        credential: swap.credential.clone(),
        method: asked.method,
        url: format!("https://{host}:{}{}", swap.port, asked.target),
        headers: asked.headers,
        body_base64,
        body_file,
    });
    // The agent removes the file as it takes it; one it never took (refused first) goes too.
    if let Some(name) = written {
        asker.forget_request_body(&name);
    }
    match reply {
        Reply::Action(a) if a.state == State::Completed => {
            match response_of(a.result.as_ref(), &asker.relayed_body(&a.id)) {
                Ok(answer) => answer,
                Err(why) => Answer::said(
                    502,
                    &format!(
                        "{} ({}): {}",
                        a.summary,
                        a.id,
                        a.reason.as_deref().unwrap_or(&why)
                    ),
                ),
            }
        }
        Reply::Action(a) => {
            let why = a.reason.clone().unwrap_or_default();
            let status = match a.state {
                State::Denied | State::Expired | State::Withdrawn => 403,
                _ => 502,
            };
            Answer::said(
                status,
                &format!("{} was {} ({}): {why}", a.summary, a.state, a.id),
            )
        }
        Reply::Tool(t) => {
            let message = t.structured["error"]["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| t.structured.to_string());
            Answer::said(403, &message)
        }
        Reply::Error { message, .. } => Answer::said(502, &message),
        other => Answer::said(502, &format!("the vault agent answered {other:?}")),
    }
}

/// A completed action's response (its `result`), if it came back whole: its body in the
/// reply, or in `file` when the reply gives the file's length and blake3 (both checked).
fn response_of(result: Option<&serde_json::Value>, file: &Path) -> Result<Answer, String> {
    let shapeless = || "the response did not come back whole".to_owned();
    let p = result
        .and_then(|r| r.get("proxied"))
        .ok_or_else(shapeless)?;
    if p["whole"] != true {
        return Err(shapeless());
    }
    let body = match (
        p["body_file_bytes"].as_u64(),
        p["body_file_blake3"].as_str(),
    ) {
        (Some(len), Some(hash)) => crate::exec::relayed::take(
            file,
            len,
            hash,
            crate::exec::PROXIED_MAX_BYTES,
            "the response",
        )?,
        _ => base64::engine::general_purpose::STANDARD
            .decode(p["body_base64"].as_str().ok_or_else(shapeless)?)
            .map_err(|_| shapeless())?,
    };
    let headers = p["headers"]
        .as_array()
        .ok_or_else(shapeless)?
        .iter()
        .filter_map(|h| Some((h[0].as_str()?.to_owned(), h[1].as_str()?.to_owned())))
        .collect();
    let status = p["status"].as_u64().and_then(|s| u16::try_from(s).ok());
    Ok(Answer {
        status: status.ok_or_else(shapeless)?,
        headers,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::{holds, response_of, without_placeholder};

    /// A body the agent wrote to a file is relayed only as written: its length and blake3 as the
    /// agent's reply gives them, never through a symbolic link.
    #[test]
    fn a_relayed_body_is_taken_only_as_the_agent_wrote_it() {
        let dir = std::env::temp_dir().join(format!("av-relayed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (file, link) = (dir.join("act_1.body"), dir.join("act_2.body"));
        let body = b"\x00binary\xffpack".repeat(1000);
        std::fs::write(&file, &body).unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let result = serde_json::json!({"proxied": {"status": 200, "headers": [["a", "b"]],
            "body_base64": "", "whole": true, "body_file_bytes": body.len(),
            "body_file_blake3": blake3::hash(&body).to_hex().as_str()}});
        let answer = response_of(Some(&result), &file).unwrap();
        assert_eq!((answer.status, answer.body), (200, body.clone()));
        assert!(!file.exists(), "a relayed body's file is removed once read");
        let refused = |path: &std::path::Path, why: &str| {
            let e = response_of(Some(&result), path).err().unwrap();
            assert!(e.contains(why), "{e}");
        };
        refused(&link, "act_2.body");
        let mut changed = body.clone();
        changed[7] ^= 1;
        std::fs::write(&file, &changed).unwrap();
        refused(&file, "is not what was written");
        changed.push(0);
        std::fs::write(&file, &changed).unwrap();
        refused(&file, "is not what was written");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_placeholder_is_found_as_written_in_basic_auth_and_in_the_query() {
        let ph = "agent-vault-00ff";
        assert!(holds(b"Bearer agent-vault-00ff", ph.as_bytes()));
        let basic = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "x:agent-vault-00ff",
        );
        assert!(holds(format!("Basic {basic}").as_bytes(), ph.as_bytes()));
        assert!(!holds(b"Bearer agent-vault-00fe", ph.as_bytes()));
        assert_eq!(
            without_placeholder("/v1/a?x=1&key=agent-vault-00ff&y=2", ph),
            ("/v1/a?x=1&y=2".to_owned(), true)
        );
        assert_eq!(
            without_placeholder("/v1/a?key=agent%2Dvault-00ff", ph),
            ("/v1/a".to_owned(), true)
        );
        assert_eq!(
            without_placeholder("/v1/a?x=1", ph),
            ("/v1/a?x=1".to_owned(), false)
        );
    }
}
