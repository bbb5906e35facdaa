//! Bounded capture of third-party output (docs/design.md §6), shared by the executors: every byte is
//! counted and drained, secrets are scrubbed before anything is retained, a per-call bound keeps a
//! ring-buffer tail (SSH streams) or a head (HTTP bodies) whose memory comes from a process-wide
//! `Budget`, UTF-8 split across chunks decodes correctly (invalid sequences become U+FFFD), and a
//! marker the vault writes says what was cut from what the agent sees.
use super::budget::{Budget, Reservation};
use super::redact::Redactor;
use super::untrusted_text;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::Arc;

/// Which end of a stream is kept once it is over its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The first bytes (HTTP bodies: the start of a document says what it is).
    Head,
    /// The last bytes (diagnostics: the error that explains an exit comes last).
    Tail,
}

/// The budget is taken in steps of this size as a stream grows, so a quiet call holds little.
const GROW_STEP: usize = 4096;

/// Streaming scrubbers for every secret of a call, applied in turn.
#[derive(Debug, Default)]
pub struct Scrubber(Vec<Redactor>);

impl Scrubber {
    pub fn new(redactors: Vec<Redactor>) -> Self {
        Self(redactors)
    }

    /// Feeds a chunk; returns the scrubbed bytes that can no longer be part of a match.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut data = chunk.to_vec();
        for r in &mut self.0 {
            data = r.push(&data);
        }
        data
    }

    /// Bytes the scrubbers hold back now.
    #[cfg(test)]
    fn pending(&self) -> usize {
        self.0.iter().map(Redactor::held).sum()
    }

    /// The most bytes the scrubbers can hold back between chunks.
    pub fn max_held(&self) -> usize {
        self.0.iter().map(Redactor::max_held).sum()
    }

    /// Flushes what every scrubber still holds, in order.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut data = Vec::new();
        for r in &mut self.0 {
            let mut out = r.push(&data);
            out.extend(r.finish());
            data = out;
        }
        data
    }

    /// Scrubs a complete value (an error message).
    pub fn scrub_str(&self, s: &str) -> String {
        self.0.iter().fold(s.to_owned(), |acc, r| r.scrub_str(&acc))
    }

    /// Scrubs every string and key of a parsed JSON value (decoding `\u` escapes can spell out
    /// what the byte scan did not see).
    pub fn scrub_json(&self, v: &mut Value) {
        for r in &self.0 {
            r.scrub_json(v);
        }
    }
}

/// One stream being captured.
#[derive(Debug)]
pub struct Capture {
    name: &'static str,
    keep: Keep,
    per_call: usize,
    reservation: Reservation,
    tail: VecDeque<u8>,
    head: Vec<u8>,
    seen: u64,
    dropped: bool,
    budget_short: bool,
    /// The scrubbers' most held-back bytes, reserved from the budget before any byte is kept.
    hold: usize,
    /// The budget could not cover `hold`: the stream is counted and drained, and nothing of it is
    /// scrubbed or kept (a tail kept later, after bytes the scrubbers never saw, could begin with
    /// the rest of a secret split across that point).
    counting_only: bool,
    scrub: Scrubber,
}

impl Capture {
    /// Captures `name` keeping `keep` up to `per_call` bytes, taken from `budget` as it grows.
    /// What the scrubbers may hold back is reserved first: everything the capture holds at once
    /// is inside its reservation, so the budget's peak is the most the process held.
    pub fn new(
        name: &'static str,
        keep: Keep,
        per_call: usize,
        budget: &Arc<Budget>,
        scrub: Scrubber,
    ) -> Self {
        let hold = scrub.max_held();
        let mut reservation = budget.reserve(hold);
        let counting_only = reservation.bytes() < hold;
        if counting_only {
            reservation = budget.reserve(0);
        }
        Self {
            name,
            keep,
            per_call,
            reservation,
            tail: VecDeque::new(),
            head: Vec::new(),
            seen: 0,
            dropped: false,
            budget_short: counting_only,
            hold: if counting_only { 0 } else { hold },
            counting_only,
            scrub,
        }
    }

    /// Raw bytes from the target so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Scrubs a complete value with this stream's scrubbers (an error message).
    pub fn scrub_str(&self, s: &str) -> String {
        self.scrub.scrub_str(s)
    }

    /// Counts, scrubs and retains (within the bounds) one chunk. Never refuses a chunk: the
    /// stream is drained to its end whatever its size.
    pub fn push(&mut self, chunk: &[u8]) {
        self.seen += chunk.len() as u64;
        if self.counting_only {
            self.dropped |= !chunk.is_empty();
            return;
        }
        let clean = self.scrub.push(chunk);
        self.store(&clean);
    }

    fn held(&self) -> usize {
        self.tail.len() + self.head.len()
    }

    /// How many bytes may be retained, growing the reservation towards `want` first (beyond the
    /// scrubbers' `hold`, which stays reserved).
    fn room_for(&mut self, want: usize) -> usize {
        let want = want.min(self.per_call);
        let have = self.reservation.bytes() - self.hold;
        if want > have {
            let step = (want - have).max(GROW_STEP).min(self.per_call - have);
            if self.reservation.grow(step) < step {
                self.budget_short = true;
            }
        }
        (self.reservation.bytes() - self.hold).min(self.per_call)
    }

