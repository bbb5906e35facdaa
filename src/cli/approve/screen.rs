//! The interactive approval queue on the controlling terminal (never stdin/stdout, so
//! `yes | vault approve` cannot answer it): passphrase once, then one card per waiting action.
//! Keys: [a] approve once, [s] approve for this session, [d] deny (with an optional reason),
//! [v] view in full, [q] quit. A bell (and a desktop notification where `notify-send` exists)
//! marks a new card; the screen is redrawn only when the queue changes or a key is pressed; after
//! 15 idle minutes the passphrase is asked again.
use crate::agent::client::Client;
use crate::agent::protocol::{ApprovalView, Event, Reply, Request};
use crate::approvals::Verdict;
use crate::keys::{KeyMaterial, PassphraseSource};
use crate::paths::VaultPaths;
use crate::vault::Vault;
use crate::Exit;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::time::Duration;
use std::time::Instant;

const TICK_MS: i64 = 250;

/// The terminal in no-echo, one-key-at-a-time mode; restored on drop.
struct Tty {
    file: File,
    saved: rustix::termios::Termios,
}

impl Tty {
    fn open() -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|_| anyhow::anyhow!("`vault approve` needs a terminal; without one use `vault approve --id ACT --approve|--deny --passphrase-stdin`"))?;
        let saved = rustix::termios::tcgetattr(&file)
            .map_err(|_| anyhow::anyhow!("cannot read the terminal's settings"))?;
        let tty = Self { file, saved };
        tty.raw(true);
        Ok(tty)
    }

    fn raw(&self, on: bool) {
        use rustix::termios::{LocalModes, OptionalActions, SpecialCodeIndex};
        let mut t = self.saved.clone();
        if on {
            t.local_modes &= !(LocalModes::ICANON | LocalModes::ECHO);
            t.special_codes[SpecialCodeIndex::VMIN] = 0;
            t.special_codes[SpecialCodeIndex::VTIME] = 0;
        }
        let _ = rustix::termios::tcsetattr(&self.file, OptionalActions::Now, &t);
    }

    /// One key, or None after `TICK_MS`.
    fn key(&mut self) -> Option<u8> {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
        let tick = Timespec {
            tv_sec: 0,
            tv_nsec: TICK_MS * 1_000_000,
        };
        if poll(&mut fds, Some(&tick)).unwrap_or(0) == 0 {
            return None;
        }
        let mut b = [0u8; 1];
        match self.file.read(&mut b) {
            Ok(1) => Some(b[0]),
            _ => None,
        }
    }

    fn line(&mut self, prompt: &str) -> String {
        self.raw(false);
        let _ = write!(self.file, "{prompt}");
        let _ = self.file.flush();
        let mut s = String::new();
        let mut b = [0u8; 1];
        while let Ok(1) = self.file.read(&mut b) {
            if b[0] == b'\n' {
                break;
            }
            s.push(b[0] as char);
        }
        self.raw(true);
        s.trim()
            .chars()
            .filter(|c| !c.is_control())
            .take(500)
            .collect()
    }

    fn show(&mut self, text: &str) {
        let _ = self.file.write_all(text.replace('\n', "\r\n").as_bytes());
        let _ = self.file.flush();
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(
            &self.file,
            rustix::termios::OptionalActions::Now,
            &self.saved,
        );
    }
}

/// Asks the passphrase, then connects to the vault's real agent and subscribes to the queue.
fn unlock(
    paths: &VaultPaths,
    source: &PassphraseSource,
    tty: &mut Tty,
) -> anyhow::Result<(Client, KeyMaterial)> {
    tty.raw(false);
    let passphrase = source.read("Vault passphrase: ");
    tty.raw(true);
    let keys = Vault::keys(paths, &passphrase?)?;
    let mut client = crate::agent::client::approver_client(paths, &keys)?;
    match client.call(Request::WatchPending)? {
        Reply::Ok => Ok((client, keys)),
        other => Err(super::super::backend::unexpected(other)),
    }
}

/// The newest queue the agent pushed, if one arrived.
fn latest_queue(client: &mut Client) -> anyhow::Result<Option<Vec<ApprovalView>>> {
    let mut latest = None;
    while let Some((_, event)) = client.next_event(Duration::ZERO)? {
        if let Event::Queue { actions } = event {
            latest = Some(actions);
        }
    }
    Ok(latest)
}

