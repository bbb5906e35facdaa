//! What a card says about one pending action (`CardData`), each fact in the words the card and
//! the full view show it in. Every fact comes from the normalized request whose hash the approver
//! re-derived (`ApprovalView::verified_request`), never from text the agent wrote: the credential
//! (name, profile, version), the method and URL (or user, host, port, pinned key and command,
//! with any shell syntax named), the query (`name = value`), every header the agent supplied, the
//! body, readable (`term::show_body`), and what `[s]` would grant. A body too long for the full
//! view to show whole makes the action impossible to approve (`CardData::approvable`). A
//! credential changed since the person last approved one of its actions says so, old and new.
//! Every string goes through `term::escape`. `card_data` fills it from the agent's view, and
//! leaves the request out unless it re-derives the action's hash.
use super::layout::{Emph, Part};
use crate::agent::protocol::ApprovalView;
use crate::term::{escape, show_body, MAX_SHOWN_BODY_BYTES};
use crate::wire::{CredentialRef, NormalizedAction};

/// What a card shows about one pending action; filled by `card_data` from the agent's view.
#[derive(Debug, Clone, Default)]
pub(super) struct CardData {
    pub id: String,
    pub tool: String,
    pub action_hash: String,
    pub created_at: String,
    pub expires_at: String,
    pub client_name: String,
    pub client_version: String,
    pub parent_exe: String,
    /// The session came through `vault run`'s sandbox (the agent knows from the channel).
    pub contained: bool,
    /// The normalized action (what the hash covers), or `None` when it did not verify.
    pub normalized: Option<NormalizedAction>,
    pub body: Option<Vec<u8>>,
    /// A body the agent did not send, too large for a frame (`ApprovalView::body_withheld_bytes`):
    /// its length. No card shows it, so the action cannot be approved.
    pub withheld: Option<u64>,
    /// How the credential changed since the person last approved one of its actions.
    pub changed: Option<crate::agent::protocol::CredentialChange>,
    /// How long `[s]` grants (`[approvals] session_grant_seconds`).
    pub grant_for: std::time::Duration,
    /// Approving needs a touch of a registered security key (`--presence`).
    pub touch: bool,
}

impl CardData {
    /// The body as shown to a person, if any.
    pub(super) fn shown_body(&self) -> Option<String> {
        self.body.as_deref().map(show_body)
    }

    /// `Err(why)` when the action must not be approved because the person cannot be shown all
    /// of it.
    pub(super) fn approvable(&self) -> Result<(), String> {
        if self.normalized.is_none() {
            return Err("does not carry a request that re-derives its hash, so it cannot be approved. Deny it ([d])".into());
        }
        if let Some(n) = self.withheld {
            return Err(format!(
                "sends a body of {n} bytes, more than a card can show, so it cannot be approved. Deny it ([d]); a body this large is sent only where no card is asked (a credential set to `--approval never`, or a grant the session holds)"
            ));
        }
        match self.shown_body() {
            Some(b) if b.len() > MAX_SHOWN_BODY_BYTES => Err(format!(
                "its body takes {} bytes to show, more than the {MAX_SHOWN_BODY_BYTES} a full view shows whole, so it cannot be approved. Deny it ([d]) so the agent sends a smaller one",
                b.len()
            )),
            _ => Ok(()),
        }
    }

    /// What runs, on one line: `DELETE https://…?…` or `deploy@host:22 $ uptime`.
    pub(super) fn headline(&self) -> String {
        match &self.normalized {
            Some(NormalizedAction::Http(h)) => format!("{} {}", escape(&h.method), escape(&h.url)),
            Some(NormalizedAction::Ssh(s)) => {
                format!("{} $ {}", ssh_target(s), escape(&s.command))
            }
            Some(NormalizedAction::Network(n)) => {
                escape(&crate::approvals::network_summary(&n.host, n.port))
            }
            None => "(a request that does not match its hash: not shown)".into(),
        }
    }

