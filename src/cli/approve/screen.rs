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
use super::facts::{card_data, CardData};
use super::layout::Size;
use super::tty::{page_through, read_pin, read_pin_or_quit, PinRead, Tty, CTRL_C};
use super::unlock::unlock;
use super::watch::{left_note, Told};
use crate::agent::client::Proof;
use crate::agent::protocol::ApprovalView;
use crate::approvals::Verdict;
use crate::cli::Exit;
use crate::keys::PassphraseSource;
use crate::paths::VaultPaths;
use crate::term::escape;
use std::time::{Duration, Instant};

/// Decision keys are ignored for this long after a different card comes on screen, so a key
/// typed for the previous card (or typed ahead) cannot decide the new one.
const SETTLE: Duration = Duration::from_millis(500);

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
                    _ => match read_pin_or_quit(
                        &mut tty,
                        &format!(
                            "PIN to approve {} (Enter; Esc goes back, Ctrl-C quits): ",
                            v.action.id
                        ),
                    ) {
                        PinRead::Typed(pin) => Some(Proof::Pin(pin)),
                        PinRead::Cancelled => None,
                        PinRead::Quit => {
                            tty.show(&format!(
                                "\r\nQuit: nothing was decided; {} still waits.\r\n",
                                v.action.id
                            ));
                            return Ok(Exit::Ok);
                        }
                    },
                };
                screen.note = match (proof, watch.client()) {
                    (None, _) => format!("Not approved: {} (no PIN was entered).", v.action.id),
                    (Some(_), None) => "Not decided: the vault agent is not running.".into(),
                    (Some(proof), Some(client)) => {
                        let short = v
                            .action
                            .action_hash
                            .get(..12)
                            .unwrap_or_default()
                            .to_owned();
                        let mut toucher = |challenge: &[u8; 32], allow: &[Vec<u8>]| {
                            tty.show(&format!(
                                "\r\nTouch your security key for {short}… (waiting {} s)\r\n",
                                super::TOUCH_WAIT.as_secs()
                            ));
                            // Only a key set to verify its person for every signature
                            // (alwaysUv) asks: its PIN, typed like the approval PIN.
                            let mut ask_pin = || {
                                read_pin(&mut tty, "Security key PIN (Enter; Esc cancels): ")
                                    .and_then(|p| String::from_utf8(p.expose().to_vec()).ok())
                                    .map(secrecy::SecretString::from)
                                    .ok_or_else(|| {
                                        crate::fido::FidoError::NoPin("none was typed".into())
                                    })
                            };
                            crate::cli::approver::usb_touch(
                                challenge,
                                allow,
                                super::TOUCH_WAIT,
                                &mut ask_pin,
                            )
                        };
                        match client.decide_touched(
                            &keys,
                            &v,
                            &verdict,
                            proof,
                            config.session_grant(),
                            Some(&mut toucher),
                        ) {
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
