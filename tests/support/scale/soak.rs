//! The soak suite's driver: sessions that each run their seeded actions one after another on
//! their own `vault mcp`, and the person, scripted, approving every card that shows up.
use super::{approve, run, tag, Approval, Kind, Mcp, Reply, Rig, Rng, Rss};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Sets the flag if the thread that holds it panics, so the others stop early.
pub struct AbortOnPanic<'a>(pub &'a AtomicBool);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

pub struct Soak<'r> {
    pub rig: &'r Rig,
    pub seed: u64,
    pub sessions: usize,
    pub per: usize,
    pub card_ratio: f64,
    pub agent: u32,
    pub done: AtomicUsize,
    /// The agent's memory once the first 100 actions completed, then after every eighth of
    /// the run: (actions done, memory).
    pub rss: Mutex<Vec<(usize, Rss)>>,
    pub abort: AtomicBool,
}

/// One tagged action as its session saw it end.
pub struct Done {
    pub tag: String,
    pub kind: Kind,
    pub action: String,
}

impl Soak<'_> {
    /// The person, scripted: every action `vault pending` lists is approved with `vault approve
    /// --id`, until `stop`. How many, and the time spent approving.
    pub fn approver(&self, stop: &AtomicBool) -> (usize, Duration) {
        let _flag = AbortOnPanic(&self.abort);
        let (mut n, mut busy) = (0, Duration::ZERO);
        while !stop.load(Ordering::SeqCst) && !self.abort.load(Ordering::SeqCst) {
            let r = run(&self.rig.v, &["pending", "--json"], None);
            let listed: Vec<Value> = serde_json::from_str(r.stdout.trim()).unwrap_or_default();
            for a in listed {
                let id = a["action_id"].as_str().unwrap();
                let run = approve(&self.rig.v, id, None);
                assert!(
                    matches!(run.outcome, Approval::Approved),
                    "approving {id}: {:?}",
                    run.outcome
                );
                n += 1;
                busy += run.took;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (n, busy)
    }

    /// One auto-approved HTTP action in a session of its own, answered `completed`, counted
    /// nowhere else: the action the follower's snapshot holds before the sessions start.
    pub fn marker(&self) -> Done {
        let log = self.rig.v.dir.path().join("soak-mcp-marker.log");
        let mut mcp = Mcp::start(&self.rig.v, log);
        let done = self.completed(
            &mut mcp,
            1,
            Kind::Http,
            false,
            tag(self.sessions, 0),
            Duration::from_secs(60),
        );
        mcp.finish(Duration::from_secs(30));
        done
    }

    /// Calls the tool for one tagged action on `mcp` as request `id`; it must answer `completed`
    /// within `wait`. (The tag names the session and the step: `tag`'s shape.)
    fn completed(
        &self,
        mcp: &mut Mcp,
        id: i64,
        kind: Kind,
        card: bool,
        tag: String,
        wait: Duration,
    ) -> Done {
        let (tool, args) = self.rig.call(kind, card, &tag);
        assert!(mcp.call(id, tool, &args), "{tag}: {}", mcp.stderr());
        let r = match mcp.reply(id, wait) {
            Reply::Answer(r) => r,
            other => panic!("{tag}: {other:?}; {}", mcp.stderr()),
        };
        let sc = &r["result"]["structuredContent"];
        assert_eq!(sc["state"], "completed", "{tag}: {r}");
        Done {
            action: sc["action_id"].as_str().unwrap().to_owned(),
            tag,
            kind,
        }
    }

    /// Session `k`: its actions, each answered `completed`.
    pub fn session(&self, k: usize) -> Vec<Done> {
        let _flag = AbortOnPanic(&self.abort);
        let mut rng = Rng::new(self.seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let log = self.rig.v.dir.path().join(format!("soak-mcp-{k}.log"));
        let mut mcp = Mcp::start(&self.rig.v, log);
        let mut out = Vec::new();
        for i in 0..self.per {
            if self.abort.load(Ordering::SeqCst) {
                break;
            }
            let kind = if rng.chance(0.6) {
                Kind::Http
            } else {
                Kind::Ssh
            };
            let card = rng.chance(self.card_ratio);
            let wait = Duration::from_secs(180);
            out.push(self.completed(&mut mcp, i as i64 + 1, kind, card, tag(k, i), wait));
            let n = self.done.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 100 || n.is_multiple_of((self.sessions * self.per / 8).max(1)) {
                self.rss.lock().unwrap().push((n, Rss::of(self.agent)));
            }
        }
        mcp.finish(Duration::from_secs(30));
        out
    }
}
