//! A same-uid attacker on the agent's socket path: moves the agent's socket aside (a rename in
//! the same `0700` directory, which its owner may do), listens on the original path, and
//! forwards every connection's bytes both ways to the moved socket. Every byte received from
//! either side is recorded in a file per connection and direction; every newline-terminated line
//! that parses as JSON is handed to a caller-supplied closure, which may rewrite it (a line the
//! closure leaves alone is forwarded byte for byte). Bytes that are not a line within 100 ms go
//! through as they are, so a protocol that is not line-based is relayed too. Dropping it puts the
//! agent's socket back (`MovedSocket`), so the vault's own cleanup (`vault lock`) works. Once a
//! connection opens the encrypted channel its binary messages pass as they arrive, through an
//! optional hook that may change them (`Relay::tampering`).
use serde_json::Value;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Which way a line travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// From the command (`vault add`, `vault approve`, `vault mcp`) to the agent.
    ToAgent,
    /// From the agent to the command.
    ToClient,
}

impl Dir {
    fn tag(self) -> &'static str {
        match self {
            Dir::ToAgent => "to-agent",
            Dir::ToClient => "to-client",
        }
    }
}

/// Rewrites one parsed line in place; returns whether it changed it.
pub type Rewrite = dyn Fn(Dir, &mut Value) -> bool + Send + Sync;

/// Changes the bytes that follow a connection's first line, as they pass (over the encrypted
/// channel: its binary messages); gets the offset of `bytes[0]` past that line.
pub type Tamper = dyn Fn(Dir, u64, &mut [u8]) + Send + Sync;

/// The agent's socket renamed to `<socket>.moved`, renamed back on drop if the agent still
/// listens on it (else the stale name is removed).
pub struct MovedSocket {
    pub original: PathBuf,
    pub moved: PathBuf,
}

impl MovedSocket {
    pub fn new(socket: &Path) -> Self {
        let moved = socket.with_extension("sock.moved");
        std::fs::rename(socket, &moved).expect("the owner can rename the agent's socket");
        Self {
            original: socket.to_owned(),
            moved,
        }
    }
}

impl Drop for MovedSocket {
    fn drop(&mut self) {
        if !self.moved.exists() {
            return;
        }
        let alive = UnixStream::connect(&self.moved).is_ok();
        if alive && std::fs::symlink_metadata(&self.original).is_err() {
            let _ = std::fs::rename(&self.moved, &self.original);
        } else {
            let _ = std::fs::remove_file(&self.moved);
        }
    }
}

#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    parsed: AtomicUsize,
    rewritten: AtomicUsize,
}

pub struct Relay {
    counts: Arc<Counts>,
    record: PathBuf,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
    /// (dev, inode) of the relay's own listening socket file.
    ours: (u64, u64),
    moved: MovedSocket,
}

impl Relay {
    /// Moves the agent's `socket` aside and relays it; records into `record` (created).
    pub fn start(
        socket: &Path,
        record: &Path,
        rewrite: impl Fn(Dir, &mut Value) -> bool + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(socket, record, Arc::new(rewrite), Arc::new(|_, _, _| {}))
    }

    /// Like `start`, changing raw bytes after each connection's first line with `tamper`.
    pub fn tampering(
        socket: &Path,
        record: &Path,
        tamper: impl Fn(Dir, u64, &mut [u8]) + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(socket, record, Arc::new(|_, _| false), Arc::new(tamper))
    }

