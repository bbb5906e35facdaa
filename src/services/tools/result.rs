//! Tool results: `structuredContent` and a text block carrying the same JSON; failures are
//! `isError: true` with text that starts with `Error:`, names cause and fix, and ends with the
//! JSON on one line. Times are objects with UTC, local time, weekday and distance from now.
use crate::approvals::{Action, State};
use crate::wire::{ToolErrorCode, ToolResult};
use serde_json::{json, Map, Value};

/// A moment as the agent sees it.
pub(super) fn time_obj(utc: &str) -> Value {
    let Ok(ts) = utc.parse::<jiff::Timestamp>() else {
        return json!({"utc": utc, "local": utc, "weekday": "", "in": ""});
    };
    let zoned = ts.to_zoned_datetime(jiff::tz::TimeZone::system());
    let secs = ts.duration_since(jiff::Timestamp::now()).as_secs();
    json!({
        "utc": utc,
        "local": zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        "weekday": zoned.strftime("%a").to_string(),
        "in": relative(secs),
    })
}

fn relative(secs: i64) -> String {
    let a = secs.unsigned_abs();
    let span = if a < 60 {
        format!("{a} s")
    } else if a < 3600 {
        format!("{} min", a / 60)
    } else if a < 86400 {
        format!("{} h", a / 3600)
    } else {
        format!("{} d", a / 86400)
    };
    if secs >= 0 {
        span
    } else {
        format!("{span} ago")
    }
}

/// The result of an action in any state.
pub(super) fn action_result(a: &Action, replayed: bool) -> ToolResult {
    let mut base = Map::new();
    base.insert("action_id".into(), json!(a.id));
    base.insert("state".into(), json!(a.state.as_str()));
    base.insert("summary".into(), json!(a.summary));
    base.insert("replayed".into(), json!(replayed));
    base.insert("created".into(), time_obj(&a.created_at));
    base.insert("expires".into(), time_obj(&a.expires_at));
    let reason = a.reason.clone().unwrap_or_default();
    let details = json!({"action_id": a.id, "state": a.state.as_str()});
    match a.state {
        State::Pending | State::Received | State::Approved | State::Dispatched => {
            base.insert(
                "next".into(),
                json!(format!(
                    "Waiting for a person to approve it in `vault approve`. Call get_action with {{\"action_id\":\"{}\",\"wait_s\":50}} to wait for the result.",
                    a.id
                )),
            );
            ToolResult::ok(Value::Object(base))
        }
        State::Completed => {
            if let Some(Value::Object(r)) = &a.result {
                for (k, v) in r {
                    base.insert(k.clone(), v.clone());
                }
            }
            ToolResult::ok(Value::Object(base))
        }
        State::Denied => ToolResult::error(
            ToolErrorCode::Denied,
            &format!(
                "the person denied action {}{}",
                a.id,
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(": {reason}")
                }
            ),
            "do not retry the same action; ask the person what they want instead",
            details,
            base,
        ),
        State::Expired => ToolResult::error(
            ToolErrorCode::Expired,
            &format!("nobody approved action {} before it expired", a.id),
            "ask the person to run `vault approve`, then send the request again",
            details,
            base,
        ),
        State::Withdrawn => ToolResult::error(
            ToolErrorCode::Withdrawn,
            &format!("action {} was withdrawn ({reason}) and did not run", a.id),
            "send the request again if it is still needed",
            details,
            base,
        ),
        State::FailedBeforeSend => {
            // What the executor kept (an error's third-party detail, wrapped) is part of it.
            if let Some(Value::Object(r)) = &a.result {
                for (k, v) in r {
                    base.insert(k.clone(), v.clone());
                }
            }
            ToolResult::error(
                ToolErrorCode::FailedBeforeSend,
                &format!("action {} failed before anything was sent: {reason}", a.id),
                "check the target and the credential, then send the request again; nothing reached the target",
                details,
                base,
            )
        }
        State::Indeterminate => {
            // What was observed before the outcome became uncertain (streams, a signal) is part
            // of the answer: the agent needs it to decide whether to check or retry.
            if let Some(Value::Object(r)) = &a.result {
                for (k, v) in r {
                    base.insert(k.clone(), v.clone());
                }
            }
            ToolResult::error(
                ToolErrorCode::Indeterminate,
                &format!("action {} may or may not have taken effect: {reason}", a.id),
                "check the target's state with a read-only request before retrying",
                details,
                base,
            )
        }
    }
}

