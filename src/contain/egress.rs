//! `vault run`'s network (docs/design.md §8): the sandbox has a network namespace of its own,
//! with its loopback and nothing else, and its only way out is this proxy. PID 1 listens on
//! `127.0.0.1:PORT` inside and hands the listening socket out over a socketpair made before the
//! fork (`listen_inside`); `vault run` accepts on it (connections of the sandbox's namespace)
//! and connects, from the person's network, to the hosts that are allowed: the client's model
//! API hosts and what `--allow-host` names. Two forms pass: `CONNECT host:port` (a tunnel; TLS
//! stays end to end) and a plain-HTTP request in absolute form (forwarded with `Connection:
//! close`, so the next request comes back here to be judged). Any other host or form gets an
//! HTTP 403 whose body says why and what to do, and no byte goes anywhere. Names are resolved
//! here, through the executors' guard: never a metadata address, and loopback or private ones
//! only where an allow entry names that very address.
use super::ask::{Answer, Asker};
use super::intercept::{read_head, Swaps};
use crate::exec::guard;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

/// The proxy's port on the sandbox's own loopback (a fresh namespace: always free).
pub const PORT: u16 = 3128;
const READ_HEAD: Duration = Duration::from_secs(30);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One allowed host: `host`, `host:port`, `[v6]:port`, or `*.suffix` (any name under it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub host: String,
    pub port: Option<u16>,
}

impl Entry {
    /// Parses an entry as the person wrote it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad =
            || format!("{text:?} is not a host: give HOST, HOST:PORT, [IPv6]:PORT or *.DOMAIN");
        let (host, port) = split_authority(text).ok_or_else(bad)?;
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            return Err(bad());
        }
        let wild = host.strip_prefix("*.");
        if wild.is_some_and(|d| d.is_empty() || d.contains('*'))
            || (wild.is_none() && host.contains('*'))
        {
            return Err(bad());
        }
        Ok(Self { host, port })
    }

    fn matches(&self, host: &str, port: u16) -> bool {
        if crate::mutation::off("proxy_allow") {
            return true;
        }
        let name = match self.host.strip_prefix("*.") {
            Some(domain) => host
                .strip_suffix(domain)
                .is_some_and(|h| h.ends_with('.') && h.len() > 1),
            None => host == self.host,
        };
        name && self.port.is_none_or(|p| p == port)
    }
}

/// `host[:port]` or `[v6][:port]`, the host lowercased and without brackets.
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest.split_once(']')?;
        match after {
            "" => (h, None),
            p => (h, Some(p.strip_prefix(':')?.parse().ok()?)),
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p.parse().ok()?)),
            Some(_) => return None,
            None => (text, None),
        }
    };
    Some((host.to_ascii_lowercase(), port))
}

/// The hosts the proxy lets through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allow(pub Vec<Entry>);

impl Allow {
    /// The entry that lets `host:port` through, if one does.
    pub fn find(&self, host: &str, port: u16) -> Option<&Entry> {
        self.0.iter().find(|e| e.matches(host, port))
    }

    /// The entries, as written, for the person's line.
    pub fn describe(&self) -> String {
        let mut names: Vec<String> = self
            .0
            .iter()
            .map(|e| match e.port {
                Some(p) if e.host.contains(':') => format!("[{}]:{p}", e.host),
                Some(p) => format!("{}:{p}", e.host),
                None => e.host.clone(),
            })
            .collect();
        names.dedup();
        names.join(", ")
    }
}

/// What the sandbox may reach: the client's model API hosts, the host of each model endpoint its
/// variables name in the person's environment (`ANTHROPIC_BASE_URL`…), and `extra`
/// (`--allow-host`).
pub fn allow_for(
    client: Option<&super::clients::ClientFacts>,
    env: &[(OsString, OsString)],
    extra: &[Entry],
) -> Allow {
    let mut entries: Vec<Entry> = Vec::new();
    if let Some(c) = client {
        entries.extend(c.api_hosts.iter().filter_map(|h| Entry::parse(h).ok()));
        for (k, v) in env {
            if !k.to_str().is_some_and(|k| c.base_url_vars.contains(&k)) {
                continue;
            }
            let Some(url) = v.to_str().and_then(|v| url::Url::parse(v).ok()) else {
                continue;
            };
            if let Some(host) = url_host(&url) {
                let port = url.port_or_known_default();
                entries.push(Entry { host, port });
            }
        }
    }
    entries.extend(extra.iter().cloned());
    Allow(entries)
}

