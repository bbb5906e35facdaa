//! Who else can type into, read or log the person's terminal (SECURITY.md "Who can approve"):
//! a tmux or screen session, an X11 display without Wayland, or a yama `ptrace_scope` of 0 (or
//! none) each let any process of the user drive it. `vault approve` says so above the first card
//! and `vault doctor` lists it, with what each approval method then holds against.

/// One way other processes of this user reach this terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Exposure {
    /// Short name (`tmux`, `screen`, `X11`, `ptrace`).
    pub what: &'static str,
    /// What a process of the user can do through it.
    pub how: &'static str,
}

/// What the environment and the kernel say about this terminal.
pub(super) fn of_this_terminal() -> Vec<Exposure> {
    let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
    let mut out = Vec::new();
    if set("TMUX") {
        out.push(Exposure {
            what: "tmux",
            how: "this terminal is a tmux pane: any program running as you can read it (capture-pane), type into it (send-keys), log what you type (bind-key) or replace it (respawn-pane)",
        });
    }
    if set("STY") {
        out.push(Exposure {
            what: "screen",
            how: "this terminal is a GNU screen window: any program running as you can type into it (screen -X stuff) and log it",
        });
    }
    if set("DISPLAY") && !set("WAYLAND_DISPLAY") {
        out.push(Exposure {
            what: "X11",
            how: "an X11 session: any program running as you can send keys to this window (XTEST) and read what you type (xinput)",
        });
    }
    if matches!(crate::sys::ptrace_scope(), None | Some(0)) && cfg!(target_os = "linux") {
        out.push(Exposure {
            what: "ptrace",
            how: "kernel.yama.ptrace_scope is 0 or absent: any program running as you can attach to your terminal emulator and read or type what it shows",
        });
    }
    out
}

/// What the approval methods hold against when the terminal is exposed.
pub(super) const WHAT_HOLDS: &str = "The approval PIN stops a program that can only type here (it does not know the PIN), not one that logs what you type. Start the AI client with `vault run -- CLIENT`: from inside it cannot reach tmux, screen, X11 or your processes, and the PIN holds.";

/// The lines `vault approve` shows before the first card (empty when nothing is exposed).
pub(super) fn warning_lines() -> Vec<String> {
    let found = of_this_terminal();
    if found.is_empty() {
        return Vec::new();
    }
    let mut lines: Vec<String> = found.iter().map(|e| format!("!! {}", e.how)).collect();
    lines.push(WHAT_HOLDS.to_owned());
    lines
}
