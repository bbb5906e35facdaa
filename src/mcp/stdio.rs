//! The two ends of one MCP session's stdio: `Input` reads stdin in chunks as they come, `Output`
//! is the only writer of stdout. Neither puts a thread start between the client's first line and
//! its answer: the first chunk is read, and the first line written, on the session's own thread;
//! the reading and writing threads start right after (`cargo bench --bench mcp_startup`).
use std::io::{Read, Write};
use std::sync::Mutex;
use std::thread::JoinHandle;
use tokio::sync::mpsc;

/// A chunk of stdin as read (an empty one at EOF).
pub(super) type Chunk = std::io::Result<Vec<u8>>;

const CHUNK: usize = 64 * 1024;

/// stdin, chunk by chunk. A client writes `initialize` as soon as it has started the server, so
/// the first chunk is read where the session runs (nothing else waits on it yet); the rest is read
/// by a plain thread (rather than tokio's stdin, a blocking-pool task per read: one wake-up per
/// message instead of two), started once the first chunk was handled (`keep_reading`). That
/// thread may stay parked in its read when the session ends, which does not hold the process.
pub(super) struct Input {
    rx: mpsc::Receiver<Chunk>,
    /// Until the reading thread starts; `None` once it has, or when the first read ended it all.
    tx: Option<mpsc::Sender<Chunk>>,
}

impl Input {
    /// Reads the first chunk (blocking) and queues it.
    pub(super) fn first() -> Self {
        let (tx, rx) = mpsc::channel(4);
        let mut buf = vec![0u8; CHUNK];
        let chunk = read_chunk(&mut std::io::stdin().lock(), &mut buf);
        let more = matches!(&chunk, Ok(c) if !c.is_empty());
        // The channel is new and holds four: the first chunk always fits.
        let _ = tx.try_send(chunk);
        Input {
            rx,
            tx: more.then_some(tx),
        }
    }

    pub(super) async fn recv(&mut self) -> Option<Chunk> {
        self.rx.recv().await
    }

    /// Starts the reading thread, once (after the first chunk was handled).
    pub(super) fn keep_reading(&mut self) -> std::io::Result<()> {
        let Some(tx) = self.tx.take() else {
            return Ok(());
        };
        std::thread::Builder::new()
            .name("mcp-stdin".into())
            .spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut buf = vec![0u8; CHUNK];
                loop {
                    let chunk = read_chunk(&mut stdin, &mut buf);
                    let last = !matches!(&chunk, Ok(c) if !c.is_empty());
                    if tx.blocking_send(chunk).is_err() || last {
                        break;
                    }
                }
            })?;
        Ok(())
    }
}

fn read_chunk(stdin: &mut impl Read, buf: &mut [u8]) -> Chunk {
    loop {
        match stdin.read(buf) {
            Ok(n) => return Ok(buf[..n].to_vec()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// stdout, one complete line at a time, flushed. The first line (the handshake's answer) is
/// written by the session itself; then a plain thread takes over (rather than tokio's stdout,
/// which hands every write and flush to the blocking pool and waits for it: the runtime only
/// queues the line), and every later line goes through it in order.
pub(super) struct Output {
    tx: mpsc::Sender<String>,
    /// Until the writing thread starts.
    idle: Mutex<Option<mpsc::Receiver<String>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Output {
    pub(super) fn new() -> Self {
        let (tx, rx) = mpsc::channel(256);
        Output {
            tx,
            idle: Mutex::new(Some(rx)),
            thread: Mutex::default(),
        }
    }

    /// Writes one line: the first one here and now, the rest through the writing thread.
    pub(super) async fn send(&self, line: String) {
        match self.take_idle() {
            Some(rx) => {
                let mut stdout = std::io::stdout().lock();
                let _ = stdout
                    .write_all(line.as_bytes())
                    .and_then(|()| stdout.flush());
                drop(stdout);
                self.start(rx);
            }
            None => {
                let _ = self.tx.send(line).await;
            }
        }
    }

    /// A sender for lines written from elsewhere (a tool call's task), the writing thread started
    /// first so that nothing it queues can wait for a line written here.
    pub(super) fn sender(&self) -> mpsc::Sender<String> {
        if let Some(rx) = self.take_idle() {
            self.start(rx);
        }
        self.tx.clone()
    }

    /// The writing thread, if it started: it ends once every sender is gone and the lines
    /// queued before are out.
    pub(super) fn thread(&self) -> Option<JoinHandle<()>> {
        self.thread.lock().ok().and_then(|mut t| t.take())
    }

    fn take_idle(&self) -> Option<mpsc::Receiver<String>> {
        self.idle.lock().ok().and_then(|mut r| r.take())
    }

    fn start(&self, rx: mpsc::Receiver<String>) {
        match std::thread::Builder::new()
            .name("mcp-stdout".into())
            .spawn(move || write_lines(rx))
        {
            Ok(handle) => {
                if let Ok(mut t) = self.thread.lock() {
                    *t = Some(handle);
                }
            }
            Err(e) => tracing::error!(
                "could not start the thread that writes stdout ({e}): the client gets no more answers; restart the MCP server"
            ),
        }
    }
}

/// Each line under its own lock of stdout, never the thread's whole life: nothing else may write
/// there, but if something did (a log line, `.ci/mutants`' `stdout_log`), it would show as a
/// broken line rather than wait for a lock that is never given back.
fn write_lines(mut rx: mpsc::Receiver<String>) {
    let stdout = std::io::stdout();
    while let Some(line) = rx.blocking_recv() {
        let mut out = stdout.lock();
        if out.write_all(line.as_bytes()).is_err() || out.flush().is_err() {
            break;
        }
    }
}
