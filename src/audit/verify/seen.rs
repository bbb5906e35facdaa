//! What the in-order checks remember of the rows before: each action's last transition and the
//! decision nonces spent so far. Both are hash tables whose keys' hashes a worker thread took with
//! the rest of a row's `Facts` (`key`), and that keep each hash beside its key, so the checking
//! thread hashes nothing: not on a lookup, not when a table grows.
use crate::wire::State;
use hashbrown::hash_table::{Entry, HashTable};
use std::hash::BuildHasher;
use std::sync::OnceLock;

/// The hash of an action id or a nonce, the same on every thread of this process: foldhash,
/// seeded at random once per process, so a journal cannot be written to make keys collide.
pub(super) fn key(s: &str) -> u64 {
    static SEED: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    SEED.get_or_init(Default::default).hash_one(s)
}

/// An action's last transition: the seq of its row and the state it moved to.
#[derive(Debug)]
pub(super) struct Last {
    hash: u64,
    action: Box<str>,
    pub(super) seq: i64,
    pub(super) state: State,
}

/// Each action's last transition (seq, state), as far as the journal was checked.
#[derive(Debug, Default)]
pub struct Transitions {
    table: HashTable<Last>,
}

impl Transitions {
    /// The last transition of `action`: the seq of its row and its state.
    pub fn get(&self, action: &str) -> Option<(i64, State)> {
        let hash = key(action);
        self.table
            .find(hash, |l| l.hash == hash && *l.action == *action)
            .map(|l| (l.seq, l.state))
    }

    /// How many actions have a transition.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no action has one.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The last transition of `action`, whose `key` is `hash`.
    pub(super) fn last_mut(&mut self, hash: u64, action: &str) -> Option<&mut Last> {
        self.table
            .find_mut(hash, |l| l.hash == hash && *l.action == *action)
    }

    /// The first transition of `action` (whose `key` is `hash`), which has none yet.
    pub(super) fn first(&mut self, hash: u64, action: &str, seq: i64, state: State) {
        let last = Last {
            hash,
            action: action.into(),
            seq,
            state,
        };
        self.table.insert_unique(hash, last, |l| l.hash);
    }
}

/// The decision nonces spent by an `action.dispatched` row so far.
#[derive(Debug, Default)]
pub(super) struct Spent {
    table: HashTable<(u64, Box<str>)>,
}

impl Spent {
    /// Spends `nonce` (whose `key` is `hash`); false if it was spent before.
    pub(super) fn spend(&mut self, hash: u64, nonce: &str) -> bool {
        let entry = self
            .table
            .entry(hash, |(h, n)| *h == hash && **n == *nonce, |(h, _)| *h);
        match entry {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert((hash, nonce.into()));
                true
            }
        }
    }
}