pub fn run(
    paths: VaultPaths,
    source: PassphraseSource,
    config: &crate::config::Config,
) -> anyhow::Result<Exit> {
    let idle = config.approver_idle();
    let mut tty = Tty::open()?;
    let (mut client, mut keys) = unlock(&paths, &source, &mut tty)?;
    let color = std::env::var_os("NO_COLOR").is_none();
    let mut queue: Vec<ApprovalView> = Vec::new();
    let mut last_ids: Vec<String> = Vec::new();
    let mut last_key = Instant::now();
    let mut dirty = true;
    let mut note = String::from("Unlocked. Waiting for actions.");
    loop {
        if let Some(q) = latest_queue(&mut client)? {
            queue = q;
        }
        let ids: Vec<String> = queue.iter().map(|v| v.action.id.clone()).collect();
        if ids.iter().any(|id| !last_ids.contains(id)) {
            tty.show("\x07");
            notify(&queue[0]);
            dirty = true;
        }
        if ids != last_ids {
            dirty = true;
            last_ids = ids;
        }
        if dirty {
            let screen = match queue.first() {
                Some(v) => card(v, queue.len(), color, &note),
                None => format!("\x1b[2J\x1b[H{note}\nNo action waits. [q] quit\n"),
            };
            tty.show(&screen);
            dirty = false;
        }
        let Some(k) = tty.key() else { continue };
        if last_key.elapsed() > idle {
            tty.show(&format!(
                "\x1b[2J\x1b[HIdle for {} minutes: the passphrase is needed again.\n",
                idle.as_secs() / 60
            ));
            (client, keys) = unlock(&paths, &source, &mut tty)?;
            last_key = Instant::now();
            dirty = true;
            continue;
        }
        last_key = Instant::now();
        let current = queue.first();
        let verdict = match (k, current) {
            (b'q' | b'Q', _) => {
                tty.show("\r\n");
                return Ok(Exit::Ok);
            }
            (b'a', Some(_)) => Some(Verdict::Approve),
            (b's', Some(_)) => Some(Verdict::ApproveSession),
            (b'd', Some(_)) => {
                let reason = tty.line("Reason for the agent (Enter for none): ");
                Some(Verdict::Deny((!reason.is_empty()).then_some(reason)))
            }
            (b'v', Some(v)) => {
                tty.show(&full_view(v));
                while tty.key().is_none() {}
                dirty = true;
                None
            }
            _ => None,
        };
        if let (Some(verdict), Some(v)) = (verdict, current) {
            note = match client.decide(&keys, v, &verdict, config.session_grant()) {
                Ok(d) => format!("{} {}: {}", capital(d.state.as_str()), d.id, d.summary),
                Err(e) => format!("Not decided: {e}"),
            };
            dirty = true;
        }
    }
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn client_of(v: &ApprovalView) -> (String, String) {
    let client = format!(
        "{} {}",
        v.client["name"].as_str().unwrap_or(&v.action.client),
        v.client["version"].as_str().unwrap_or("")
    );
    (
        client.trim().to_owned(),
        v.peer["parent"]["exe"].as_str().unwrap_or("?").to_owned(),
    )
}

fn body_preview(v: &ApprovalView, limit: usize) -> Option<String> {
    let b = hex::decode(v.body_hex.as_deref()?).ok()?;
    let shown: String = String::from_utf8_lossy(&b[..b.len().min(limit)])
        .escape_debug()
        .collect();
    Some(if b.len() > limit {
        format!("{shown} … ({} bytes in all; [v] shows more)", b.len())
    } else {
        shown
    })
}

fn until(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return ts.to_owned();
    };
    let secs = t.duration_since(jiff::Timestamp::now()).as_secs();
    if secs >= 0 {
        format!("in {} min {} s", secs / 60, secs % 60)
    } else {
        format!("{} s ago", -secs)
    }
}

fn card(v: &ApprovalView, waiting: usize, color: bool, note: &str) -> String {
    let a = &v.action;
    let (bold, dim, reset) = if color {
        ("\x1b[1m", "\x1b[2m", "\x1b[0m")
    } else {
        ("", "", "")
    };
    let (client, parent) = client_of(v);
    let mut s =
        format!("\x1b[2J\x1b[H{dim}{note}{reset}\n\n{bold}Action 1 of {waiting} waiting{reset}\n");
    s += &format!("  client      {client}  ({parent})\n");
    s += &format!(
        "  tool        {}\n  credential  {}\n",
        a.tool, a.credential_name
    );
    s += &format!("  {bold}{}{reset}\n", a.summary.escape_debug());
    if let Some(b) = body_preview(v, 512) {
        s += &format!("  body        {b}\n");
    }
    s += &format!("  hash        {}…\n", &a.action_hash[..16]);
    s += &format!(
        "  asked       {}   expires {}\n\n",
        until(&a.created_at).replace("in 0 min 0 s", "just now"),
        until(&a.expires_at)
    );
    s += "[a]pprove once   [s] approve for this session   [d]eny   [v]iew in full   [q]uit\n";
    s
}

fn full_view(v: &ApprovalView) -> String {
    let a = &v.action;
    let pretty = serde_json::from_str::<serde_json::Value>(&v.normalized)
        .and_then(|n| serde_json::to_string_pretty(&n))
        .unwrap_or_else(|_| v.normalized.clone());
    let body = body_preview(v, 16 * 1024).unwrap_or_else(|| "(none)".into());
    format!(
        "\x1b[2J\x1b[H{}\n\naction hash {}\n{}\n\nbody:\n{}\n\n(any key to go back)\n",
        a.summary.escape_debug(),
        a.action_hash,
        pretty,
        body
    )
}

/// A desktop notification where one is available; failures are silent.
fn notify(v: &ApprovalView) {
    let a = &v.action;
    if let Ok(mut child) = std::process::Command::new("notify-send")
        .args([
            "agent-vault: approval needed",
            &a.summary.escape_debug().to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        std::thread::spawn(move || child.wait());
    }
}
