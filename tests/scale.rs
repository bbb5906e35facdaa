//! Scale suites (issue 19), through the real binary, counting at the targets.
//!
//! - `crash`: SIGKILL of the custody agent, of `vault mcp` and of `vault approve` at seeded random
//!   points during a stream of HTTP (`http_request` to a loopback target) and SSH (`ssh_exec` to
//!   a real loopback sshd) actions, some run by policy, some approved on a card; each killed
//!   process is restarted and the stream goes on. Then: the journal verifies and lost nothing,
//!   what each client was told holds at the target, every dispatched action is final, no request
//!   reached a target before its intent row, and each target's count is what the journal says.
//! - `soak`: 8 concurrent `vault mcp` sessions, a scripted approver, and `vault log --follow`
//!   reading the whole time. Then: one chain that the follower saw in order, no duplicate
//!   dispatch, each tag at its target exactly once, and the agent's memory flat.
//!
//! By default each runs at CI size (about a minute on 2 cores, debug build). The size
//! (1,000 actions; 8 × 500):
//!
//!     VAULT_SCALE=full cargo test --release --test scale -- --nocapture
//!
//! Each prints its seed and figures; `VAULT_SCALE_SEED=<seed>` replays the same plan (which
//! actions, kinds and cards, which process is killed during which action and where in it). The
//! interleaving itself is the scheduler's. The harness is `tests/support/scale/`.
#[path = "support/scale/mod.rs"]
mod harness;
mod support;

use harness::*;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn size_name(full: bool) -> &'static str {
    if full {
        "full"
    } else {
        "CI"
    }
}

