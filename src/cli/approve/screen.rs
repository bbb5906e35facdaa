//! The interactive approval queue on the controlling terminal (never stdin/stdout, so
//! `yes | vault approve` cannot answer it): passphrase once (and, on a vault without one, a new
//! approval PIN), then one card per waiting action. Keys: [a] approve once, [s] approve for this
//! session, [d] deny (with an optional reason), [v] view in full, [q] quit. An approval takes
//! the PIN too, typed after the key with nothing shown (`read_pin`); the agent checks it. A bell
//! (and a desktop notification where `notify-send` exists) marks a new card; the screen is
//! redrawn only when the queue changes or a key is pressed; after 15 idle minutes the
//! passphrase is asked again. What else can type into this terminal is said above the first
//! card (`exposure`).
//!
//! Keys typed before a card was seen decide nothing: pending input is flushed (`tcflush`) after
//! every redraw, decision keys are ignored for `SETTLE` after a different card comes on screen,
//! and each key is bound to the action whose card was on screen when it was read. `a`/`s` count
//! only while the terminal has the size the card on screen was laid out for and its deciding
//! lines fit (`layout::Shown::fits`); the size is looked at every tick, and a resize redraws.
use super::card;
use super::facts::CardData;
use super::layout::Size;
use super::watch::{left_note, Told, Watch};
use crate::agent::client::{Client, Proof};
use crate::agent::protocol::{ApprovalView, Reply, Request};
use crate::approvals::Verdict;
use crate::cli::Exit;
use crate::keys::{ApproverKey, PassphraseSource};
use crate::paths::VaultPaths;
use crate::term::escape;
use crate::wire::Secret;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::termios::{
    self, LocalModes, OptionalActions, QueueSelector, SpecialCodeIndex, Termios,
};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Ctrl-C, read as a key while the card is up.
const CTRL_C: u8 = 3;
/// How long `Tty::key` waits for a key before the queue is looked at again.
const TICK: Duration = Duration::from_millis(250);
/// Decision keys are ignored for this long after a different card comes on screen, so a key
/// typed for the previous card (or typed ahead) cannot decide the new one.
const SETTLE: Duration = Duration::from_millis(500);
/// A PIN prompt with no key for this long is cancelled.
const PIN_WAIT: Duration = Duration::from_secs(60);
/// The longest PIN input read (longer input is cut; the agent refuses it).
const PIN_INPUT_MAX: usize = 64;
const ESC: u8 = 27;

/// The terminal in no-echo, one-key-at-a-time mode; restored on drop.
struct Tty {
    file: File,
    saved: Termios,
}

impl Tty {
    fn open() -> anyhow::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .map_err(|_| anyhow::anyhow!("`vault approve` needs a terminal; without one use `vault approve --id ACT --approve|--deny --passphrase-stdin`"))?;
        let saved = termios::tcgetattr(&file)
            .map_err(|e| anyhow::anyhow!("cannot read the terminal's settings: {e}"))?;
        let tty = Self { file, saved };
        tty.raw(true);
        Ok(tty)
    }

    fn raw(&self, on: bool) {
        let mut t = self.saved.clone();
        if on {
            // ISIG off too: Ctrl-C arrives as a key (quit), so the terminal is restored on the
            // way out instead of being left without echo by a signal.
            t.local_modes
                .remove(LocalModes::ICANON | LocalModes::ECHO | LocalModes::ISIG);
            t.special_codes[SpecialCodeIndex::VMIN] = 0;
            t.special_codes[SpecialCodeIndex::VTIME] = 0;
        }
        let _ = termios::tcsetattr(&self.file, OptionalActions::Now, &t);
    }

    /// Discards every key typed but not read yet: after a redraw, only keys pressed while the
    /// new screen was visible count.
    fn flush_input(&self) {
        let _ = termios::tcflush(&self.file, QueueSelector::IFlush);
    }

    /// One key, or None after `TICK`.
    fn key(&mut self) -> Option<u8> {
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: TICK.as_nanos() as _,
        };
        let mut fds = [PollFd::new(&self.file, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(n) if n > 0 => {}
            _ => return None,
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

    /// Rows of the terminal (24 when it does not say).
    fn rows(&self) -> usize {
        self.size().rows
    }

    /// The terminal's size now (80×24 when it does not say): asked at every draw, so a
    /// resized window gets a card that fits.
    fn size(&self) -> Size {
        match termios::tcgetwinsize(&self.file) {
            Ok(w) if w.ws_row > 0 && w.ws_col > 0 => Size {
                cols: usize::from(w.ws_col),
                rows: usize::from(w.ws_row),
            },
            _ => Size { cols: 80, rows: 24 },
        }
    }

    fn show(&mut self, text: &str) {
        let _ = self.file.write_all(text.replace('\n', "\r\n").as_bytes());
        let _ = self.file.flush();
    }
}

impl Drop for Tty {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(&self.file, OptionalActions::Now, &self.saved);
    }
}

