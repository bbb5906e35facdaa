//! Executors: the final boundary. They accept only an `AuthorizedAction` and report what was
//! observed. They run in the custody agent; tests prove "nothing ran" by counting at the target.
pub mod budget;
pub mod guard;
mod http;
pub mod redact;

pub use http::HttpExecutor;

use crate::approvals::AuthorizedAction;
use serde_json::Value;

/// What an executor observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// `completed`, `failed_before_send` or `indeterminate`.
    pub state: crate::approvals::State,
    /// The scrubbed result for the agent (`http` / `ssh` objects of DESIGN §5).
    pub result: Value,
    pub reason: Option<String>,
}

/// Runs authorized actions.
pub trait Executor: Send + Sync {
    fn execute(&self, action: &AuthorizedAction) -> Outcome;
}

/// Text written by a third party, made safe to hand to a model: ANSI escape sequences and control
/// characters (but newline and tab) removed, cut to `max_bytes` on a character boundary.
pub fn untrusted_text(text: &str, max_bytes: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_bytes));
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte; OSC: ESC ] ... BEL or ESC \; otherwise drop ESC + next.
            match chars.next() {
                Some('[') => {
                    for d in chars.by_ref() {
                        if ('@'..='~').contains(&d) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    while let Some(d) = chars.next() {
                        if d == '\u{7}' || (d == '\u{1b}' && chars.peek() == Some(&'\\')) {
                            if d == '\u{1b}' {
                                chars.next();
                            }
                            break;
                        }
                    }
                }
                _ => {}
            }
            continue;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            continue;
        }
        if out.len() + c.len_utf8() > max_bytes {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_text_drops_escapes_and_controls() {
        assert_eq!(
            untrusted_text("a\u{1b}[31mred\u{1b}[0m b\u{7}\r\nc", 100),
            "ared b\nc"
        );
        assert_eq!(untrusted_text("\u{1b}]0;title\u{7}x", 100), "x");
        assert_eq!(untrusted_text("héllo", 2), "h");
    }
}