    /// Where an HTTP request goes, as the decision rests on it: the method and
    /// `scheme://host:port/path`, the port always spelled out (the query is shown, and cut
    /// when the terminal is short, on lines of its own).
    fn http_target(h: &crate::wire::NormalizedHttp) -> String {
        let Ok(u) = url::Url::parse(&h.url) else {
            return format!("{} {}", escape(&h.method), escape(&h.url));
        };
        let port = u
            .port_or_known_default()
            .map_or(String::new(), |p| format!(":{p}"));
        format!(
            "{} {}://{}{port}{}",
            escape(&h.method),
            escape(u.scheme()),
            escape(u.host_str().unwrap_or("")),
            escape(u.path())
        )
    }

    pub(super) fn credential_ref(&self) -> Option<&CredentialRef> {
        self.normalized
            .as_ref()
            .and_then(NormalizedAction::credential)
    }

    /// The credential as the hash covers it: `api (profile default, version 3)`.
    pub(super) fn credential(&self) -> String {
        // Team mode: the KV version of the OpenBao secret the hash covers, so the person sees
        // which one an approval sends.
        let secret = match &self.normalized {
            Some(NormalizedAction::Http(h)) => h
                .secret_version
                .map(|v| format!(", OpenBao secret version {v}"))
                .unwrap_or_default(),
            _ => String::new(),
        };
        match (self.credential_ref(), &self.normalized) {
            (Some(c), _) => format!(
                "{} (profile {}, version {}{secret})",
                escape(&c.name),
                escape(&c.profile),
                c.version
            ),
            (None, Some(NormalizedAction::Network(_))) => {
                "none: the vault only lets the connection through (TLS stays end to end)".into()
            }
            (None, _) => "? (profile ?, version ?)".into(),
        }
    }

    /// Every query parameter (`name = value`) and every header the agent supplied
    /// (`name: value`) of an HTTP request.
    pub(super) fn query_and_headers(&self) -> (Vec<String>, Vec<String>) {
        let Some(NormalizedAction::Http(h)) = &self.normalized else {
            return (Vec::new(), Vec::new());
        };
        let query = url::Url::parse(&h.url)
            .map(|u| {
                u.query_pairs()
                    .map(|(k, v)| format!("{} = {}", escape(&k), escape(&v)))
                    .collect()
            })
            .unwrap_or_default();
        let headers = h
            .headers
            .iter()
            .map(|(k, v)| format!("{}: {}", escape(k), escape(v)))
            .collect();
        (query, headers)
    }

    /// The lines that say what runs where, each a fact the decision rests on, as (part,
    /// emphasis, label, text): the method and URL; or the login, the command, the pinned host
    /// key and the command's shell syntax.
    pub(super) fn what_runs(&self) -> Vec<(Part, Emph, &'static str, String)> {
        match &self.normalized {
            Some(NormalizedAction::Http(h)) => {
                vec![(Part::Top, Emph::Bold, "", Self::http_target(h))]
            }
            Some(NormalizedAction::Ssh(s)) => {
                let mut out = vec![
                    (Part::Top, Emph::Bold, "ssh", ssh_target(s)),
                    (Part::Top, Emph::Bold, "command", escape(&s.command)),
                    (
                        Part::Request,
                        Emph::Plain,
                        "host key",
                        format!("{} (pinned)", escape(&s.host_key)),
                    ),
                ];
                for what in crate::policy::shell_syntax(&s.command) {
                    out.push((Part::Request, Emph::Bold, "!! shell", what.to_owned()));
                }
                out
            }
            Some(NormalizedAction::Network(n)) => vec![
                (Part::Top, Emph::Bold, "", self.headline()),
                (
                    Part::Top,
                    Emph::Bold,
                    "!! network",
                    format!(
                        "the contained client asks to reach {}, which its allow list does not name; what it sends there leaves the vault's sight",
                        escape(&crate::policy::scope::authority(&n.host, n.port))
                    ),
                ),
            ],
            None => vec![(Part::Top, Emph::Bold, "", self.headline())],
        }
    }

