//! What the in-order checks remember of the rows before: each action's last transition and the
//! decision nonces spent so far. Both are hash tables whose keys' hashes a worker thread took with
//! the rest of a row's `Facts` (`key`), and that keep each hash beside its key, so the checking
//! thread hashes nothing: not on a lookup, not when a table grows. The keys' text is kept in one
//! string per table (`Names`), so a new key allocates nothing of its own.
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

/// The text of a table's keys, end to end; a key is its span in it.
#[derive(Debug, Default)]
struct Names(String);

/// Where a key's text is in its table's `Names`.
#[derive(Debug, Clone, Copy)]
struct Name {
    hash: u64,
    at: usize,
    len: usize,
}

impl Names {
    fn add(&mut self, hash: u64, s: &str) -> Name {
        let at = self.0.len();
        self.0.push_str(s);
        Name {
            hash,
            at,
            len: s.len(),
        }
    }

    /// Whether `name` is `s`, whose hash is `hash`.
    fn is(&self, name: &Name, hash: u64, s: &str) -> bool {
        name.hash == hash
            && self.0.as_bytes().get(name.at..name.at + name.len) == Some(s.as_bytes())
    }
}

/// An action's last transition: the seq of its row and the state it moved to.
#[derive(Debug)]
pub(super) struct Last {
    action: Name,
    pub(super) seq: i64,
    pub(super) state: State,
    /// The `key` of its first row's session (0: not taken; only a verifier held to a key does).
    pub(super) session: u64,
}

/// Each action's last transition (seq, state), as far as the journal was checked.
#[derive(Debug, Default)]
pub struct Transitions {
    table: HashTable<Last>,
    names: Names,
}

impl Transitions {
    /// The last transition of `action`: the seq of its row and its state.
    pub fn get(&self, action: &str) -> Option<(i64, State)> {
        let hash = key(action);
        self.table
            .find(hash, |l| self.names.is(&l.action, hash, action))
            .map(|l| (l.seq, l.state))
    }

    /// The `key` of the session of `action`'s first row (0 where it was not taken).
    pub(super) fn session_of(&self, action: &str) -> Option<u64> {
        let hash = key(action);
        self.table
            .find(hash, |l| self.names.is(&l.action, hash, action))
            .map(|l| l.session)
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
        let names = &self.names;
        self.table
            .find_mut(hash, |l| names.is(&l.action, hash, action))
    }

    /// The first transition of `action` (whose `key` is `hash`), which has none yet.
    pub(super) fn first(
        &mut self,
        (hash, action): (u64, &str),
        seq: i64,
        state: State,
        session: u64,
    ) {
        let last = Last {
            action: self.names.add(hash, action),
            seq,
            state,
            session,
        };
        self.table.insert_unique(hash, last, |l| l.action.hash);
    }
}

/// The decision nonces spent by an `action.dispatched` row so far.
#[derive(Debug, Default)]
pub(super) struct Spent {
    table: HashTable<Name>,
    names: Names,
}

impl Spent {
    /// Spends `nonce` (whose `key` is `hash`); false if it was spent before.
    pub(super) fn spend(&mut self, hash: u64, nonce: &str) -> bool {
        let names = &mut self.names;
        let entry = self
            .table
            .entry(hash, |n| names.is(n, hash, nonce), |n| n.hash);
        match entry {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(names.add(hash, nonce));
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_one_hash_stay_apart_and_each_is_found_by_its_text() {
        let mut spent = Spent::default();
        assert!(spent.spend(1, "nonce-a"));
        assert!(spent.spend(1, "nonce-b"), "same hash, another nonce");
        assert!(!spent.spend(1, "nonce-a"));
        assert!(!spent.spend(1, "nonce-b"));
        let mut t = Transitions::default();
        t.first((7, "act_a"), 3, State::Pending, 0);
        assert!(
            t.last_mut(7, "act_b").is_none(),
            "same hash, another action"
        );
        t.first((7, "act_b"), 4, State::Received, 0);
        let last = t.last_mut(7, "act_a").expect("act_a");
        (last.seq, last.state) = (5, State::Approved);
        assert_eq!(t.len(), 2);
        // `get` hashes with `key`, as the workers do.
        let mut real = Transitions::default();
        for i in 0..10_000 {
            let a = format!("act_{i:016x}");
            real.first((key(&a), &a), i, State::Pending, 0);
        }
        assert_eq!(real.get("act_0000000000000007"), Some((7, State::Pending)));
        assert_eq!(real.get("act_7"), None);
    }
}
