//! The states of an action (docs/design.md §4) and which of them are final.

pub use crate::wire::State;

impl State {
    /// No further transition happens from a terminal state (it has no successors).
    pub fn is_terminal(self) -> bool {
        self.successors().is_empty()
    }

    /// How the state reads to a person (`vault log` colours by it).
    pub fn tone(self) -> Tone {
        match self {
            State::Completed => Tone::Done,
            State::Received | State::Pending | State::Approved | State::Dispatched => {
                Tone::InProgress
            }
            State::Indeterminate => Tone::Uncertain,
            State::Denied | State::Expired | State::Withdrawn | State::FailedBeforeSend => {
                Tone::Failed
            }
        }
    }

    /// The states an action may move to from this one (docs/design.md §4). Every transition, and
    /// `vault verify` reading the journal, holds to this table.
    pub fn successors(self) -> &'static [State] {
        use State::*;
        match self {
            Received => &[Dispatched, FailedBeforeSend, Withdrawn, Denied],
            Pending => &[Approved, Denied, Expired, Withdrawn],
            Approved => &[Dispatched, FailedBeforeSend, Withdrawn, Denied],
            Dispatched => &[Completed, FailedBeforeSend, Indeterminate],
            Denied | Expired | Withdrawn | Completed | FailedBeforeSend | Indeterminate => &[],
        }
    }

    /// Whether `self → to` is a legal transition.
    pub fn can_go(self, to: State) -> bool {
        self.successors().contains(&to)
    }

    /// Whether a move into this state can change the approval queue (the actions in `Pending`):
    /// a move into `Pending` or out of it, read from the table above. An action its policy lets
    /// run (received, dispatched, then done) never touches the queue.
    pub fn moves_the_queue(self) -> bool {
        self == State::Pending || State::Pending.can_go(self)
    }

    /// The states an action may start in.
    pub fn is_initial(self) -> bool {
        matches!(self, State::Pending | State::Received)
    }
}

/// A state as a person reads it: done, still moving, maybe done, or not done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Done,
    InProgress,
    Uncertain,
    Failed,
}
