//! The crash suite's driver: a seeded plan of steps (HTTP or SSH, run by policy or on a card,
//! maybe a SIGKILL), run one after another on one `vault mcp` session at a time; whatever a kill
//! took down is brought back before the next step. It records what every client was told.
use super::{
    alive, approve, pending_with, running_agent, tag, unlock, verify, AgentGuard, Approval,
    ApproveKill, Killer, Kind, Mcp, Reply, Rig, Rng,
};
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Who {
    Agent,
    Mcp,
    Approve,
}

#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub kind: Kind,
    pub card: bool,
    /// Who is killed during this step, and where: a fraction in [0, 1) that `Crash::step`
    /// turns into a moment (see there).
    pub kill: Option<(Who, f64)>,
}

/// The seeded plan: kinds and cards at random, then `kills` of each process placed at random
/// steps after the first 8 (an approver kill needs a card, so its step gets one).
pub fn plan(rng: &mut Rng, n: usize, card_ratio: f64, kills: &[(Who, usize)]) -> Vec<Step> {
    let warmup = 8;
    let mut steps: Vec<Step> = (0..n)
        .map(|_| Step {
            kind: if rng.chance(0.55) {
                Kind::Http
            } else {
                Kind::Ssh
            },
            card: rng.chance(card_ratio),
            kill: None,
        })
        .collect();
    assert!(kills.iter().map(|k| k.1).sum::<usize>() <= n - warmup);
    for &(who, count) in kills {
        let mut placed = 0;
        while placed < count {
            let s = &mut steps[warmup + rng.below(n - warmup)];
            if s.kill.is_some() {
                continue;
            }
            if who == Who::Approve {
                s.card = true;
            }
            s.kill = Some((who, rng.unit()));
            placed += 1;
        }
    }
    steps
}

/// What a client was told about a tagged action: by a tool result, or by `vault pending`.
#[derive(Debug, Clone)]
pub struct Told {
    pub step: usize,
    pub tag: String,
    pub action: Option<String>,
    pub state: Option<String>,
    pub code: Option<String>,
    /// The result as the client got it (for failure messages).
    pub said: String,
}

/// `Told::said` of an id `vault pending` listed (not an answer).
pub const PENDING_LISTED: &str = "vault pending --json";

/// Running estimates (ms) of how long things take, to place a kill inside them.
pub struct Estimates {
    pub http: f64,
    pub ssh: f64,
    /// `vault approve` from its start to its connection to the agent (the passphrase KDF).
    pub kdf: f64,
    /// `vault approve` from its connection to its exit.
    pub talk: f64,
}

fn learn(slot: &mut f64, took: Duration) {
    *slot = 0.8 * *slot + 0.2 * took.as_secs_f64() * 1000.0;
}

fn ms(x: f64) -> Duration {
    Duration::from_micros((x.max(0.0) * 1000.0) as u64)
}

pub struct Crash<'r> {
    pub rig: &'r Rig,
    pub mcp: Mcp,
    pub mcps: usize,
    pub agent: AgentGuard,
    pub est: Estimates,
    pub told: Vec<Told>,
    /// (seq, hash) of the head a killed agent left, and of the one `vault verify` reported
    /// after each restart.
    pub heads: Vec<(i64, String)>,
    pub killed: HashMap<Who, usize>,
    /// Kills by where they landed ("agent: dispatch", "approve: after connect", …).
    pub phases: HashMap<String, usize>,
    pub unlocks: usize,
    pub adopted: usize,
    pub refused_approvals: usize,
}

impl<'r> Crash<'r> {
    pub fn new(rig: &'r Rig) -> Self {
        let pid = running_agent(&rig.v).expect("init started an agent");
        let mcp = Mcp::start(&rig.v, rig.v.dir.path().join("mcp-0.log"));
        Self {
            rig,
            mcp,
            mcps: 1,
            agent: AgentGuard { pid },
            est: Estimates {
                http: 30.0,
                ssh: 60.0,
                kdf: 1200.0,
                talk: 30.0,
            },
            told: Vec::new(),
            heads: Vec::new(),
            killed: HashMap::new(),
            phases: HashMap::new(),
            unlocks: 0,
            adopted: 0,
            refused_approvals: 0,
        }
    }

    fn kill_landed(&mut self, who: Who, phase: &str) {
        *self.killed.entry(who).or_default() += 1;
        *self
            .phases
            .entry(format!("{who:?} {phase}").to_lowercase())
            .or_default() += 1;
    }