/// A URL's host as an allow entry and the proxy compare it: lower case, an IPv6 address
/// without its brackets.
fn url_host(url: &url::Url) -> Option<String> {
    match url.host()? {
        url::Host::Ipv6(a) => Some(a.to_string()),
        h => Some(h.to_string().to_ascii_lowercase()),
    }
}

/// The proxy variables every client and tool inside reads (lower case too: curl reads only
/// `http_proxy` for plain HTTP). `NO_PROXY` is emptied: inside, the person's loopback names the
/// sandbox's own, so nothing reaches anything directly. `NODE_USE_ENV_PROXY` makes Node's own
/// `fetch` use them (Node 24 and later).
pub fn set_env(env: &mut Vec<(OsString, OsString)>) {
    let url = format!("http://127.0.0.1:{PORT}");
    let set: [(&str, &str); 9] = [
        ("HTTP_PROXY", &url),
        ("HTTPS_PROXY", &url),
        ("ALL_PROXY", &url),
        ("http_proxy", &url),
        ("https_proxy", &url),
        ("all_proxy", &url),
        ("NO_PROXY", ""),
        ("no_proxy", ""),
        ("NODE_USE_ENV_PROXY", "1"),
    ];
    for (k, v) in set {
        env.retain(|(have, _)| have != k);
        env.push((k.into(), v.into()));
    }
}

/// In PID 1, inside the new namespace: brings up its loopback, listens on the proxy's port and
/// hands the listening socket to `vault run` over `to`.
pub fn listen_inside(to: &UnixStream) -> io::Result<()> {
    crate::sys::sandbox::loopback_up()?;
    let listener = TcpListener::bind(("127.0.0.1", PORT))?;
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    let fds = [listener.as_fd()];
    cmsg.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(to, &[io::IoSlice::new(b"L")], &mut cmsg, SendFlags::empty())?;
    Ok(())
}

/// In `vault run`: takes the listening socket PID 1 sends, then serves it in threads of its own.
/// Returns at once; a sandbox that failed before listening sends nothing, and this ends.
/// `asker`: where a host the allow list does not name waits for the person (`None`: refused).
/// `swaps`: the bound hosts whose TLS the proxy ends, to swap a placeholder (`intercept`).
pub fn serve(from: UnixStream, allow: Allow, asker: Option<Arc<Asker>>, swaps: Swaps) {
    std::thread::spawn(move || {
        if let Some(fd) = receive(&from) {
            serve_listener(TcpListener::from(fd), allow, asker, swaps);
        }
    });
}

/// The proxy on `listener`, a connection per thread, until the process ends (benches/egress.rs
/// runs it on a listener of its own).
pub fn serve_listener(
    listener: TcpListener,
    allow: Allow,
    asker: Option<Arc<Asker>>,
    swaps: Swaps,
) {
    let (allow, swaps) = (Arc::new(allow), Arc::new(swaps));
    for conn in listener.incoming().flatten() {
        let (allow, asker, swaps) = (allow.clone(), asker.clone(), swaps.clone());
        std::thread::spawn(move || handle(conn, &allow, asker.as_deref(), &swaps));
    }
}

fn receive(from: &UnixStream) -> Option<OwnedFd> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let mut byte = [0u8; 1];
    let got = rustix::net::recvmsg(
        from,
        &mut [io::IoSliceMut::new(&mut byte)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC,
    )
    .ok()?;
    if got.bytes != 1 {
        return None;
    }
    // Bound first: the iterator borrows `cmsg`, which a tail expression would outlive.
    let fd = cmsg.drain().find_map(|m| match m {
        RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
        _ => None,
    });
    fd
}

/// What a request asked for.
#[derive(Debug, PartialEq, Eq)]
enum Ask {
    /// `CONNECT host:port`.
    Tunnel { host: String, port: u16 },
    /// A plain-HTTP request in absolute form, its head rewritten in origin form.
    Forward {
        host: String,
        port: u16,
        head: Vec<u8>,
    },
}

