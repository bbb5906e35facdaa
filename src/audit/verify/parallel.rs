//! Verifying on every core: workers read (decrypt or parse) and hash chunks of rows, each row's
//! hash depending only on the row (its stored `prev` is in it), and whichever worker finds the
//! checker free checks the chunks ready in order: seq, links, anchors, lifecycle. The verdict is
//! the sequential one.
use super::{Facts, RowRef, Verifier};
use ed25519_dalek::{Signature, VerifyingKey};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};

/// Rows per chunk: large enough that handing a chunk over costs nothing next to reading it (a
/// chunk is ~4 ms of a worker's time), small enough that a chunk just read (its spans, text and
/// facts) is still mostly in the core's L2 when it is checked, and that the workers finish
/// within a chunk of each other. On 2 cores, 1M rows: 8,192 took 2-3% longer than 2,048; 1,024
/// and 512 were no faster.
pub const CHUNK_ROWS: i64 = 2048;

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
    /// The approver key the rows are held to (`run` sets it).
    key: Option<VerifyingKey>,
    /// The signatures read so far, checked together once the chunk is full (`seal`): each one's
    /// row (an index into `facts`), its message's place in `messages`, and the signature.
    signed: Vec<(usize, Range<usize>, Signature)>,
    messages: Vec<u8>,
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
    /// Takes the facts of `row` (its hash, kind, spent decision and signature) and keeps a copy of
    /// it, with no body unless its seq is 1 or the touch checks read it.
    pub(crate) fn push(&mut self, row: &RowRef<'_>, scratch: &mut Vec<u8>) {
        self.push_hashed(row, super::computed_hash(scratch, row));
    }

    /// `push` for a row whose hash, blake3(prev ‖ canonical row), was taken already.
    pub(crate) fn push_hashed(&mut self, row: &RowRef<'_>, hash: [u8; 32]) {
        let from = self.messages.len();
        let (facts, signature) = Facts::keyed(hash, row, self.key.as_ref(), &mut self.messages);
        if let Some(signature) = signature {
            let at = from..self.messages.len();
            self.signed.push((self.facts.len(), at, signature));
        }
        self.push_with(row, facts);
    }

    /// Checks the signatures the rows carry, all at once (`sigs::verify_all`), and marks the rows
    /// whose signature is not the approver's.
    fn seal(&mut self) {
        let (Some(key), false) = (self.key, self.signed.is_empty()) else {
            return;
        };
        let messages: Vec<&[u8]> = self
            .signed
            .iter()
            .map(|(_, at, _)| &self.messages[at.clone()])
            .collect();
        let sigs: Vec<Signature> = self.signed.iter().map(|(_, _, s)| *s).collect();
        let ok = super::sigs::verify_all(&key, &messages, &sigs);
        for ((i, _, _), ok) in self.signed.iter().zip(ok) {
            if !ok {
                let seq = self.rows[*i].seq;
                self.facts[*i].signature_failed(seq);
            }
        }
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
    /// one that filled it last: a worker checking another's chunk frees nothing of it).
    fn clear(&mut self) {
        self.text.clear();
        self.bytes.clear();
        self.rows.clear();
        self.facts.clear();
        self.malformed = None;
        self.signed.clear();
        self.messages.clear();
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

/// What the workers share to keep the chunks in order: the next chunk to check, the chunks read
/// ahead of it, and whether the run is over.
struct Order<I> {
    inputs: I,
    /// Inputs handed out so far (the index of the next one).
    sent: usize,
    exhausted: bool,
    /// The index of the next chunk to check.
    next: usize,
    ready: BTreeMap<usize, (usize, Chunk)>,
    /// Rows in the chunks checked so far.
    fed: u64,
}

/// Runs each of `workers` over `inputs`, one on this thread and each other on a thread of its own,
/// and feeds the chunks to `v` in the order of `inputs`. There is no checking thread: a worker
/// that finishes a chunk and finds `v` free feeds it every chunk that is ready in order, then goes
/// back to reading (a combining lock: on two cores a third thread only takes turns with the
/// readers). At most four chunks per worker are in flight; once `v` finds the chain broken, no
/// further input is handed out. A worker's error stops the run.
pub(crate) fn run<I, E, W>(
    v: &mut Verifier,
    inputs: impl Iterator<Item = I> + Send,
    workers: Vec<W>,
) -> Result<(), E>
where
    I: Send,
    E: Send,
    W: FnMut(I, &mut Chunk) -> Result<(), E> + Send,
{
    let n = workers.len().max(1);
    let order = Mutex::new(Order {
        inputs: inputs.enumerate(),
        sent: 0,
        exhausted: false,
        next: 0,
        ready: BTreeMap::new(),
        fed: 0,
    });
    // Signalled when `next` moves or the run stops: a worker waits on it while it is too far ahead.
    let moved = Condvar::new();
    let key = v.key().copied();
    let verifier = Mutex::new(v);
    let stop = AtomicBool::new(false);
    let error: Mutex<Option<E>> = Mutex::new(None);
    // Chunks already checked, per worker that filled them, for it to empty and fill again: what
    // a chunk's rows allocated is freed on the thread that allocated it.
    let spare: Vec<Mutex<Vec<Chunk>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
    let shared = Shared {
        order: &order,
        moved: &moved,
        verifier: &verifier,
        stop: &stop,
        error: &error,
        spare: &spare,
        window: 4 * n,
        key,
    };
    std::thread::scope(|scope| {
        let mut workers = workers.into_iter().enumerate();
        let first = workers.next();
        for (w, work) in workers {
            scope.spawn(move || shared.work(w, work));
        }
        if let Some((w, work)) = first {
            shared.work(w, work);
        }
    });
    match error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The workers' view of a run.
struct Shared<'a, It, E> {
    order: &'a Mutex<Order<It>>,
    moved: &'a Condvar,
    verifier: &'a Mutex<&'a mut Verifier>,
    stop: &'a AtomicBool,
    error: &'a Mutex<Option<E>>,
    spare: &'a [Mutex<Vec<Chunk>>],
    /// Chunks that may be in flight past the next one to check.
    window: usize,
    /// The approver key the rows are held to.
    key: Option<VerifyingKey>,
}

impl<It, E> Clone for Shared<'_, It, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<It, E> Copy for Shared<'_, It, E> {}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<It, I, E> Shared<'_, It, E>
where
    It: Iterator<Item = (usize, I)>,
{
    /// One worker's loop: take the next input, fill a chunk from it, post the chunk, and check
    /// whatever is ready in order if no other worker is checking.
    fn work<W: FnMut(I, &mut Chunk) -> Result<(), E>>(self, w: usize, mut work: W) {
        loop {
            let Some((i, input)) = self.take() else { break };
            let mut chunk = locked(&self.spare[w]).pop().unwrap_or_default();
            chunk.clear();
            chunk.key = self.key;
            if let Err(e) = work(input, &mut chunk) {
                locked(self.error).get_or_insert(e);
                self.halt();
                break;
            }
            chunk.seal();
            locked(self.order).ready.insert(i, (w, chunk));
            self.check_ready();
        }
    }

    /// The next input, once it is within the window of the next chunk to check; None when the
    /// inputs are used up or the run stopped.
    fn take(&self) -> Option<(usize, I)> {
        let mut order = locked(self.order);
        loop {
            if self.stop.load(Ordering::Relaxed) || order.exhausted {
                return None;
            }
            if order.sent < order.next + self.window {
                break;
            }
            order = self.moved.wait(order).unwrap_or_else(|p| p.into_inner());
        }
        match order.inputs.next() {
            Some(job) => {
                order.sent += 1;
                Some(job)
            }
            None => {
                order.exhausted = true;
                None
            }
        }
    }

    /// Feeds `v` every chunk that is ready in order, unless another worker is doing so; after
    /// letting go of `v`, looks again, so a chunk posted meanwhile is never left behind.
    fn check_ready(&self) {
        loop {
            let Ok(mut v) = self.verifier.try_lock() else {
                return;
            };
            loop {
                let (chunk, before) = {
                    let mut order = locked(self.order);
                    let next = order.next;
                    match order.ready.remove(&next) {
                        Some(c) => (c, order.fed),
                        None => break,
                    }
                };
                let (w, chunk) = chunk;
                let whole = chunk.feed(&mut v, before);
                {
                    let mut order = locked(self.order);
                    order.next += 1;
                    order.fed += chunk.rows.len() as u64;
                }
                self.moved.notify_all();
                locked(&self.spare[w]).push(chunk);
                if !whole {
                    self.halt();
                    return;
                }
            }
            drop(v);
            let order = locked(self.order);
            if !order.ready.contains_key(&order.next) || self.stop.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Stops the run: no further input is handed out, and waiting workers wake to see it.
    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _order = locked(self.order);
        self.moved.notify_all();
    }
}
