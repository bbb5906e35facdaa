//! A process-wide byte budget for retained output, so fifty calls that each respect their own
//! bound cannot together hold more than the process bound (docs/design.md §6).
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes still free in the process.
#[derive(Debug)]
pub struct Budget {
    total: usize,
    free: AtomicUsize,
    /// The least that was ever free: `total - low` is the most the process ever held at once.
    low: AtomicUsize,
}

/// Bytes taken from a budget; given back on drop.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    pub fn new(total: usize) -> Arc<Self> {
        Arc::new(Self {
            total,
            free: AtomicUsize::new(total),
            low: AtomicUsize::new(total),
        })
    }

    /// Takes up to `want` bytes (possibly fewer, possibly none when the process is at its bound).
    pub fn reserve(self: &Arc<Self>, want: usize) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: self.take(want),
        }
    }

    fn take(&self, want: usize) -> usize {
        let mut current = self.free.load(Ordering::Acquire);
        loop {
            let take = want.min(current);
            match self.free.compare_exchange_weak(
                current,
                current - take,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    self.low.fetch_min(current - take, Ordering::AcqRel);
                    return take;
                }
                Err(now) => current = now,
            }
        }
    }

    pub fn free(&self) -> usize {
        self.free.load(Ordering::Acquire)
    }

    /// The most bytes held at once since the process started (≤ the bound, by construction).
    pub fn peak(&self) -> usize {
        self.total - self.low.load(Ordering::Acquire)
    }
}

impl Reservation {
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes up to `more` further bytes from the budget; returns how many it got.
    pub fn grow(&mut self, more: usize) -> usize {
        let got = self.budget.take(more);
        self.bytes += got;
        got
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.free.fetch_add(self.bytes, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_share_the_process_bound_and_come_back() {
        let b = Budget::new(100);
        let r1 = b.reserve(60);
        let r2 = b.reserve(60);
        assert_eq!((r1.bytes(), r2.bytes(), b.free()), (60, 40, 0));
        assert_eq!(b.peak(), 100);
        assert_eq!(b.reserve(10).bytes(), 0);
        drop(r1);
        assert_eq!(b.free(), 60);
        drop(r2);
        assert_eq!(b.free(), 100);
        let mut r3 = b.reserve(0);
        assert_eq!((r3.grow(70), r3.grow(70), b.free()), (70, 30, 0));
        drop(r3);
        assert_eq!(b.free(), 100);
    }
}