/// Parses a request head into what it asks.
fn parse(head: &[u8]) -> Result<Ask, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err("an incomplete request head".into()),
        Err(e) => return Err(format!("not an HTTP request ({e})")),
    }
    let (method, target) = (req.method.unwrap_or(""), req.path.unwrap_or(""));
    if method == "CONNECT" {
        let Some((host, Some(port))) = split_authority(target) else {
            return Err(format!("CONNECT {target}: give host:port"));
        };
        return Ok(Ask::Tunnel { host, port });
    }
    let url = url::Url::parse(target).map_err(|_| {
        format!("{method} {target}: only CONNECT and absolute http:// requests pass this proxy")
    })?;
    if url.scheme() != "http" {
        return Err(format!(
            "{method} {target}: an {} URL goes through CONNECT",
            url.scheme()
        ));
    }
    let host = url_host(&url).ok_or_else(|| format!("{method} {target}: no host"))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let mut out = format!(
        "{method} {} HTTP/1.{}\r\n",
        &url[url::Position::BeforePath..url::Position::AfterQuery],
        req.version.unwrap_or(1)
    )
    .into_bytes();
    for h in req.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        // The value's bytes as the client sent them (not necessarily UTF-8).
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Ask::Forward {
        host,
        port,
        head: out,
    })
}

/// Refuses with a 403 whose body says why (the client shows it as the proxy's error).
fn refuse(conn: &mut TcpStream, why: &str) {
    let body = format!("agent-vault: {why}\n");
    let _ = write!(
        conn,
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.shutdown(Shutdown::Both);
}

fn handle(mut conn: TcpStream, allow: &Allow, asker: Option<&Asker>, swaps: &Swaps) {
    let _ = conn.set_read_timeout(Some(READ_HEAD));
    let (head, rest) = match read_head(&mut conn) {
        Ok(h) => h,
        Err(why) => return refuse(&mut conn, &why),
    };
    let ask = match parse(&head) {
        Ok(a) => a,
        Err(why) => return refuse(&mut conn, &why),
    };
    let (host, port) = match &ask {
        Ask::Tunnel { host, port } | Ask::Forward { host, port, .. } => (host.clone(), *port),
    };
    // A placeholder in plain HTTP to another host goes as it is (it opens nothing there), and
    // the attempt is journaled.
    if let (Ask::Forward { head, .. }, Some(asker)) = (&ask, asker) {
        if let Some(swap) = swaps.sent_in(head) {
            let why = format!(
                "placeholder {} sent to {host} port {port}, not swapped",
                swap.name
            );
            tracing::warn!("vault run: {why}");
            asker.attempt(why, head);
        }
    }
    // A credential's bound host, named with `--env`: TLS ends here, each request is the agent's.
    if let (Ask::Tunnel { .. }, Some(swap), Some(asker)) = (&ask, swaps.find(&host, port), asker) {
        let _ = conn.set_read_timeout(Some(READ_HEAD));
        return super::intercept::serve(conn, rest, swap, asker);
    }
    // An allowed host passes; any other waits for the person's card (`network` action), and
    // its connection is journaled: its intent before it opens, what it carried after.
    let (named, action) = match (allow.find(&host, port), asker) {
        (Some(entry), _) => (entry.host.clone(), None),
        (None, Some(_)) if crate::mutation::off("network_card") => (host.clone(), None),
        (None, Some(asker)) => match asker.ask(&host, port) {
            Answer::Go { action } => (host.clone(), Some(action)),
            Answer::No(why) => return refuse(&mut conn, &why),
        },
        (None, None) => {
            tracing::info!(host = %host, port, "vault run: a connection to a host not allowed was refused");
            return refuse(
                &mut conn,
                &format!("{host}:{port} is not allowed from inside `vault run`; start it with --allow-host {host}:{port} if it should be (or --network open for no containment of the network)"),
            );
        }
    };
    let report = |carried: (u64, u64), error: Option<String>| {
        if let (Some(asker), Some(action)) = (asker, &action) {
            asker.closed(action, carried, error);
        }
    };
    let mut up = match guard::resolve_checked(&host, port, &named)
        .map_err(|e| e.to_string())
        .and_then(|addrs| dial(&addrs))
    {
        Ok(s) => s,
        Err(why) => {
            report((0, 0), Some(why.clone()));
            return refuse(&mut conn, &why);
        }
    };
    let _ = conn.set_read_timeout(None);
    let first = match ask {
        Ask::Tunnel { .. } => {
            if conn
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_err()
            {
                return report((0, 0), Some("the client went away".into()));
            }
            rest
        }
        Ask::Forward { mut head, .. } => {
            head.extend_from_slice(&rest);
            head
        }
    };
    if let Err(e) = up.write_all(&first) {
        return report((0, 0), Some(format!("sending to {host}:{port}: {e}")));
    }
    let (sent, received) = splice(conn, up);
    report((sent + first.len() as u64, received), None);
}

/// Connects to the first of `addrs` that answers.
fn dial(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for a in addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connecting to {a}: {e}"),
        }
    }
    Err(last)
}