/// Which card is on screen, since when, and how it was laid out: a decision key applies to this
/// action only, only once it has been visible for `SETTLE`, and an approval only while the
/// terminal still has the size the card was laid out for and every deciding line fit in it.
#[derive(Debug, Default)]
struct OnScreen {
    id: Option<String>,
    since: Option<Instant>,
    /// The size the card was laid out for, and whether its deciding lines fit (`Shown::fits`).
    layout: Option<(Size, bool)>,
}

impl OnScreen {
    fn drawn(&mut self, id: Option<&str>, layout: Option<(Size, bool)>) {
        // A card seen whole for the first time (a new one, or one the terminal was too small
        // for) has not been read yet.
        let whole = |l: Option<(Size, bool)>| l.is_some_and(|(_, fits)| fits);
        if self.id.as_deref() != id || (whole(layout) && !whole(self.layout)) {
            self.id = id.map(str::to_owned);
            self.since = Some(Instant::now());
        }
        self.layout = layout;
    }
    fn settled(&self) -> bool {
        self.since.is_some_and(|t| t.elapsed() >= SETTLE)
    }
    /// Whether the terminal, `now`, still has the size the card on screen was laid out for.
    fn stale(&self, now: Size) -> bool {
        self.layout.is_some_and(|(size, _)| size != now)
    }
    /// `Err(why)` unless the card on screen shows every deciding fact at the terminal's size
    /// `now`: the same fit the drawing computed, for the size at the time of the key.
    fn shown_whole(&self, now: Size) -> Result<(), String> {
        match self.layout {
            Some((size, true)) if size == now => Ok(()),
            Some((size, _)) if size != now => Err(
                "was laid out for another terminal size: it is drawn again, read it, then press the key again".into(),
            ),
            _ => Err(
                "is not shown whole: the terminal is too small for what decides it. Make it larger first".into(),
            ),
        }
    }
}

/// Asks the passphrase, then connects to the vault's real agent over the encrypted channel
/// (which only a holder of the key completes) and subscribes to the queue. The master key is
/// dropped (wiped) once the channel is open: only the approver key stays, to sign, and the
/// channel's key (derived from it), to reach the next agent if this one goes.
fn unlock(
    paths: &VaultPaths,
    source: &PassphraseSource,
    tty: &mut Tty,
) -> anyhow::Result<(Watch, ApproverKey)> {
    tty.raw(false);
    let passphrase = source.read("Vault passphrase: ");
    tty.raw(true);
    let keys = super::super::backend::keys_from(paths, source, &passphrase?)?;
    let mut client = crate::agent::handoff::approver_client(paths, &keys)?;
    let psk = crate::agent::channel::channel_key(&keys.master);
    let approver = keys.into_approver();
    ensure_pin(&mut client, &approver, tty)?;
    match client.call(Request::WatchPending)? {
        Reply::Ok => Ok((Watch::new(paths.clone(), psk, client), approver)),
        other => Err(super::super::backend::unexpected(other)),
    }
}

/// Reads a PIN on the last line of the screen: nothing is shown as it is typed (not even how
/// many characters); Enter ends it, Esc or Ctrl-C cancels, and so does `PIN_WAIT` without a key.
fn read_pin(tty: &mut Tty, prompt: &str) -> Option<Secret> {
    let rows = tty.rows();
    tty.show(&format!("\x1b[{rows};1H\x1b[2K{prompt}"));
    let mut typed = zeroize::Zeroizing::new(Vec::with_capacity(PIN_INPUT_MAX));
    let mut last = Instant::now();
    loop {
        let Some(k) = tty.key() else {
            if last.elapsed() > PIN_WAIT {
                return None;
            }
            continue;
        };
        last = Instant::now();
        match k {
            b'\r' | b'\n' => break,
            ESC | CTRL_C => return None,
            127 | 8 => {
                typed.pop();
            }
            k if k >= 0x20 && typed.len() < PIN_INPUT_MAX => typed.push(k),
            _ => {}
        }
    }
    (!typed.is_empty()).then(|| Secret::new(std::mem::take(&mut *typed)))
}