/// A call that waited when the agent stopped: its action as it now is (withdrawn, unless it had
/// already moved on), why the vault locked, and what to do next.
pub(super) fn stopped_result(a: &Action, why: &str) -> ToolResult {
    if a.state != State::Withdrawn {
        return action_result(a, false);
    }
    let mut base = Map::new();
    base.insert("action_id".into(), json!(a.id));
    base.insert("state".into(), json!(a.state.as_str()));
    base.insert("summary".into(), json!(a.summary));
    base.insert("replayed".into(), json!(false));
    base.insert("created".into(), time_obj(&a.created_at));
    ToolResult::error(
        ToolErrorCode::Withdrawn,
        &format!(
            "action {} was withdrawn and did not run: {}",
            a.id,
            super::wait::stop_text(why)
        ),
        "ask the person to run `vault unlock`, then call the tool again if it is still needed",
        json!({"action_id": a.id, "state": a.state.as_str(), "vault": "locked"}),
        base,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_starts_with_error_and_ends_with_the_structured_json() {
        let r = ToolResult::error(
            ToolErrorCode::NotFound,
            "no credential named \"x\"",
            "call list_credentials",
            json!({"name": "x"}),
            Map::new(),
        );
        let text = r.to_json(false)["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(text.starts_with("Error: "));
        let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(last, r.structured);
        let ok = ToolResult::ok(json!({"a": 1}));
        let text = ok.to_json(true)["content"][0]["text"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), ok.structured);
        assert_eq!(ok.to_json(true)["resultType"], "complete");
    }

    /// The code `action_result` must give an action in `state`: the state itself where it is a
    /// failure, none where the result is not an error (waiting, running, completed).
    fn state_code(state: State) -> Option<ToolErrorCode> {
        match state {
            State::Received
            | State::Pending
            | State::Approved
            | State::Dispatched
            | State::Completed => None,
            State::Denied => Some(ToolErrorCode::Denied),
            State::Expired => Some(ToolErrorCode::Expired),
            State::Withdrawn => Some(ToolErrorCode::Withdrawn),
            State::FailedBeforeSend => Some(ToolErrorCode::FailedBeforeSend),
            State::Indeterminate => Some(ToolErrorCode::Indeterminate),
        }
    }

    #[test]
    fn an_action_result_is_an_error_exactly_when_its_state_is_a_code() {
        for state in State::ALL {
            let a = Action {
                id: "act_0".into(),
                session_id: "ses".into(),
                client: "c".into(),
                profile: "default".into(),
                tool: "http_request".into(),
                credential_id: "cred".into(),
                credential_name: "api".into(),
                credential_version: 1,
                state,
                summary: "GET x".into(),
                action_hash: "h".into(),
                created_at: "2026-11-30T13:42:42.123Z".into(),
                updated_at: "2026-11-30T13:42:42.123Z".into(),
                expires_at: "2026-11-30T13:42:42.123Z".into(),
                reason: None,
                result: None,
            };
            let r = action_result(&a, false);
            assert_eq!(r.code(), state_code(state), "{state}");
            assert_eq!(r.is_error, state_code(state).is_some(), "{state}");
            if let Some(code) = state_code(state) {
                assert_eq!(
                    code.as_str(),
                    state.as_str(),
                    "a state-named code spells the state"
                );
            }
        }
    }

    #[test]
    fn times_read_both_ways() {
        assert_eq!(relative(240), "4 min");
        assert_eq!(relative(-7200), "2 h ago");
        let t = time_obj("2026-11-30T13:42:42.123Z");
        assert_eq!(t["weekday"], "Mon");
        assert!(t["in"].as_str().unwrap().ends_with("ago"));
    }
}