    fn store(&mut self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let limit = self.room_for(self.held() + data.len());
        match self.keep {
            Keep::Head => {
                let take = data.len().min(limit.saturating_sub(self.head.len()));
                self.dropped |= take < data.len();
                self.head.extend_from_slice(&data[..take]);
            }
            Keep::Tail => {
                if data.len() >= limit {
                    self.dropped |= data.len() > limit || !self.tail.is_empty();
                    self.tail.clear();
                    self.tail.extend(&data[data.len() - limit..]);
                    return;
                }
                let over = (self.tail.len() + data.len()).saturating_sub(limit);
                if over > 0 {
                    self.dropped = true;
                    self.tail.drain(..over);
                }
                self.tail.extend(data);
            }
        }
    }

    /// Flushes the scrubbers and decodes what was retained.
    pub fn finish(mut self) -> Captured {
        if !self.counting_only {
            let rest = self.scrub.finish();
            self.store(&rest);
        }
        let bytes: Vec<u8> = match self.keep {
            Keep::Head => std::mem::take(&mut self.head),
            Keep::Tail => std::mem::take(&mut self.tail).into(),
        };
        let retained = bytes.len();
        Captured {
            name: self.name,
            keep: self.keep,
            bytes_seen: self.seen,
            bytes_retained: retained,
            dropped: self.dropped,
            budget_short: self.budget_short && self.dropped,
            text: decode(bytes, self.keep, self.dropped),
            scrub: std::mem::take(&mut self.scrub),
            _reservation: self.reservation,
        }
    }
}

/// Decodes retained bytes: a cut may have split a character at the cut end (not a fault of the
/// target, so it is trimmed rather than shown as U+FFFD); anything else invalid becomes U+FFFD.
fn decode(mut bytes: Vec<u8>, keep: Keep, cut: bool) -> String {
    if cut {
        match keep {
            Keep::Tail => {
                let skip = bytes
                    .iter()
                    .take(3)
                    .take_while(|&&b| (0x80..0xC0).contains(&b))
                    .count();
                bytes.drain(..skip);
            }
            Keep::Head => {
                let n = bytes.len();
                for back in 1..=3.min(n) {
                    let b = bytes[n - back];
                    if b >= 0xC0 {
                        let need = if b >= 0xF0 {
                            4
                        } else if b >= 0xE0 {
                            3
                        } else {
                            2
                        };
                        if need > back {
                            bytes.truncate(n - back);
                        }
                        break;
                    }
                    if b < 0x80 {
                        break;
                    }
                }
            }
        }
    }
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A finished capture. Holds its share of the process budget until dropped.
#[derive(Debug)]
pub struct Captured {
    pub name: &'static str,
    pub keep: Keep,
    /// Raw bytes the target sent.
    pub bytes_seen: u64,
    /// Scrubbed bytes kept in memory (≤ the per-call bound).
    pub bytes_retained: usize,
    /// Bytes were left out of what was retained.
    pub dropped: bool,
    /// The process-wide budget, not the per-call bound, limited what was retained.
    pub budget_short: bool,
    /// The retained bytes, decoded.
    pub text: String,
    /// The call's scrubbers, for what decoding or cleaning the text might reassemble.
    scrub: Scrubber,
    _reservation: Reservation,
}

/// What the agent is shown of one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Excerpt {
    /// The marker line (if anything was cut) followed by the sanitized text.
    pub text: String,
    /// The agent did not get everything the target sent.
    pub truncated: bool,
}

impl Captured {
    /// The text the agent sees: control characters and ANSI escapes removed, at most
    /// `max_bytes` of it (the kept end), behind a marker the vault writes when anything was cut,
    /// e.g. `[stderr truncated: kept last 16384 of 184320 bytes; showing the last 4096]`.
    pub fn excerpt(&self, max_bytes: usize) -> Excerpt {
        // Scrubbed again after cleaning: removing a control character from the middle of an
        // echo must not join the halves of a secret back together.
        let clean = self
            .scrub
            .scrub_str(&untrusted_text(&self.text, self.text.len()));
        let shown = match self.keep {
            Keep::Head => untrusted_text(&clean, max_bytes),
            Keep::Tail => {
                let mut start = clean.len().saturating_sub(max_bytes);
                while !clean.is_char_boundary(start) {
                    start += 1;
                }
                clean[start..].to_owned()
            }
        };
        let cut_here = shown.len() < clean.len();
        if !self.dropped && !cut_here {
            return Excerpt {
                text: shown,
                truncated: false,
            };
        }
        let end = match self.keep {
            Keep::Head => "first",
            Keep::Tail => "last",
        };
        let mut marker = format!(
            "[{} truncated: kept {end} {} of {} bytes",
            self.name, self.bytes_retained, self.bytes_seen
        );
        if self.budget_short {
            marker.push_str(" (the process-wide budget was in use by other calls)");
        }
        if cut_here {
            marker.push_str(&format!("; showing the {end} {}", shown.len()));
        }
        marker.push(']');
        let text = match self.keep {
            Keep::Head => format!("{shown}\n{marker}"),
            Keep::Tail => format!("{marker}\n{shown}"),
        };
        Excerpt {
            text,
            truncated: true,
        }
    }

    /// Scrubs a value derived from the text (see `Scrubber::scrub_str`).
    pub fn scrub_str(&self, s: &str) -> String {
        self.scrub.scrub_str(s)
    }

    /// Scrubs a JSON value parsed from the text (see `Scrubber::scrub_json`).
    pub fn scrub_json(&self, v: &mut Value) {
        self.scrub.scrub_json(v)
    }

    /// `{"untrusted_text": …, "note": …}` for a result.
    pub fn untrusted(&self, max_bytes: usize, note: &str) -> (Value, bool) {
        let e = self.excerpt(max_bytes);
        (json!({"untrusted_text": e.text, "note": note}), e.truncated)
    }
}

#[cfg(test)]
mod tests;