#[test]
fn crash() {
    let _one = serial();
    let full = full_size();
    let seed = seed();
    let (n, card_ratio, kills) = if full {
        (
            1000,
            0.10,
            [(Who::Agent, 30), (Who::Mcp, 30), (Who::Approve, 20)],
        )
    } else {
        (
            80,
            0.08,
            [(Who::Agent, 4), (Who::Mcp, 4), (Who::Approve, 3)],
        )
    };
    eprintln!(
        "crash: seed {seed:#x} (replay: VAULT_SCALE_SEED={seed:#x}), {} size, {n} actions, {}",
        size_name(full),
        binary()
    );
    let t0 = Instant::now();
    let steps = plan(&mut Rng::new(seed), n, card_ratio, &kills);
    let rig = Rig::new("scale-crash");
    let mut c = Crash::new(&rig);
    let setup = t0.elapsed();
    for (i, s) in steps.iter().enumerate() {
        c.step(i, *s);
    }
    c.mcp.finish(Duration::from_secs(30));
    rig.settle(Duration::from_secs(60));
    let ran = t0.elapsed() - setup;

    // One chain, complete: it verifies, and every head seen along the way is in it unchanged.
    let line = verify(&rig.v);
    assert_eq!(line["ok"], true, "{line}");
    let rows = export(&rig.v, "crash.jsonl");
    assert_eq!(line["rows"].as_u64(), Some(rows.len() as u64));
    let mut heads = c.heads.clone();
    for t in [&rig.http, &rig.ssh] {
        heads.extend(t.arrivals().into_iter().map(|a| a.head));
    }
    assert_heads_kept(&rows, &heads);
    let acts = Actions::of(&rows);
    let per_tag: HashMap<Kind, HashMap<String, usize>> = [Kind::Http, Kind::Ssh]
        .into_iter()
        .map(|k| (k, rig.target(k).per_tag()))
        .collect();
    let arrived = |kind: Kind, tag: &str| per_tag[&kind].get(tag).copied().unwrap_or(0);
    let anywhere = |tag: &str| arrived(Kind::Http, tag) + arrived(Kind::Ssh, tag);
    let cut: Vec<Arrival> = [Kind::Http, Kind::Ssh]
        .iter()
        .flat_map(|k| rig.target(*k).cut())
        .collect();
    let cut_tags: HashSet<&str> = cut.iter().filter_map(|a| a.tag.as_deref()).collect();

    // The figures first (a failure below still shows them), and what each kill did to the
    // action of its step.
    let mut finals: HashMap<(Kind, String), usize> = HashMap::new();
    for id in acts.by_id.keys() {
        let key = (acts.kind_of[id], acts.last(id).unwrap().to_owned());
        *finals.entry(key).or_default() += 1;
    }
    let landed = |w: Who| c.killed.get(&w).copied().unwrap_or(0);
    let planned = |w: Who| {
        steps
            .iter()
            .filter(|s| s.kill.is_some_and(|k| k.0 == w))
            .count()
    };
    let cards = steps.iter().filter(|s| s.card).count();
    let http = steps.iter().filter(|s| s.kind == Kind::Http).count();
    let told: HashSet<&String> = c.told.iter().filter_map(|t| t.action.as_ref()).collect();
    let mut phases: Vec<_> = c.phases.iter().collect();
    phases.sort();
    eprintln!(
        "crash: {n} actions ({http} HTTP, {} SSH, {cards} with a card) in {:.1} s, setup {:.1} s",
        n - http,
        ran.as_secs_f64(),
        setup.as_secs_f64(),
    );
    eprintln!(
        "crash: SIGKILLs landed: agent {} of {} planned ({} unlocks, {} agents started by vault \
         approve), vault mcp {} of {} ({} sessions), vault approve {} of {} ({} approvals \
         refused after a kill); where: {phases:?}",
        landed(Who::Agent),
        planned(Who::Agent),
        c.unlocks,
        c.adopted,
        landed(Who::Mcp),
        planned(Who::Mcp),
        c.mcps,
        landed(Who::Approve),
        planned(Who::Approve),
        c.refused_approvals,
    );
    eprintln!(
        "crash: journal {} rows, {} actions ({} told to a client); {} heads checked across {} \
         agent restarts; usual durations: HTTP {:.0} ms, SSH {:.0} ms, vault approve {:.0} ms \
         KDF + {:.0} ms with the agent",
        rows.len(),
        acts.by_id.len(),
        told.len(),
        heads.len(),
        c.unlocks + c.adopted,
        c.est.http,
        c.est.ssh,
        c.est.kdf,
        c.est.talk,
    );
    for kind in [Kind::Http, Kind::Ssh] {
        let of = |state: &str| finals.get(&(kind, state.to_owned())).copied().unwrap_or(0);
        let indeterminate_arrived = acts
            .tag_of
            .iter()
            .filter(|(id, _)| acts.kind_of[*id] == kind && acts.last(id) == Some("indeterminate"))
            .map(|(_, tag)| arrived(kind, tag))
            .sum::<usize>();
        eprintln!(
            "crash: {kind:?} target: {} requests = {} completed + {indeterminate_arrived} of {} \
             indeterminate (+ {} heads cut short by a kill); {} failed_before_send, {} withdrawn",
            rig.target(kind).requests(),
            of("completed"),
            of("indeterminate"),
            rig.target(kind).cut().len(),
            of("failed_before_send"),
            of("withdrawn"),
        );
    }
    let mut odd: Vec<_> = acts
        .tag_of
        .iter()
        .filter(|(id, _)| acts.last(id) != Some("completed"))
        .map(|(id, tag)| (step_of(tag), id, tag))
        .collect();
    odd.sort();
    for (step, id, tag) in odd {
        let s = steps[step];
        eprintln!(
            "  step {step} {:?}{} kill {:?}: {}, arrived {}x{} ({:?})",
            s.kind,
            if s.card { " card" } else { "" },
            s.kill.map(|k| k.0),
            acts.path(id),
            anywhere(tag),
            if cut_tags.contains(tag.as_str()) {
                " + cut"
            } else {
                ""
            },
            acts.reason_of.get(id).map_or("", String::as_str),
        );
    }
    for a in &cut {
        eprintln!("  cut short: {:?} (tag {:?})", a.cut, a.tag);
    }
    // The answers the clients got, and those whose action the journal ends otherwise (an
    // answer `vault mcp` gave from what it knew when the agent died, say).
    let mut answers: HashMap<String, usize> = HashMap::new();
    let mut differ = Vec::new();
    for t in c.told.iter().filter(|t| t.said != PENDING_LISTED) {
        let said = t.state.clone().or(t.code.clone()).unwrap_or_default();
        *answers.entry(said.clone()).or_default() += 1;
        if let Some(last) = t.action.as_deref().and_then(|id| acts.last(id)) {
            if last != said {
                differ.push(format!("step {} told {said}, journal {}", t.step, last));
            }
        }
    }
    let mut answers: Vec<_> = answers.into_iter().collect();
    answers.sort();
    eprintln!("crash: answers {answers:?}; differing from the journal's end: {differ:?}");

    // Every action id a client was told about is in the journal, and what it was told holds at
    // the target: `completed` arrived once; "nothing was sent" (failed_before_send, withdrawn,
    // locked) never arrived, not even in part.
    for t in &c.told {
        let ctx = format!("step {} ({}): {}", t.step, t.tag, t.said);
        if let Some(id) = &t.action {
            assert!(acts.by_id.contains_key(id), "not in the journal: {ctx}");
            assert_eq!(acts.tag_of.get(id), Some(&t.tag), "{ctx}");
        }
        let n = anywhere(&t.tag);
        match (t.state.as_deref(), t.code.as_deref()) {
            (Some("completed"), _) => {
                let id = t.action.as_deref().unwrap();
                assert_eq!(acts.last(id), Some("completed"), "{ctx}");
                assert_eq!(n, 1, "told completed, arrived {n} times: {ctx}");
            }
            (Some("failed_before_send" | "withdrawn" | "denied" | "expired"), _)
            | (None, Some("locked")) => {
                assert_eq!(n, 0, "told nothing was sent, arrived {n} times: {ctx}");
                assert!(
                    !cut_tags.contains(t.tag.as_str()),
                    "told nothing was sent, part arrived: {ctx}"
                );
            }
            (Some("indeterminate"), _) => {
                let id = t.action.as_deref().unwrap();
                assert_eq!(acts.count(id, "dispatched"), 1, "{ctx}");
            }
            _ => {}
        }
    }

    // Every action is final; one with a dispatched row is completed, failed_before_send or
    // indeterminate (the reaper's word for one a killed agent left), one without ended before
    // any dispatch (a claim refused is failed_before_send too); one tag is one action,
    // dispatched at most once.
    for (id, states) in &acts.by_id {
        let last = acts.last(id).unwrap();
        let dispatched = acts.count(id, "dispatched");
        assert!(
            dispatched <= 1,
            "{id} dispatched {dispatched} times: {states:?}"
        );
        let finals: &[&str] = if dispatched == 1 {
            &["completed", "failed_before_send", "indeterminate"]
        } else {
            &["withdrawn", "denied", "expired", "failed_before_send"]
        };
        assert!(finals.contains(&last), "{id} ends {last}: {states:?}");
    }
    for (tag, ids) in &acts.ids_of_tag {
        assert_eq!(
            ids.len(),
            1,
            "tag {tag} belongs to several actions: {ids:?}"
        );
    }

    // No request reached a target before its intent row (checked as each one arrived).
    assert_intent_before_every_request(&rig, &acts);

    // Each target's count is what the journal says. Exact equality holds only per tag: an
    // action killed after its intent row but before its first byte is `indeterminate` and never
    // arrived, so a target's count is its completed actions plus the indeterminate ones whose
    // tag did arrive, and at most completed + indeterminate. A head cut short by the kill is
    // no request (no server acts on half a head), and only an indeterminate action leaves one.
    for kind in [Kind::Http, Kind::Ssh] {
        let (mut completed, mut indeterminate, mut indeterminate_arrived) = (0, 0, 0);
        let mut cut_room = 0;
        for (id, tag) in acts
            .tag_of
            .iter()
            .filter(|(id, _)| acts.kind_of[*id] == kind)
        {
            let last = acts.last(id).unwrap();
            let here = arrived(kind, tag);
            assert_eq!(anywhere(tag), here, "{tag} ({id}) reached the other target");
            let part = cut_tags.contains(tag.as_str());
            match last {
                "completed" => {
                    completed += 1;
                    assert_eq!(
                        (here, part),
                        (1, false),
                        "{tag} ({id}) completed: (requests, a head cut short)"
                    );
                }
                "indeterminate" => {
                    indeterminate += 1;
                    assert!(
                        here + usize::from(part) <= 1,
                        "{tag} ({id}) arrived {here} times"
                    );
                    indeterminate_arrived += here;
                    cut_room += usize::from(here == 0 && !part);
                }
                _ => assert_eq!(
                    (here, part),
                    (0, false),
                    "{tag} ({id}) ended {last}, yet arrived"
                ),
            }
        }
        let requests = rig.target(kind).requests();
        assert_eq!(requests, completed + indeterminate_arrived, "{kind:?}");
        assert!(requests <= completed + indeterminate, "{kind:?}");
        let untagged = rig
            .target(kind)
            .cut()
            .iter()
            .filter(|a| a.tag.is_none())
            .count();
        assert!(
            untagged <= cut_room,
            "{kind:?}: {untagged} heads cut short without a tag, but only {cut_room} \
             indeterminate actions that could have sent them"
        );
    }
    run(&rig.v, &["lock"], None).ok();
}

