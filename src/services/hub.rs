//! Where committed changes are announced inside the agent: each watched action's latest row, a
//! counter of approval-queue changes, the journal head, and the pause switch. The writer thread
//! publishes after every commit; waiting tool calls, `vault approve` and `vault log --follow`
//! subscribe.
use crate::approvals::Action;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::watch;

pub(crate) struct Hub {
    actions: Mutex<HashMap<String, watch::Sender<Action>>>,
    queue: watch::Sender<u64>,
    head: watch::Sender<i64>,
    /// The pause switch as the last committed `vault.pause`/`vault.resume` row set it: why, or
    /// `None` once lifted. Sent only when such a row commits.
    pause: watch::Sender<Option<String>>,
}

impl Default for Hub {
    fn default() -> Self {
        Self {
            actions: Mutex::default(),
            queue: watch::channel(0).0,
            head: watch::channel(0).0,
            pause: watch::channel(None).0,
        }
    }
}

impl Hub {
    /// Follows one action, starting from `current`. Subscribe before reading the state you act on,
    /// so no change in between is missed.
    pub(crate) fn watch_action(&self, current: &Action) -> watch::Receiver<Action> {
        let mut map = self.actions.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(current.id.clone())
            .or_insert_with(|| watch::channel(current.clone()).0)
            .subscribe()
    }

    /// Changes of the approval queue: a commit that moved an action into or out of `pending`.
    pub(crate) fn watch_queue(&self) -> watch::Receiver<u64> {
        self.queue.subscribe()
    }

    /// The journal head seq after each commit.
    pub(crate) fn watch_head(&self) -> watch::Receiver<i64> {
        self.head.subscribe()
    }

    /// Each time the pause switch is pulled (why) or lifted (`None`).
    pub(crate) fn watch_pause(&self) -> watch::Receiver<Option<String>> {
        self.pause.subscribe()
    }

    /// A `vault.pause` (`Some(why)`) or `vault.resume` (`None`) row committed.
    pub(super) fn switched(&self, paused: Option<String>) {
        self.pause.send_replace(paused);
    }

    /// `queue`: whether the commit moved an action into or out of the approval queue (the
    /// queue's watchers, `vault approve` and the expiry timer, each query the database when
    /// told, so an action that never waits does not wake them).
    pub(super) fn publish(&self, changed: Vec<Action>, head: i64, queue: bool) {
        if !changed.is_empty() {
            let mut map = self.actions.lock().unwrap_or_else(|p| p.into_inner());
            for a in changed {
                if let Some(tx) = map.get(&a.id) {
                    tx.send_replace(a);
                }
            }
            map.retain(|_, tx| tx.receiver_count() > 0);
        }
        if queue {
            self.queue.send_modify(|n| *n += 1);
        }
        self.head.send_replace(head);
    }
}
