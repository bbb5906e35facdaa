//! Executors: the final boundary. They accept only an `AuthorizedAction` and report what was
//! observed. `RecordingExecutor` is the test seam that proves nothing ran: it records each call
//! and performs none (it can only prevent execution, never cause it).
use crate::approvals::AuthorizedAction;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;

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

/// Records every call as a JSON line (action id, tool, hash; never the secret) and runs nothing.
/// Enabled in `vault mcp` by `VAULT_EXECUTOR_RECORD=FILE`, which replaces every executor.
#[derive(Debug)]
pub struct RecordingExecutor {
    path: PathBuf,
    lock: Mutex<()>,
}

impl RecordingExecutor {
    /// Creates (or truncates) the record file, so a test can tell "seam active, zero calls" apart
    /// from "seam not wired".
    pub fn create(path: PathBuf) -> std::io::Result<Self> {
        std::fs::File::create(&path)?;
        Ok(Self {
            path,
            lock: Mutex::new(()),
        })
    }
}

impl Executor for RecordingExecutor {
    fn execute(&self, action: &AuthorizedAction) -> Outcome {
        let _guard = self.lock.lock();
        let line = json!({"action_id": action.action_id(), "tool": action.request().tool(), "hash": action.action_hash()});
        let written = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.path)
            .and_then(|mut f| writeln!(f, "{line}"));
        Outcome {
            state: crate::approvals::State::FailedBeforeSend,
            result: json!({}),
            reason: Some(match written {
                Ok(()) => "recorded by the test executor; nothing was sent".into(),
                Err(e) => format!("the test executor could not record: {e}"),
            }),
        }
    }
}
