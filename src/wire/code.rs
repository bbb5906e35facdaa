//! The error codes a tool result can carry (`error.code`; a plain string in `outputSchema`, so a
//! client never rejects a code added later): one closed list, documented in docs/design.md §5.
//! Self-contained (serde only): the mapping from an action's state lives with the result shapes.
use std::fmt;

/// Declares the enum, `ALL` and `as_str` from one list, so a variant cannot be left out of either.
macro_rules! tool_error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)+) => {
        /// Why a tool call failed, as `error.code` spells it. `tests/result_shapes.rs` produces
        /// every code in `ALL` but `Internal`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ToolErrorCode {
            $($(#[doc = $doc])* $variant,)+
        }

        impl ToolErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &'static [ToolErrorCode] = &[$(ToolErrorCode::$variant,)+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ToolErrorCode::$variant => $name,)+
                }
            }
        }
    };
}

tool_error_codes! {
    /// No such credential in the session's profile, or no such action in the session.
    NotFound => "not_found",
    /// The arguments do not fit the tool's input schema or its rules.
    InvalidArgument => "invalid_argument",
    /// The credential's bindings or rules refuse the request.
    PolicyDenied => "policy_denied",
    /// The person denied the action (or the pause switch denied what waited).
    Denied => "denied",
    /// Nobody decided before the action's expiry.
    Expired => "expired",
    /// The action was withdrawn (cancelled, or the agent stopped) and did not run.
    Withdrawn => "withdrawn",
    /// The pause switch is on.
    Paused => "paused",
    /// No custody agent holds the key.
    Locked => "locked",
    /// There is no vault in the directory.
    NotInitialized => "not_initialized",
    /// The action failed and nothing reached the target.
    FailedBeforeSend => "failed_before_send",
    /// The action may or may not have taken effect.
    Indeterminate => "indeterminate",
    /// Only a pending action can be cancelled.
    NotPending => "not_pending",
    /// Too many actions waiting, or calls in flight, in this session.
    Limit => "limit",
    /// The vault itself failed (store, agent); nothing about the request.
    Internal => "internal",
}

impl ToolErrorCode {
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|c| c.as_str() == s)
    }
}

impl fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ToolErrorCode;

    #[test]
    fn serde_spells_every_code_as_as_str_does() {
        let mut seen = std::collections::HashSet::new();
        for &c in ToolErrorCode::ALL {
            assert!(seen.insert(c), "{c} twice in ALL");
            let json = serde_json::to_value(c).unwrap();
            assert_eq!(json, c.as_str());
            assert_eq!(serde_json::from_value::<ToolErrorCode>(json).unwrap(), c);
            assert_eq!(ToolErrorCode::parse(c.as_str()), Some(c));
        }
        assert_eq!(ToolErrorCode::parse("nope"), None);
    }
}