    /// What changed in the credential since the person last approved one of its actions.
    pub(super) fn change_lines(&self) -> Vec<String> {
        let Some(c) = &self.changed else {
            return Vec::new();
        };
        let mut out = vec![format!(
            "!! credential changed since you last approved one of its actions (then version {}):",
            c.approved_version
        )];
        for f in &c.fields {
            let show = |v: &Option<String>| v.as_deref().map_or("(not recorded)".into(), escape);
            out.push(match (&f.old, &f.new) {
                (None, None) => format!("   {} changed", escape(&f.field)),
                _ => format!(
                    "   {}: {} → {}",
                    escape(&f.field),
                    show(&f.old),
                    show(&f.new)
                ),
            });
        }
        out
    }
}

/// `user@host:port` of an SSH action (an IPv6 host in brackets).
fn ssh_target(s: &crate::wire::NormalizedSsh) -> String {
    let host = if s.host.contains(':') {
        format!("[{}]", escape(&s.host))
    } else {
        escape(&s.host)
    };
    format!("{}@{host}:{}", escape(&s.user), s.port)
}

/// What `[s]` would grant, on one line: the scope (`policy::scope::grant_scope` of the request
/// whose hash was checked, the same function the agent checks the signed grant against), the
/// credential version, and for how long: `  [s] covers  GET, HEAD under /a/ (reads only, any
/// query); api version 3; this session, 60 min (to 15:10)`.
pub(super) fn grant_line(d: &CardData) -> String {
    if d.touch {
        return "  [s] covers  nothing: a key touch is per action; [s] approves this one".into();
    }
    let Some(n) = &d.normalized else {
        return "  [s] covers  nothing: this action cannot be approved".into();
    };
    let scope = crate::policy::scope::describe(&crate::policy::scope::grant_scope(n));
    let of = match n.credential() {
        Some(c) => format!("; {} version {}", escape(&c.name), c.version),
        None => String::new(),
    };
    let secs = d.grant_for.as_secs();
    let end = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(
            secs.try_into().unwrap_or(i64::MAX),
        ))
        .map_or_else(
            |_| "?".into(),
            |t| {
                t.to_zoned_datetime(jiff::tz::TimeZone::system())
                    .strftime("%H:%M")
                    .to_string()
            },
        );
    format!(
        "  [s] covers  {}{of}; this session, {} min (to {end})",
        escape(&scope),
        secs.div_ceil(60)
    )
}

/// Everything the card of `v` shows. The request is shown only once it re-derives the action's
/// hash (`ApprovalView::verified_request`); otherwise the card says so and cannot be approved.
pub(super) fn card_data(v: &ApprovalView) -> CardData {
    let a = &v.action;
    let (normalized, body) = match v.verified_request() {
        Ok(n) => (
            Some(n),
            v.body_hex.as_deref().and_then(|h| hex::decode(h).ok()),
        ),
        // `CardData::approvable` refuses a card with no request.
        Err(_) => (None, None),
    };
    CardData {
        id: a.id.clone(),
        tool: a.tool.clone(),
        action_hash: a.action_hash.clone(),
        created_at: a.created_at.clone(),
        expires_at: a.expires_at.clone(),
        client_name: v
            .session
            .as_ref()
            .map_or(a.client.clone(), |s| s.client.name.clone()),
        client_version: v
            .session
            .as_ref()
            .map(|s| s.client.version.clone())
            .unwrap_or_default(),
        // The program that started `vault mcp`; a process that hides itself (undumpable, as
        // `vault demo` is) is named by its pid and said to be unreadable, never shown as "?".
        parent_exe: match v.session.as_ref().map(|s| &s.parent) {
            Some(p) => match (&p.exe, p.pid) {
                (Some(exe), _) => exe.clone(),
                (None, Some(pid)) => format!("pid {pid}, whose program cannot be read"),
                (None, None) => "a process the agent could not see".into(),
            },
            None => "no session record".into(),
        },
        contained: v.session.as_ref().is_some_and(|s| s.contained),
        normalized,
        body,
        withheld: v.body_withheld_bytes,
        changed: v.changed.clone(),
        grant_for: std::time::Duration::ZERO,
        touch: v.touch_keys.is_some(),
    }
}
