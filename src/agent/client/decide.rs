//! A person's decision, through the client: how they proved it was theirs (`Proof`), the signed
//! verdict for exactly the request whose hash was re-derived (a session grant where the
//! credential's policy is `session`), and what the agent recorded (`Decided`).
use super::{Client, ClientError};
use crate::agent::protocol::{ApprovalView, Reply, Request};
use crate::approvals::{Action, Verdict};
use crate::wire::Approval;
use std::time::Duration;

/// How the person proved a decision was theirs (`ApprovalMethod`, with what the agent checks).
#[derive(Debug)]
pub enum Proof {
    /// The approval PIN, typed on the card.
    Pin(crate::wire::Secret),
    /// The passphrase, typed for this one decision (`vault approve --id`).
    Passphrase,
    /// A key press alone: enough to deny, never to approve.
    Key,
}

impl Proof {
    pub fn method(&self) -> crate::wire::ApprovalMethod {
        match self {
            Proof::Pin(_) => crate::wire::ApprovalMethod::Pin,
            Proof::Passphrase => crate::wire::ApprovalMethod::Passphrase,
            Proof::Key => crate::wire::ApprovalMethod::Key,
        }
    }
}

/// A decision the agent recorded, and the end and scope of the session grant it carried, if any.
#[derive(Debug)]
pub struct Decided {
    pub action: Action,
    pub session_until: Option<jiff::Timestamp>,
    pub scope: Option<crate::wire::GrantScope>,
}

/// What asks the security key for a touch: given the challenge and the registered credential
/// ids it may sign with, the key's proof, or why there is none (nothing is sent then).
pub type Toucher<'a> =
    &'a mut dyn FnMut(&[u8; 32], &[Vec<u8>]) -> Result<crate::wire::touch::TouchProof, String>;

impl Client {
    /// Signs `verdict` for the action in `v`, after checking that its request hashes to the
    /// action's hash, and has the agent record it. On a credential whose policy is `session`, an
    /// approval covers the session (a grant until `grant_ttl` from now), as the card says.
    /// `proof` is how the person proved it was them: the PIN typed on the card (sent to the
    /// agent, which checks it), or the passphrase typed for this decision.
    pub fn decide(
        &mut self,
        approver: &crate::keys::ApproverKey,
        v: &ApprovalView,
        verdict: &Verdict,
        proof: Proof,
        grant_ttl: Duration,
    ) -> Result<Decided, ClientError> {
        self.decide_touched(approver, v, verdict, proof, grant_ttl, None)
    }

    /// `decide`, where an approval the view says needs a touch gets it from `toucher` (over the
    /// vault id, the action hash and the decision's nonce) before anything is sent.
    pub fn decide_touched(
        &mut self,
        approver: &crate::keys::ApproverKey,
        v: &ApprovalView,
        verdict: &Verdict,
        proof: Proof,
        grant_ttl: Duration,
        toucher: Option<Toucher<'_>>,
    ) -> Result<Decided, ClientError> {
        let normalized = v.verified_request().map_err(ClientError::Protocol)?;
        let a = &v.action;
        // The view names the policy in force; an older agent's view does not, so ask it.
        let policy = match v.policy {
            Some(p) => Some(p),
            None => self.policy_of(a)?,
        };
        let verdict = match verdict {
            // A touch is per action: no session grant where one is needed.
            Verdict::Approve | Verdict::ApproveSession if v.touch_keys.is_some() => {
                Verdict::Approve
            }
            Verdict::Approve if policy == Some(Approval::Session) => Verdict::ApproveSession,
            other => other.clone(),
        };
        let mut signed = crate::approvals::sign_decision(
            approver,
            &self.vault_id,
            &a.id,
            &a.action_hash,
            &normalized,
            &a.expires_at,
            &verdict,
            proof.method(),
            grant_ttl,
        );
        if let (Some(allowed), Verdict::Approve) = (&v.touch_keys, &verdict) {
            let Some(toucher) = toucher else {
                return Err(ClientError::Touch("this credential's approvals need a touch of a registered security key; approve it in `vault approve` on a terminal, with the key plugged in. Nothing was approved".into()));
            };
            let nonce =
                serde_json::from_str::<crate::wire::DecisionPayload>(&signed.decision.payload)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?
                    .nonce;
            let challenge = crate::fido::challenge(&self.vault_id, &a.action_hash, &nonce);
            let allow: Vec<Vec<u8>> = allowed.iter().filter_map(|h| hex::decode(h).ok()).collect();
            signed.touch = Some(toucher(&challenge, &allow).map_err(ClientError::Touch)?);
        }
        let grant = signed
            .grant
            .as_ref()
            .and_then(|g| serde_json::from_str::<crate::wire::GrantPayload>(&g.payload).ok());
        let session_until = grant.as_ref().map(|g| g.expires_at);
        let pin = match proof {
            Proof::Pin(p) => Some(p),
            Proof::Passphrase | Proof::Key => None,
        };
        match self.call(Request::Decide {
            decision: signed,
            pin,
        })? {
            Reply::Action(action) => Ok(Decided {
                action,
                session_until,
                scope: grant.map(|g| g.scope),
            }),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }

    /// The policy in force for the credential of `a` (`each` unless the approver signed it), as
    /// the agent lists it; `None` if it is gone.
    pub fn policy_of(&mut self, a: &Action) -> Result<Option<Approval>, ClientError> {
        match self.call(Request::Credentials {
            profile: Some(a.profile.clone()),
        })? {
            Reply::Credentials(list) => Ok(list
                .iter()
                .find(|l| l.credential.id == a.credential_id)
                .map(|l| l.effective())),
            other => Err(ClientError::Protocol(format!("{other:?}"))),
        }
    }
}