#[test]
fn soak() {
    let _one = serial();
    let full = full_size();
    let seed = seed();
    let (sessions, per, card_ratio) = if full { (8, 500, 0.05) } else { (8, 50, 0.03) };
    eprintln!(
        "soak: seed {seed:#x} (replay: VAULT_SCALE_SEED={seed:#x}), {} size, {sessions} sessions \
         x {per} actions, {}",
        size_name(full),
        binary()
    );
    let t0 = Instant::now();
    let rig = Rig::new("scale-soak");
    let agent = AgentGuard {
        pid: running_agent(&rig.v).expect("init started an agent"),
    };
    let soak = Soak {
        rig: &rig,
        seed,
        sessions,
        per,
        card_ratio,
        agent: agent.pid,
        done: AtomicUsize::new(0),
        rss: Mutex::new(Vec::new()),
        abort: AtomicBool::new(false),
    };
    // The follower takes its snapshot before any session starts. `vault log` lists a snapshot
    // in the order the actions were created, each at its latest seq, so a snapshot taken
    // mid-run may go back in seq; what it prints after the snapshot comes in journal order.
    // One action, finished before the follower starts, is the whole snapshot, and its line is
    // the sign that the snapshot was taken.
    let marker = soak.marker();
    let mut follower = Follower::start(&rig.v);
    follower.wait_lines(1, Duration::from_secs(30));
    let started = Instant::now();
    let stop = AtomicBool::new(false);
    let (done, rss_end, (approved, approving)) = std::thread::scope(|s| {
        let approver = s.spawn(|| soak.approver(&stop));
        let handles: Vec<_> = (0..sessions)
            .map(|k| {
                let soak = &soak;
                s.spawn(move || soak.session(k))
            })
            .collect();
        let results: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
        let rss_end = Rss::of(agent.pid);
        stop.store(true, Ordering::SeqCst);
        let approvals = approver.join();
        let mut done = Vec::new();
        for r in results {
            done.extend(r.unwrap_or_else(|e| std::panic::resume_unwind(e)));
        }
        let approvals = approvals.unwrap_or_else(|e| std::panic::resume_unwind(e));
        (done, rss_end, approvals)
    });
    let ran = started.elapsed();
    rig.settle(Duration::from_secs(30));

    let line = verify(&rig.v);
    assert_eq!(line["ok"], true, "{line}");
    let rows = export(&rig.v, "soak.jsonl");
    assert_eq!(line["rows"].as_u64(), Some(rows.len() as u64));
    let acts = Actions::of(&rows);

    // Every action completed, dispatched exactly once; the journal holds exactly the actions
    // the sessions (and the marker's session) were told of.
    assert_eq!(done.len(), sessions * per);
    let done: Vec<Done> = done.into_iter().chain([marker]).collect();
    let told: HashSet<&str> = done.iter().map(|d| d.action.as_str()).collect();
    let journal: HashSet<&str> = acts.by_id.keys().map(String::as_str).collect();
    assert_eq!(
        told, journal,
        "the journal's actions are the ones the sessions ran"
    );
    for d in &done {
        assert_eq!(acts.last(&d.action), Some("completed"), "{}", d.tag);
        assert_eq!(acts.count(&d.action, "dispatched"), 1, "{}", d.tag);
        assert_eq!(acts.tag_of.get(&d.action), Some(&d.tag));
    }

    // Each target saw each of its tags exactly once, and only after its intent row.
    assert_intent_before_every_request(&rig, &acts);
    let mut figures = Vec::new();
    for kind in [Kind::Http, Kind::Ssh] {
        let mine: Vec<&Done> = done.iter().filter(|d| d.kind == kind).collect();
        let seen = rig.target(kind).per_tag();
        for d in &mine {
            assert_eq!(
                seen.get(&d.tag),
                Some(&1),
                "{kind:?} saw {} not once",
                d.tag
            );
        }
        assert_eq!(rig.target(kind).requests(), mine.len(), "{kind:?}");
        assert!(
            rig.target(kind).cut().is_empty(),
            "{kind:?}: a head cut short"
        );
        figures.push(format!("{kind:?} target {} requests", mine.len()));
    }

    // The follower saw the chain in order with nothing missing at its end: each line names a
    // journal row of its action in its state, seqs only grow, and each action's last line is
    // its last row. (`log` prints one line per action per batch of rows it reads, so a row
    // that came in the same batch as a later row of its action shows only through that one.)
    let last_action_row = rows.iter().rev().find(|r| r.state().is_some()).unwrap().seq;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let max = follower
            .lines()
            .iter()
            .filter_map(|l| l["seq"].as_i64())
            .max();
        if max >= Some(last_action_row) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "vault log --follow stopped at {max:?} of {last_action_row}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(follower.running(), "vault log --follow exited");
    let lines = follower.lines();
    let mut prev = 0;
    let mut last_of: HashMap<&str, i64> = HashMap::new();
    for l in &lines {
        let (Some(seq), Some(id), Some(state)) = (
            l["seq"].as_i64(),
            l["action_id"].as_str(),
            l["state"].as_str(),
        ) else {
            panic!("vault log --follow printed an entry that is not an action: {l}");
        };
        assert!(
            seq > prev,
            "vault log --follow went from seq {prev} back to {seq}: {l}"
        );
        prev = seq;
        let row = &rows[seq as usize - 1];
        assert_eq!(row.action.as_deref(), Some(id), "{l}");
        assert_eq!(row.state(), Some(state), "{l}");
        last_of.insert(id, seq);
    }
    for (id, states) in &acts.by_id {
        assert_eq!(
            last_of.get(id.as_str()),
            Some(&states.last().unwrap().0),
            "vault log --follow missed the end of {id}"
        );
    }

    // Memory flat: the agent's RSS at the end within 10% of its RSS after the first 100.
    let series = soak.rss.lock().unwrap().clone();
    let rss_100 = series
        .iter()
        .find(|(n, _)| *n == 100)
        .expect("100 actions ran")
        .1;
    eprintln!(
        "soak: {} actions and a marker ({}) in {:.1} s ({:.0}/s), {approved} approved on a card \
         ({:.1} s in vault approve); journal {} rows, vault log --follow printed {} lines up to \
         seq {prev}; total wall {:.1} s",
        sessions * per,
        figures.join(", "),
        ran.as_secs_f64(),
        (sessions * per) as f64 / ran.as_secs_f64(),
        approving.as_secs_f64(),
        rows.len(),
        lines.len(),
        t0.elapsed().as_secs_f64(),
    );
    let along: Vec<String> = series
        .iter()
        .map(|(n, m)| format!("{n}: {}", m.total))
        .collect();
    eprintln!(
        "soak: agent VmRSS after 100 actions {rss_100}, at the end {rss_end} ({:+.1}%); along \
         the run (actions: KiB) {}",
        (rss_end.total as f64 / rss_100.total as f64 - 1.0) * 100.0,
        along.join(", "),
    );
    // The message carries the series: a step early in the run that stays flat after it is
    // warm-up (threads, and their allocator arenas, appearing as concurrency builds), steady
    // growth along it a leak. The bound holds either to 10% over the whole run.
    assert!(
        rss_end.total as f64 <= rss_100.total as f64 * 1.10,
        "the agent grew from {rss_100} after 100 actions to {rss_end} at the end; along the run: \
         {}",
        along.join(", ")
    );
    run(&rig.v, &["lock"], None).ok();
}