    fn start_with(
        socket: &Path,
        record: &Path,
        rewrite: Arc<Rewrite>,
        tamper: Arc<Tamper>,
    ) -> Self {
        std::fs::create_dir_all(record).unwrap();
        let moved = MovedSocket::new(socket);
        let listener = UnixListener::bind(socket).expect("listen on the agent's socket path");
        listener.set_nonblocking(true).unwrap();
        let meta = std::fs::symlink_metadata(socket).unwrap();
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (c, s, dir, target) = (
            counts.clone(),
            stop.clone(),
            record.to_owned(),
            moved.moved.clone(),
        );
        let accept = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let n = c.connections.fetch_add(1, Ordering::SeqCst);
                        let Ok(agent) = UnixStream::connect(&target) else {
                            continue;
                        };
                        for (from, to, d) in [
                            (&client, &agent, Dir::ToAgent),
                            (&agent, &client, Dir::ToClient),
                        ] {
                            let (from, to) = (from.try_clone().unwrap(), to.try_clone().unwrap());
                            let file = dir.join(format!("conn-{n}-{}.bin", d.tag()));
                            let (c, rw, t) = (c.clone(), rewrite.clone(), tamper.clone());
                            std::thread::spawn(move || pump(from, to, d, &file, &c, &*rw, &*t));
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self {
            counts,
            record: record.to_owned(),
            stop,
            accept: Some(accept),
            ours: (meta.dev(), meta.ino()),
            moved,
        }
    }

    /// Connections relayed so far.
    pub fn connections(&self) -> usize {
        self.counts.connections.load(Ordering::SeqCst)
    }
    /// Lines that parsed as JSON.
    pub fn parsed(&self) -> usize {
        self.counts.parsed.load(Ordering::SeqCst)
    }
    /// Lines the closure changed.
    pub fn rewritten(&self) -> usize {
        self.counts.rewritten.load(Ordering::SeqCst)
    }

    /// Every byte recorded so far, both directions, all connections.
    pub fn recorded(&self) -> Vec<u8> {
        let mut all = Vec::new();
        for f in super::files_under(&self.record) {
            all.extend(std::fs::read(f).unwrap_or_default());
            all.push(b'\n');
        }
        all
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        // Remove our listener only if the path still is ours (a new agent may have bound it).
        let path = &self.moved.original;
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if (m.dev(), m.ino()) == self.ours {
                let _ = std::fs::remove_file(path);
            }
        }
        // `self.moved` drops next: the agent's socket goes back where it was.
    }
}

/// Forwards `from` to `to`: whole lines through the closure, a partial line after 100 ms quiet.
/// Once a first line opened the encrypted channel (it names `noise`), what follows is binary
/// and goes through as it arrives.
fn pump(
    mut from: UnixStream,
    mut to: UnixStream,
    dir: Dir,
    file: &Path,
    counts: &Counts,
    rewrite: &Rewrite,
    tamper: &Tamper,
) {
    let mut log = std::fs::File::create(file).unwrap();
    from.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut held: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    // Bytes seen past the first line, once it has passed; whether that line has been relayed,
    // and whether it opened the channel (all after it then goes through as it comes).
    let (mut past, mut first, mut through) = (None::<u64>, false, false);
    loop {
        let quiet = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                log.write_all(&buf[..n]).unwrap();
                let chunk = &mut buf[..n];
                match past {
                    Some(off) => {
                        tamper(dir, off, chunk);
                        past = Some(off + n as u64);
                    }
                    None => {
                        if let Some(i) = chunk.iter().position(|&b| b == b'\n') {
                            tamper(dir, 0, &mut chunk[i + 1..]);
                            past = Some((n - i - 1) as u64);
                        }
                    }
                }
                held.extend_from_slice(chunk);
                false
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => true,
            Err(e) if e.kind() == ErrorKind::Interrupted => false,
            Err(_) => break,
        };
        let mut out = Vec::new();
        while let Some(i) = held.iter().position(|&b| b == b'\n').filter(|_| !through) {
            let line: Vec<u8> = held.drain(..=i).collect();
            if !first {
                // The channel's opening line is the last one; binary follows.
                first = true;
                through =
                    serde_json::from_slice::<Value>(&line).is_ok_and(|v| v.get("noise").is_some());
            }
            out.extend(relay_line(&line, dir, counts, rewrite));
        }
        if quiet || through {
            out.append(&mut held);
        }
        if !out.is_empty() && to.write_all(&out).is_err() {
            break;
        }
    }
    let _ = to.write_all(&held);
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// One line (with its `\n`), rewritten by the closure if it is JSON and the closure changes it.
fn relay_line(line: &[u8], dir: Dir, counts: &Counts, rewrite: &Rewrite) -> Vec<u8> {
    let Ok(mut v) = serde_json::from_slice::<Value>(&line[..line.len() - 1]) else {
        return line.to_vec();
    };
    counts.parsed.fetch_add(1, Ordering::SeqCst);
    if !rewrite(dir, &mut v) {
        return line.to_vec();
    }
    counts.rewritten.fetch_add(1, Ordering::SeqCst);
    let mut out = serde_json::to_vec(&v).unwrap();
    out.push(b'\n');
    out
}

/// Applies `f` to every value under the key `key`, at any depth; returns whether it changed one.
pub fn rewrite_key(v: &mut Value, key: &str, f: &dyn Fn(&mut Value) -> bool) -> bool {
    let mut changed = false;
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == key {
                    changed |= f(child);
                }
                changed |= rewrite_key(child, key, f);
            }
        }
        Value::Array(a) => {
            for child in a {
                changed |= rewrite_key(child, key, f);
            }
        }
        _ => {}
    }
    changed
}