    /// The largest seq any reader saw so far.
    fn max_seen(&self) -> i64 {
        let arrived = [&self.rig.http, &self.rig.ssh]
            .iter()
            .flat_map(|t| t.arrivals())
            .map(|a| a.head.0)
            .max()
            .unwrap_or(0);
        arrived.max(self.heads.iter().map(|h| h.0).max().unwrap_or(0))
    }

    /// A dead agent is replaced (`vault unlock`, or the one `vault approve` started when it
    /// found none) and the journal checked: it verifies and holds every row seen before. A dead
    /// `vault mcp` is replaced by a new session.
    pub fn ensure_up(&mut self) {
        if !alive(self.agent.pid) {
            // What the dead agent committed, read before anyone opens the store again.
            self.heads.push(self.rig.journal.head());
            let seen = self.max_seen();
            self.agent.pid = match running_agent(&self.rig.v) {
                Some(pid) => {
                    self.adopted += 1;
                    pid
                }
                None => {
                    self.unlocks += 1;
                    unlock(&self.rig.v)
                }
            };
            let line = verify(&self.rig.v);
            assert_eq!(line["ok"], true, "vault verify after a restart: {line}");
            let head = (
                line["head"]["seq"].as_i64().unwrap(),
                line["head"]["hash"].as_str().unwrap().to_owned(),
            );
            assert!(
                head.0 >= seen,
                "the journal had row {seen} before the agent died and ends at {} after",
                head.0
            );
            self.heads.push(head);
        }
        if self.mcp.exited() {
            let log = self.rig.v.dir.path().join(format!("mcp-{}.log", self.mcps));
            self.mcps += 1;
            self.mcp = Mcp::start(&self.rig.v, log);
        }
    }