/// On a vault with no approval PIN, asks the person to choose one (twice) and sets it, signed
/// with the approver key: no card can be approved without it.
fn ensure_pin(client: &mut Client, approver: &ApproverKey, tty: &mut Tty) -> anyhow::Result<()> {
    let set = match client.call(Request::Status)? {
        Reply::Status(s) => s.store.is_some_and(|s| s.pin_set),
        other => return Err(super::super::backend::unexpected(other)),
    };
    if set {
        return Ok(());
    }
    tty.show(&format!(
        "\x1b[2J\x1b[HThis vault has no approval PIN yet.\n\nEvery approval takes it, typed after [a] or [s] with nothing shown, so a program\nthat can type into this terminal still cannot approve. {}\n",
        crate::approvals::pin::RULE
    ));
    for _ in 0..3 {
        let Some(pin) = read_pin(tty, "Choose an approval PIN: ") else {
            anyhow::bail!("no approval PIN was chosen, so no card could be approved; run `vault approve` again (or `vault pin`)");
        };
        let text = String::from_utf8_lossy(pin.expose());
        if let Err(why) = crate::approvals::pin::check_new(&text) {
            tty.show(&format!("\r\n{why}; try again.\n"));
            continue;
        }
        let again = read_pin(tty, "Type it again: ");
        if again.as_ref().map(Secret::expose) != Some(pin.expose()) {
            tty.show("\r\nThe two did not match; try again.\n");
            continue;
        }
        let request = crate::approvals::pin::sign_pin(approver, &client.vault_id, &pin);
        match client.call(Request::SetPin { request, pin })? {
            Reply::Ok => return Ok(()),
            other => return Err(super::super::backend::unexpected(other)),
        }
    }
    anyhow::bail!(
        "no approval PIN was set after three tries; run `vault approve` again (or `vault pin`)"
    )
}

pub(super) fn run(
    paths: VaultPaths,
    source: PassphraseSource,
    config: &crate::config::Config,
) -> anyhow::Result<Exit> {
    let idle = config.approver_idle();
    let mut tty = Tty::open()?;
    let (mut watch, mut keys) = unlock(&paths, &source, &mut tty)?;
    let mut screen = Screen {
        style: card::Style {
            color: std::env::var_os("NO_COLOR").is_none(),
        },
        queue: Vec::new(),
        last_ids: Vec::new(),
        dirty: true,
        note: start_note(),
        warnings: super::super::exposure::warning_lines(),
        on_screen: OnScreen::default(),
        grant_for: config.session_grant(),
        decided: Vec::new(),
    };
    let mut last_key = Instant::now();
    loop {
        for told in watch.poll()? {
            screen.told(&mut tty, told);
        }
        // A resized terminal gets the card laid out again (checked at every tick).
        if screen.on_screen.stale(tty.size()) {
            screen.dirty = true;
        }
        screen.draw(&mut tty);
        let Some(k) = tty.key() else { continue };
        if last_key.elapsed() > idle {
            tty.show(&format!(
                "\x1b[2J\x1b[HIdle for {} minutes: the passphrase is needed again.\n",
                idle.as_secs() / 60
            ));
            (watch, keys) = unlock(&paths, &source, &mut tty)?;
            last_key = Instant::now();
            screen.dirty = true;
            continue;
        }
        last_key = Instant::now();
        match screen.on_key(&mut tty, k) {
            Key::Quit => {
                tty.show("\r\n");
                return Ok(Exit::Ok);
            }
            Key::Nothing => {}
            Key::Decide(verdict, v) => {
                // The note names the request as the card showed it, not as the agent words it.
                let what = card_data(&v).headline();
                let proof = match verdict {
                    Verdict::Deny(_) => Some(Proof::Key),
                    _ => read_pin(
                        &mut tty,
                        &format!("PIN to approve {} (Enter; Esc cancels): ", v.action.id),
                    )
                    .map(Proof::Pin),
                };
                screen.note = match (proof, watch.client()) {
                    (None, _) => format!("Not approved: {} (no PIN was entered).", v.action.id),
                    (Some(_), None) => "Not decided: the vault agent is not running.".into(),
                    (Some(proof), Some(client)) => {
                        match client.decide(&keys, &v, &verdict, proof, config.session_grant()) {
                            Ok(d) => {
                                // Off the screen at once: the agent's next queue may come
                                // later, and a key typed meanwhile must not land on a decided
                                // card. (Its `left` event, read after this, needs no word.)
                                screen.queue.retain(|q| q.action.id != d.action.id);
                                screen.decided.push(d.action.id.clone());
                                capital(&super::decided_line(&d, &what))
                            }
                            Err(e) => format!("Not decided: {e}"),
                        }
                    }
                };
                screen.dirty = true;
            }
        }
    }
}

