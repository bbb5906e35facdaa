//! An action's states (docs/design.md §4), as every process and the journal spell them. Which
//! moves are legal, and how a state reads to a person, is `approvals::state`'s.
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