    /// Waits until a process this step killed is really gone.
    fn wait_dead(&mut self, who: Who) {
        let t0 = Instant::now();
        loop {
            let dead = match who {
                Who::Agent => !alive(self.agent.pid),
                Who::Mcp => self.mcp.exited(),
                Who::Approve => true,
            };
            if dead {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "{who:?} still runs 10 s after SIGKILL"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn arm(&self, who: Who, after: Duration) -> Killer {
        let pid = match who {
            Who::Agent => self.agent.pid,
            Who::Mcp => self.mcp.pid(),
            Who::Approve => unreachable!("vault approve is killed by `approve` itself"),
        };
        Killer::arm(pid, after)
    }

    /// One step. Where its kill lands, from its fraction `at`:
    /// - the agent or `vault mcp` during a policy-run action: at `at` × that kind's usual
    ///   round trip after the call was sent;
    /// - the same during a card action: in its first third, while the card waits (`at` × 3 ×
    ///   the usual `vault approve` run after the call); otherwise once the approval is recorded,
    ///   during the dispatch (the rest of `at` × the kind's round trip after `vault approve`
    ///   returned);
    /// - `vault approve`: in its first quarter, during the passphrase KDF; otherwise after it
    ///   connected to the agent (the rest of `at` × 0.8 × its usual time from there to its exit).
    pub fn step(&mut self, i: usize, s: Step) {
        self.ensure_up();
        let tag = tag(0, i);
        let id = i as i64 + 1;
        let (tool, args) = self.rig.call(s.kind, s.card, &tag);
        let t0 = Instant::now();
        assert!(
            self.mcp.call(id, tool, &args),
            "vault mcp stopped reading before step {i}; stderr: {}",
            self.mcp.stderr()
        );
        let round_trip = match s.kind {
            Kind::Http => self.est.http,
            Kind::Ssh => self.est.ssh,
        };
        let mut armed = None;
        let mut after_approval = None;
        match s.kill {
            Some((who @ (Who::Agent | Who::Mcp), at)) if !s.card => {
                armed = Some((who, "during the action", self.arm(who, ms(at * round_trip))));
            }
            Some((who @ (Who::Agent | Who::Mcp), at)) if at < 1.0 / 3.0 => {
                let wait = at * 3.0 * (self.est.kdf + self.est.talk);
                armed = Some((who, "while the card waits", self.arm(who, ms(wait))));
            }
            Some((who @ (Who::Agent | Who::Mcp), at)) => {
                after_approval = Some((who, ms((at - 1.0 / 3.0) * 1.5 * round_trip)));
            }
            _ => {}
        }
        let reply = if s.card {
            self.card(i, &tag, id, s, t0, after_approval, &mut armed)
        } else {
            self.mcp.reply(id, Duration::from_secs(90))
        };
        let took = t0.elapsed();
        let mut fired = None;
        if let Some((who, phase, k)) = armed {
            if k.join() {
                self.kill_landed(who, phase);
                fired = Some(who);
                self.wait_dead(who);
            }
        }
        match reply {
            Reply::Answer(r) => {
                let sc = &r["result"]["structuredContent"];
                let told = Told {
                    step: i,
                    tag: tag.clone(),
                    action: sc["action_id"].as_str().map(str::to_owned),
                    state: sc["state"].as_str().map(str::to_owned),
                    code: sc["error"]["code"]
                        .as_str()
                        .or(r["error"]["code"].as_i64().map(|_| "jsonrpc"))
                        .map(str::to_owned),
                    said: r.to_string(),
                };
                if s.kill.is_none() {
                    // Nothing was killed: the action ran to its end.
                    assert_eq!(
                        told.state.as_deref(),
                        Some("completed"),
                        "step {i} ({tag}): {r}"
                    );
                    if !s.card {
                        match s.kind {
                            Kind::Http => learn(&mut self.est.http, took),
                            Kind::Ssh => learn(&mut self.est.ssh, took),
                        }
                    }
                }
                self.told.push(told);
            }
            Reply::Gone => assert_eq!(
                fired,
                Some(Who::Mcp),
                "step {i} ({tag}): vault mcp closed its stdout though this test did not kill it; \
                 stderr: {}",
                self.mcp.stderr()
            ),
            Reply::Timeout => panic!(
                "step {i} ({tag}, {s:?}): no answer within 90 s; stderr: {}",
                self.mcp.stderr()
            ),
        }
        if fired != Some(Who::Agent) {
            assert!(
                alive(self.agent.pid) || running_agent(&self.rig.v).is_some(),
                "step {i} ({tag}): the agent died though this test did not kill it"
            );
        }
        self.ensure_up();
    }

    /// A card action: the person (`vault approve --id`, scripted) approves it once `vault
    /// pending` lists it; a planned approver kill hits that `vault approve`, and a fresh one
    /// approves the action if it still waits. A kill planned for the dispatch is armed the
    /// moment the approval is recorded.
    #[allow(clippy::too_many_arguments)]
    fn card(
        &mut self,
        i: usize,
        tag: &str,
        id: i64,
        s: Step,
        t0: Instant,
        after_approval: Option<(Who, Duration)>,
        armed: &mut Option<(Who, &'static str, Killer)>,
    ) -> Reply {
        let mut kill_approver = match s.kill {
            Some((Who::Approve, at)) if at < 0.25 => {
                Some(ApproveKill::AfterStart(ms(at * 4.0 * self.est.kdf)))
            }
            Some((Who::Approve, at)) => Some(ApproveKill::AfterConnect(ms((at - 0.25) / 0.75
                * 0.8
                * self.est.talk))),
            _ => None,
        };
        let mut approved = false;
        loop {
            let wait = if approved {
                Duration::from_secs(90)
            } else {
                Duration::from_millis(15)
            };
            match self.mcp.reply(id, wait) {
                Reply::Timeout if !approved => {}
                r => return r,
            }
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "step {i} ({tag}): no answer within 90 s"
            );
            let Some(action) = pending_with(&self.rig.v, tag) else {
                continue;
            };
            self.told.push(Told {
                step: i,
                tag: tag.to_owned(),
                action: Some(action.clone()),
                state: Some("pending".into()),
                code: None,
                said: PENDING_LISTED.into(),
            });
            let kill = kill_approver.take();
            let run = approve(&self.rig.v, &action, kill);
            match run.outcome {
                Approval::Approved => {
                    approved = true;
                    if let Some(c) = run.connected {
                        learn(&mut self.est.kdf, c);
                        learn(&mut self.est.talk, run.took.saturating_sub(c));
                    }
                    if let Some((who, after)) = after_approval {
                        *armed = Some((who, "during the dispatch", self.arm(who, after)));
                    }
                }
                Approval::Killed => {
                    let phase = match (kill, run.connected) {
                        (Some(ApproveKill::AfterConnect(_)), _) => "after it connected",
                        (_, Some(_)) => "as it connected",
                        _ => "during its KDF",
                    };
                    self.kill_landed(Who::Approve, phase);
                }
                Approval::Refused(why) => {
                    // Only a kill explains a refusal (the action withdrawn, the agent gone).
                    self.refused_approvals += 1;
                    assert!(
                        s.kill.is_some(),
                        "step {i}: vault approve --id {action} failed: {why}"
                    );
                }
            }
        }
    }
}
