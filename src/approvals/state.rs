//! The states of an action (docs/design.md §4) and which of them are final.
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Received,
    Pending,
    Approved,
    Denied,
    Expired,
    Withdrawn,
    Dispatched,
    Completed,
    FailedBeforeSend,
    Indeterminate,
}

impl State {
    pub const ALL: [State; 10] = [
        State::Received,
        State::Pending,
        State::Approved,
        State::Denied,
        State::Expired,
        State::Withdrawn,
        State::Dispatched,
        State::Completed,
        State::FailedBeforeSend,
        State::Indeterminate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Received => "received",
            State::Pending => "pending",
            State::Approved => "approved",
            State::Denied => "denied",
            State::Expired => "expired",
            State::Withdrawn => "withdrawn",
            State::Dispatched => "dispatched",
            State::Completed => "completed",
            State::FailedBeforeSend => "failed_before_send",
            State::Indeterminate => "indeterminate",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

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

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
