//! Verifying on every core: worker threads read (decrypt or parse) and hash chunks of rows, each
//! row's hash depending only on the row (its stored `prev` is in it), and the calling thread checks
//! the chunks in order: seq, links, anchors, lifecycle. The verdict is the sequential one.
use super::{Facts, RowRef, Verifier};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

/// Rows per chunk: large enough that handing a chunk over costs nothing next to reading it, small
/// enough that a failure early in the journal stops the workers soon.
pub(crate) const CHUNK_ROWS: i64 = 8192;

/// Worker threads: one per core, at most 8.
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

/// Rows read and hashed by a worker, owned: one text arena, one byte arena, each row's spans.
#[derive(Default)]
pub(crate) struct Chunk {
    text: String,
    bytes: Vec<u8>,
    rows: Vec<Spans>,
    facts: Vec<Facts>,
    /// Why the row after the last one could not be read (the chunk ends there).
    malformed: Option<Malformed>,
}

enum Malformed {
    /// The whole message.
    Row(String),
    /// What follows `line N` in it, N being the line's number in the file (rows before it + 1).
    Line(String),
}

struct Spans {
    seq: i64,
    ts: Range<usize>,
    kind: Range<usize>,
    session: Option<Range<usize>>,
    action: Option<Range<usize>>,
    body: Range<usize>,
    prev: Range<usize>,
    hash: Range<usize>,
}

impl Chunk {
    /// Takes the facts of `row` (its hash, kind and spent decision) and keeps a copy of it, with no
    /// body unless its seq is 1 or the touch checks read it.
    pub(crate) fn push(&mut self, row: &RowRef<'_>, scratch: &mut String) {
        self.push_with(row, Facts::of(scratch, row));
    }

    /// `push` for a row whose facts were taken already.
    pub(crate) fn push_with(&mut self, row: &RowRef<'_>, facts: Facts) {
        let keep_body = row.seq == 1 || super::touches::reads_body(facts.kind);
        self.facts.push(facts);
        let text = &mut self.text;
        let mut t = |s: &str| {
            let at = text.len();
            text.push_str(s);
            at..text.len()
        };
        let (ts, kind) = (t(row.ts), t(row.kind));
        let (session, action) = (row.session.map(&mut t), row.action.map(&mut t));
        // The in-order checks read a body only at seq 1 (the genesis, `check_genesis`) and in the
        // few kinds the touch checks read (`touches::reads_body`); what they need of any other
        // row's body is in its facts, so only those are kept.
        let body = t(if keep_body { row.body } else { "" });
        let bytes = &mut self.bytes;
        let mut b = |s: &[u8]| {
            let at = bytes.len();
            bytes.extend_from_slice(s);
            at..bytes.len()
        };
        let (prev, hash) = (b(row.prev), b(row.hash));
        self.rows.push(Spans {
            seq: row.seq,
            ts,
            kind,
            session,
            action,
            body,
            prev,
            hash,
        });
    }

    /// Empty, its buffers kept for the next chunk (by the worker that fills it next, which is the
    /// one that filled it last: the checking thread frees nothing).
    fn clear(&mut self) {
        self.text.clear();
        self.bytes.clear();
        self.rows.clear();
        self.facts.clear();
        self.malformed = None;
    }

    /// The row after the last one pushed cannot be read; nothing follows it in this chunk.
    pub(crate) fn malformed(&mut self, detail: String) {
        self.malformed = Some(Malformed::Row(detail));
    }

    /// `malformed` for a line of a file, one row per line: `rest` follows `line N`.
    pub(crate) fn malformed_line(&mut self, rest: String) {
        self.malformed = Some(Malformed::Line(rest));
    }

    fn row(&self, s: &Spans) -> RowRef<'_> {
        let t = |r: &Range<usize>| &self.text[r.clone()];
        RowRef {
            seq: s.seq,
            ts: t(&s.ts),
            kind: t(&s.kind),
            session: s.session.as_ref().map(t),
            action: s.action.as_ref().map(t),
            body: t(&s.body),
            prev: &self.bytes[s.prev.clone()],
            hash: &self.bytes[s.hash.clone()],
        }
    }

    /// Feeds every row to `v` in order (`before`: rows in the chunks before it); false once `v`
    /// has found the chain broken.
    fn feed(&self, v: &mut Verifier, before: u64) -> bool {
        for (s, f) in self.rows.iter().zip(&self.facts) {
            if !v.push_facts(&self.row(s), f) {
                return false;
            }
        }
        match &self.malformed {
            Some(Malformed::Row(detail)) => v.push_malformed(detail.clone()),
            Some(Malformed::Line(rest)) => {
                let number = before + self.rows.len() as u64 + 1;
                v.push_malformed(format!("line {number}{rest}"))
            }
            None => true,
        }
    }
}

/// Runs each of `workers` on a thread of its own over `inputs`, and feeds the chunks to `v` in the
/// order of `inputs`. At most four chunks per worker are in flight; once `v` finds the chain
/// broken, no further input is handed out. A worker's error stops the run.
pub(crate) fn run<I, E, W>(
    v: &mut Verifier,
    inputs: impl Iterator<Item = I>,
    workers: Vec<W>,
) -> Result<(), E>
where
    I: Send,
    E: Send,
    W: FnMut(I, &mut Chunk) -> Result<(), E> + Send,
{
    let n = workers.len().max(1);
    let (job_tx, job_rx) = mpsc::channel::<(usize, I)>();
    let job_rx = Mutex::new(job_rx);
    let stop = AtomicBool::new(false);
    let (out_tx, out_rx) = mpsc::channel::<(usize, usize, Result<Chunk, E>)>();
    // Chunks already checked, per worker that filled them, for it to empty and fill again: what
    // a chunk's rows allocated is freed on the thread that allocated it, not on this one.
    let spare: Vec<Mutex<Vec<Chunk>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
    std::thread::scope(|scope| {
        for (w, mut work) in workers.into_iter().enumerate() {
            let (out_tx, job_rx, stop, spare) = (out_tx.clone(), &job_rx, &stop, &spare[w]);
            scope.spawn(move || loop {
                let job = job_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok((i, input)) = job else { break };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let spare = spare.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let mut chunk = spare.unwrap_or_default();
                chunk.clear();
                let done = work(input, &mut chunk).map(|()| chunk);
                if out_tx.send((i, w, done)).is_err() {
                    break;
                }
            });
        }
        drop(out_tx);
        let mut inputs = inputs.enumerate();
        let (mut sent, mut next, mut exhausted) = (0usize, 0usize, false);
        let mut ready: BTreeMap<usize, (usize, Chunk)> = BTreeMap::new();
        let mut fed = 0u64;
        let mut result = Ok(());
        'run: loop {
            while !exhausted && sent < next + 4 * n {
                match inputs.next().map(|job| job_tx.send(job)) {
                    Some(Ok(())) => sent += 1,
                    _ => exhausted = true,
                }
            }
            if exhausted && next == sent {
                break;
            }
            let Ok((i, w, done)) = out_rx.recv() else {
                break;
            };
            match done {
                Err(e) => {
                    result = Err(e);
                    break;
                }
                Ok(chunk) => {
                    ready.insert(i, (w, chunk));
                }
            }
            while let Some((w, chunk)) = ready.remove(&next) {
                next += 1;
                if !chunk.feed(v, fed) {
                    break 'run;
                }
                fed += chunk.rows.len() as u64;
                spare[w]
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(chunk);
            }
        }
        stop.store(true, Ordering::Relaxed);
        drop(job_tx);
        result
    })
}
