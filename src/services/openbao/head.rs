//! The journal's head kept off the machine: at every anchor and at `vault lock` the agent writes
//! `SEQ:HASH` to the KV v2 secret `agent-vault/<vault id>/journal-head` (on the login's journal
//! mount) with check-and-set, and only forward: a head at or past the one written is left alone.
//! `vault verify` and `vault unlock` read it back and refuse a local chain that ends before it or
//! disagrees with it (a `vault.db` and `anchors.jsonl` restored from an older copy). Writes run
//! on a thread of their own, the latest anchor replacing one not yet written, so the journal's
//! writer never waits on the network.
use super::{Remote, RemoteError};
use crate::openbao;
use crate::store::Store;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The field of the KV secret that holds `SEQ:HASH`.
const FIELD: &str = "head";
/// Check-and-set races lost in a row before a write gives up until the next anchor.
const CAS_TRIES: usize = 3;

/// A head of the chain as OpenBao holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteHead {
    pub(crate) seq: i64,
    /// 64 lowercase hex digits.
    pub(crate) hash: String,
}

impl std::fmt::Display for RemoteHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash)
    }
}

/// The KV path of a vault's head.
pub(crate) fn path(vault_id: &str) -> String {
    format!("agent-vault/{vault_id}/journal-head")
}

fn parse(text: &str) -> Option<RemoteHead> {
    let (seq, hash) = text.split_once(':')?;
    let seq: i64 = seq.parse().ok().filter(|s| *s >= 1)?;
    let ok = hash.len() == 64
        && hash
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    ok.then(|| RemoteHead {
        seq,
        hash: hash.to_owned(),
    })
}

/// The KV mount the login keeps the journal's head in.
fn journal_mount(inner: &super::Inner) -> Result<String, RemoteError> {
    let session = inner.session.as_ref().ok_or(RemoteError::NotLoggedIn)?;
    Ok(session.stored.login.journal_mount.clone())
}

impl Remote {
    /// `read_head` as the protocol carries it.
    pub(crate) fn head_view(&self, vault_id: &str) -> crate::wire::protocol::RemoteHeadView {
        use crate::wire::protocol::RemoteHeadView;
        if !self.is_logged_in() {
            return RemoteHeadView {
                logged_in: false,
                head: None,
                error: None,
            };
        }
        match self.read_head(vault_id) {
            Ok(h) => RemoteHeadView {
                logged_in: true,
                head: h.map(|h| (h.seq, h.hash)),
                error: None,
            },
            Err(e) => RemoteHeadView {
                logged_in: true,
                head: None,
                error: Some(e.to_string()),
            },
        }
    }