/// What a key press asks for.
enum Key {
    Quit,
    /// A verdict on the action whose card is on screen.
    Decide(Verdict, Box<ApprovalView>),
    Nothing,
}

/// The approver's screen: the queue, the card on screen and the note under it.
struct Screen {
    style: card::Style,
    queue: Vec<ApprovalView>,
    last_ids: Vec<String>,
    /// Something changed since the last draw.
    dirty: bool,
    note: String,
    /// What else can type into this terminal, and what holds (shown while no card waits).
    warnings: Vec<String>,
    on_screen: OnScreen,
    /// How long `[s]` grants, for the card's line that says what it would cover.
    grant_for: Duration,
    /// The actions this approver decided (so their leaving the queue needs no word).
    decided: Vec<String>,
}

impl Screen {
    /// Takes the agent's newest queue; a new action rings the bell and notifies.
    fn take_queue(&mut self, tty: &mut Tty, queue: Vec<ApprovalView>) {
        self.queue = queue;
        let ids: Vec<String> = self.queue.iter().map(|v| v.action.id.clone()).collect();
        if ids.iter().any(|id| !self.last_ids.contains(id)) {
            tty.show("\x07");
            notify(&self.queue[0]);
        }
        if ids != self.last_ids {
            self.dirty = true;
            self.last_ids = ids;
        }
    }

    /// Redraws the first card (or the empty screen) when something changed, and drops any key
    /// typed before it appeared.
    fn draw(&mut self, tty: &mut Tty) {
        if !self.dirty {
            return;
        }
        let (screen, layout) = match self.queue.first() {
            Some(v) => {
                let shown = card::card(
                    &CardData {
                        grant_for: self.grant_for,
                        ..card_data(v)
                    },
                    self.queue.len(),
                    self.style,
                    &self.note,
                    tty.size(),
                );
                (shown.text, Some((shown.size, shown.fits)))
            }
            None => (
                format!(
                    "\x1b[2J\x1b[H{}\n{}No action waits. [q] quit\n",
                    escape(&self.note),
                    self.warnings
                        .iter()
                        .map(|w| escape(w) + "\n")
                        .collect::<String>()
                ),
                None,
            ),
        };
        tty.show(&screen);
        tty.flush_input();
        self.on_screen
            .drawn(self.queue.first().map(|v| v.action.id.as_str()), layout);
        self.dirty = false;
    }

    fn on_key(&mut self, tty: &mut Tty, k: u8) -> Key {
        // The action whose card is on screen; a key never decides another one.
        let Some(current) = self
            .queue
            .iter()
            .find(|v| self.on_screen.id.as_deref() == Some(v.action.id.as_str()))
            .cloned()
        else {
            return if matches!(k, b'q' | b'Q' | CTRL_C) {
                Key::Quit
            } else {
                Key::Nothing
            };
        };
        if matches!(k, b'a' | b's' | b'd') && !self.on_screen.settled() {
            self.note =
                "Key ignored: this card had just appeared. Read it, then press the key again."
                    .into();
            self.dirty = true;
            return Key::Nothing;
        }
        let verdict = match k {
            b'q' | b'Q' | CTRL_C => return Key::Quit,
            b'a' | b's' => match self.may_approve(tty.size(), &current) {
                Ok(()) if k == b'a' => Verdict::Approve,
                Ok(()) => Verdict::ApproveSession,
                Err(why) => {
                    self.note = format!("Not approved: {} {why}.", current.action.id);
                    self.dirty = true;
                    return Key::Nothing;
                }
            },
            b'd' => {
                let reason = tty.line("Reason for the agent (Enter for none): ");
                Verdict::Deny((!reason.is_empty()).then_some(reason))
            }
            b'v' => {
                page_through(tty, &card::full_view(&card_data(&current)));
                self.dirty = true;
                return Key::Nothing;
            }
            _ => return Key::Nothing,
        };
        Key::Decide(verdict, Box::new(current))
    }
}

