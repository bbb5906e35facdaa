//! Team mode in a tool call: the KV version of a credential's OpenBao secret, resolved off the
//! agent's thread before the job that submits the call, and applied to the request (hashed with
//! it, so an approval of one version never sends another).
use super::Env;
use crate::credentials::{self, Target};
use crate::policy::ValidatedRequest;
use crate::wire::OpenBaoRef;
use std::sync::Arc;

/// Team mode: what OpenBao said of a credential's secret before the job that submits the call.
pub(super) enum Remote {
    /// Not asked (yet): the first job finds out whether the credential needs it.
    Unknown,
    /// The secret is kept here in OpenBao at this KV version.
    Resolved(OpenBaoRef, u64),
    /// The secret is kept here, and OpenBao could not say which version: why.
    Failed(OpenBaoRef, String),
}

impl Remote {
    /// Sets the version an HTTP request sends, or says why it cannot run (the action is then
    /// recorded as failed before sending): OpenBao's fault (not logged in among them), or the
    /// credential's reference changed between the lookup and now.
    pub(super) fn apply(
        self,
        cred: &credentials::Credential,
        request: &mut ValidatedRequest,
    ) -> Option<String> {
        let Target::Http(t) = &cred.target else {
            return None;
        };
        let wanted = t.secret_from.as_ref()?;
        match self {
            Remote::Resolved(r, v) if &r == wanted => {
                request.set_secret_version(Some(v));
                None
            }
            Remote::Failed(r, why) if &r == wanted => Some(why),
            _ => Some(
                "the credential's OpenBao reference changed while the call was made; ask again"
                    .into(),
            ),
        }
    }
}

/// Team mode: the KV version a call now sends (cached, or read now off the agent's thread).
pub(super) async fn resolve(env: &Arc<Env>, r: OpenBaoRef) -> Remote {
    let remote = env.openbao.clone();
    let fallback = Remote::Failed(r.clone(), "openbao_error: the OpenBao lookup failed".into());
    tokio::task::spawn_blocking(move || match remote.current_version(&r) {
        Ok(v) => Remote::Resolved(r, v),
        Err(e) => {
            tracing::warn!(reference = %r, error = %e, "the OpenBao secret's version could not be read");
            let why = format!("{}: {e}", e.kind());
            Remote::Failed(r, why)
        }
    })
    .await
    .unwrap_or(fallback)
}