    /// The head OpenBao holds for `vault_id` (`None`: none written yet). A value that is not a
    /// head is an error: someone wrote it by hand.
    pub(crate) fn read_head(&self, vault_id: &str) -> Result<Option<RemoteHead>, RemoteError> {
        let mut inner = self.lock();
        let mount = journal_mount(&inner)?;
        let result = self.with_token(&mut inner, |client, token| {
            match client.kv_read(token, &mount, &path(vault_id), FIELD, None) {
                Ok(kv) => {
                    use secrecy::ExposeSecret;
                    parse(kv.value.expose_secret()).map(Some).ok_or_else(|| {
                        openbao::Error::Unexpected {
                            path: path(vault_id),
                            what: "its `head` is not SEQ:HASH".into(),
                        }
                    })
                }
                Err(openbao::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        inner.last_error = result.as_ref().err().map(ToString::to_string);
        result
    }

    /// Writes `seq:hash` as the head unless OpenBao already holds one at or past `seq`, or one
    /// this journal does not contain (`ours(seq, hash)` false: a fork, which is never written
    /// over); a lost check-and-set race re-reads and tries again (a few times). Returns what
    /// OpenBao holds now.
    pub(crate) fn write_head(
        &self,
        vault_id: &str,
        seq: i64,
        hash: &[u8; 32],
        ours: &dyn Fn(i64, &str) -> bool,
    ) -> Result<RemoteHead, RemoteError> {
        let wanted = RemoteHead {
            seq,
            hash: hex::encode(hash),
        };
        let mut inner = self.lock();
        let mount = journal_mount(&inner)?;
        let kv_path = path(vault_id);
        let result = self.with_token(&mut inner, |client, token| {
            let mut tries = 0;
            loop {
                // The version to check against, read afresh each try (also after a write whose
                // answer was lost: it may have landed).
                let version = match client.kv_metadata(token, &mount, &kv_path) {
                    Ok(m) => m.current_version,
                    Err(openbao::Error::NotFound { .. }) => 0,
                    Err(e) => return Err(e),
                };
                if version > 0 {
                    let held = client
                        .kv_read(token, &mount, &kv_path, FIELD, None)
                        .ok()
                        .and_then(|kv| {
                            use secrecy::ExposeSecret;
                            parse(kv.value.expose_secret())
                        });
                    if let Some(h) = held {
                        if h.seq >= seq {
                            return Ok(h);
                        }
                        if !ours(h.seq, &h.hash) {
                            return Err(openbao::Error::Unexpected {
                                path: kv_path.clone(),
                                what: format!("it holds the head {h}, which this journal does not contain (vault.db is an older copy or was rewritten); it was not written over. Run `vault verify`"),
                            });
                        }
                    }
                }
                let line = wanted.to_string();
                let ts = crate::time::now_utc();
                match client.kv_write(token, &mount, &kv_path, &[(FIELD, &line), ("ts", &ts)], Some(version)) {
                    Ok(_) => return Ok(wanted.clone()),
                    Err(openbao::Error::CasMismatch { .. }) if tries + 1 < CAS_TRIES => tries += 1,
                    Err(e) => return Err(e),
                }
            }
        });
        inner.last_error = result.as_ref().err().map(ToString::to_string);
        result
    }
}

/// Writes heads on a thread of its own: the latest anchor given replaces one not yet written.
pub(crate) struct Publisher {
    state: Arc<(Mutex<Pending>, Condvar)>,
}

#[derive(Default)]
struct Pending {
    next: Option<(i64, [u8; 32])>,
    busy: bool,
    stop: bool,
}

impl Publisher {
    /// Starts the thread for `vault_id`'s heads through `remote`; `reader`, a read connection to
    /// the vault's store, tells whether OpenBao's head is on this journal before it is moved.
    pub(crate) fn start(remote: Arc<Remote>, vault_id: String, reader: Option<Store>) -> Self {
        let state: Arc<(Mutex<Pending>, Condvar)> = Arc::default();
        let shared = state.clone();
        let spawned = std::thread::Builder::new()
            .name("vault-openbao-head".into())
            .spawn(move || loop {
                let (lock, cv) = &*shared;
                let next = {
                    let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
                    while p.next.is_none() && !p.stop {
                        p = cv.wait(p).unwrap_or_else(|e| e.into_inner());
                    }
                    if p.next.is_none() {
                        return;
                    }
                    p.busy = true;
                    p.next.take()
                };
                if let Some((seq, hash)) = next {
                    if remote.is_logged_in() {
                        let ours = |at: i64, hex_hash: &str| {
                            reader.as_ref().is_some_and(|r| {
                                r.conn()
                                    .query_row("SELECT hash FROM audit WHERE seq = ?1", [at], |row| {
                                        row.get::<_, Vec<u8>>(0)
                                    })
                                    .is_ok_and(|h| hex::encode(h) == hex_hash)
                            })
                        };
                        match remote.write_head(&vault_id, seq, &hash, &ours) {
                            Ok(h) => tracing::debug!(head = %h, "the journal's head is in OpenBao"),
                            Err(e) => tracing::warn!(error = %e, seq, "the journal's head could not be written to OpenBao; the next anchor tries again"),
                        }
                    }
                }
                let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
                p.busy = false;
                cv.notify_all();
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "the OpenBao head writer could not start");
        }
        Self { state }
    }

    /// Queues a head (an anchor just written); returns at once.
    pub(crate) fn publish(&self, seq: i64, hash: [u8; 32]) {
        let (lock, cv) = &*self.state;
        let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
        if p.next.is_none_or(|(s, _)| s < seq) {
            p.next = Some((seq, hash));
        }
        cv.notify_all();
    }

    /// Waits (at most `limit`) until every queued head was written or given up on.
    pub(crate) fn flush(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let (lock, cv) = &*self.state;
        let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
        while p.next.is_some() || p.busy {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!(
                    "the journal's head was not written to OpenBao before the agent stopped"
                );
                return;
            }
            p = cv
                .wait_timeout(p, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let (lock, cv) = &*self.state;
        lock.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_only_in_their_form() {
        let h = "a".repeat(64);
        assert_eq!(
            parse(&format!("7:{h}")),
            Some(RemoteHead {
                seq: 7,
                hash: h.clone()
            })
        );
        for bad in [
            format!("0:{h}"),
            format!("x:{h}"),
            format!("7:{}", "A".repeat(64)),
            "7:ab".into(),
            h,
        ] {
            assert_eq!(parse(&bad), None, "{bad}");
        }
    }
}