/// Copies both ways until each side has closed its half; returns the bytes the client sent and
/// the bytes it got back.
fn splice(client: TcpStream, up: TcpStream) -> (u64, u64) {
    let (Ok(c2), Ok(u2)) = (client.try_clone(), up.try_clone()) else {
        return (0, 0);
    };
    let out = std::thread::spawn(move || pump(c2, u2));
    let back = pump(up, client);
    (out.join().unwrap_or(0), back)
}

/// One direction, until its end closes: through a pipe with `splice(2)`, so the bytes never
/// come up into this process (1.05x a buffered relay's throughput on loopback, median of the
/// report's runs, benches/egress.rs); through a buffer where the pipe cannot be had.
fn pump(from: TcpStream, to: TcpStream) -> u64 {
    let total = match spliced(&from, &to) {
        Ok(total) => total,
        Err(total) => copied(&from, &to, total),
    };
    let _ = to.shutdown(Shutdown::Write);
    total
}

/// The pipe a tunnel grows to once it has carried `BULK_AFTER` bytes: one `splice` moves up to
/// this much. Pipe memory is charged to the user (`/proc/sys/fs/pipe-user-pages-soft`, 64 MiB
/// by default), whose other programs get small pipes once it is spent; so a tunnel starts with
/// the kernel's default pipe and only a bulk transfer takes the larger one. The kernel refuses
/// a resize past the user's budget, and the tunnel then keeps the pipe it has.
const PIPE_BYTES: usize = 1 << 20;
const BULK_AFTER: u64 = 8 << 20;

/// `Ok(total)` once `from` has ended or either side failed; `Err(total so far)` where splicing is
/// not possible (no pipe, or a kernel that refuses these sockets), before any byte is lost.
fn spliced(from: &TcpStream, to: &TcpStream) -> Result<u64, u64> {
    use rustix::pipe::{fcntl_getpipe_size, fcntl_setpipe_size, pipe_with, splice};
    use rustix::pipe::{PipeFlags, SpliceFlags};
    let (r, w) = pipe_with(PipeFlags::CLOEXEC).map_err(|_| 0u64)?;
    let mut size = fcntl_getpipe_size(&w).unwrap_or(64 * 1024);
    let (mut total, mut grow) = (0u64, size < PIPE_BYTES);
    loop {
        if grow && total >= BULK_AFTER {
            grow = false;
            size = fcntl_setpipe_size(&w, PIPE_BYTES).unwrap_or(size);
        }
        let n = match splice(from, None, &w, None, size, SpliceFlags::MOVE) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::INVAL) if total == 0 => return Err(0),
            Err(_) => return Ok(total),
        };
        let mut left = n;
        while left > 0 {
            match splice(&r, None, to, None, left, SpliceFlags::MOVE) {
                Ok(0) => return Ok(total),
                Ok(k) => left -= k,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    let _ = from.shutdown(Shutdown::Read);
                    return Ok(total);
                }
            }
        }
        total += n as u64;
    }
}

/// The same through a 128 KiB buffer, from `total` bytes on.
fn copied(mut from: &TcpStream, mut to: &TcpStream, mut total: u64) -> u64 {
    let mut buf = vec![0u8; 128 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    let _ = from.shutdown(Shutdown::Read);
                    break;
                }
                total += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    total
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