impl Screen {
    /// What the agent told (or what became of it), on screen: the queue, and a note for the
    /// rest, so a card never goes and no state changes without a word.
    fn told(&mut self, tty: &mut Tty, told: Told) {
        let note = match told {
            Told::Queue(q) => return self.take_queue(tty, q),
            Told::Left {
                action_id,
                state,
                reason,
            } => {
                if let Some(mine) = self.decided.iter().position(|id| *id == action_id) {
                    self.decided.remove(mine);
                    return;
                }
                let shown = self.queue.iter().find(|v| v.action.id == action_id);
                let what = shown.map(|v| card_data(v).headline());
                match left_note(&action_id, what.as_deref(), state, reason.as_deref()) {
                    Some(note) => note,
                    None => return,
                }
            }
            Told::Paused(why) => format!(
                "Paused: {}. Every tool call fails and the waiting actions were denied; `vault resume` lifts it.",
                escape(&why)
            ),
            Told::Resumed => {
                "Resumed: the pause was lifted (`vault resume`); tool calls run again.".into()
            }
            Told::Gone(why) => {
                tty.show("\x07");
                self.take_queue(tty, Vec::new());
                why
            }
            Told::Back(pid) => {
                format!("Connected to the new vault agent (pid {pid}); watching its queue.")
            }
        };
        self.note = note;
        self.dirty = true;
    }

    /// `Err(why)` unless the card of `current` may be approved now: drawn whole for the
    /// terminal's size `now` (else it is drawn again), and approvable at all.
    fn may_approve(&mut self, now: Size, current: &ApprovalView) -> Result<(), String> {
        if self.on_screen.stale(now) {
            self.dirty = true;
        }
        self.on_screen.shown_whole(now)?;
        card_data(current).approvable()
    }
}

/// The first note: unlocked, and (in one line) what else can type into this terminal.
fn start_note() -> String {
    let found = super::super::exposure::of_this_terminal();
    if found.is_empty() {
        return "Unlocked. Waiting for actions.".into();
    }
    let names: Vec<&str> = found.iter().map(|e| e.what).collect();
    format!(
        "Unlocked. !! Other programs of yours can type into this terminal ({}): approvals take the PIN; `vault doctor` says more.",
        names.join(", ")
    )
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
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
        parent_exe: v
            .session
            .as_ref()
            .and_then(|s| s.parent.exe.clone())
            .unwrap_or_else(|| "?".into()),
        contained: v.session.as_ref().is_some_and(|s| s.contained),
        normalized,
        body,
        changed: v.changed.clone(),
        grant_for: std::time::Duration::ZERO,
    }
}

/// Shows the full view a page at a time: space for the next page, any other key goes back.
fn page_through(tty: &mut Tty, lines: &[String]) {
    let per_page = tty.rows().saturating_sub(2).max(8);
    let pages = lines.len().div_ceil(per_page).max(1);
    for (n, page) in lines.chunks(per_page).enumerate() {
        let footer = if n + 1 == pages {
            "(end of the action: any key to go back)".to_owned()
        } else {
            format!(
                "-- page {} of {pages}: [space] next page, any other key to go back --",
                n + 1
            )
        };
        tty.show(&format!("\x1b[2J\x1b[H{}\n{footer}\n", page.join("\n")));
        let key = loop {
            if let Some(k) = tty.key() {
                break k;
            }
        };
        if key != b' ' {
            return;
        }
    }
}

/// A desktop notification where one is available; failures are silent.
fn notify(v: &ApprovalView) {
    if let Ok(mut child) = std::process::Command::new("notify-send")
        .args(["agent-vault: approval needed", &card_data(v).headline()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        std::thread::spawn(move || child.wait());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_counts_only_at_the_size_and_fit_the_card_was_drawn_with() {
        let (big, small) = (Size { cols: 80, rows: 24 }, Size { cols: 40, rows: 12 });
        let mut on = OnScreen::default();
        on.drawn(Some("act_1"), Some((small, false)));
        assert!(
            on.shown_whole(small).is_err(),
            "too small for its deciding facts"
        );
        on.since = Some(Instant::now() - SETTLE * 2);
        // Made larger: drawn whole, and read from now on.
        on.drawn(Some("act_1"), Some((big, true)));
        assert!(on.shown_whole(big).is_ok());
        assert!(
            !on.settled(),
            "a card seen whole for the first time has not been read"
        );
        // Resized after the draw: the key is checked against the size now, not the drawing's.
        assert!(on.stale(small));
        assert!(on.shown_whole(small).is_err());
        assert!(on.shown_whole(Size { cols: 81, rows: 24 }).is_err());
    }
}
