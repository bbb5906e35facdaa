//! The agent's service loop: the shared state (`Agent`, in `shared.rs`), the listening socket, one task per
//! connection (`connection.rs`), the expiry of waiting actions, and the lifetimes (absolute,
//! idle, `vault lock`, `vault unlock --restart` by SIGHUP) with an orderly shutdown that journals
//! `vault.lock` and tells the person's connections why.
use super::protocol::AgentStatus;
use super::shared::{Agent, OwnPaths};
use super::socket::{self};
use super::{AgentError, Start};
use crate::services::db::Db;
use crate::services::hub::Hub;
use crate::services::tools::Env;
use crate::store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::time::Instant;

pub(super) fn serve(
    start: Start,
    store: Store,
    lock: &std::fs::File,
    hardening: crate::sys::Hardening,
    ready: impl FnOnce(Result<&AgentStatus, &AgentError>),
) -> Result<(), AgentError> {
    // Whatever stops the start is told to the one waiting for it (`vault unlock`), never left
    // for it to time out on.
    // One thread runs every connection's tasks: what they do between awaits is short (the
    // writer, the executors and the SSH runtime have threads of their own), and on two cores a
    // task woken on another worker thread cost a context switch per hop (measured: 0.1-0.2 ms
    // of a call's p50, http_overhead).
    let started = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(AgentError::from)
        .and_then(|rt| {
            let config = crate::config::Config::load(&start.paths)
                .map_err(|e| AgentError::Start(e.to_string()))?;
            Ok((rt, config))
        });
    let (rt, config) = match started {
        Ok(ok) => ok,
        Err(e) => {
            ready(Err(&e));
            return Err(e);
        }
    };
    // Responses a previous agent wrote for a proxy that never read them.
    let _ = std::fs::remove_dir_all(start.paths.relayed());
    let hub = Arc::new(Hub::default());
    // Team mode: the stored OpenBao login (an unreadable one is reported by `vault openbao
    // status` and at the first call that needs it).
    let openbao = Arc::new(crate::services::openbao::Remote::new(
        config.openbao.clone(),
        None,
    ));
    openbao.reload(store.conn());
    // Its own read connection checks that OpenBao's head is on this journal before moving it.
    let reader = crate::store::Store::open(&start.paths.db(), &start.master)
        .map_err(|e| tracing::warn!(error = %e, "no read connection for the OpenBao head writer"))
        .ok();
    let heads = Arc::new(crate::services::openbao::head::Publisher::start(
        openbao.clone(),
        start.trust.vault_id.clone(),
        reader,
    ));
    let on_anchor = {
        let heads = heads.clone();
        Box::new(move |seq, hash| heads.publish(seq, hash))
    };
    let (db, db_thread) = Db::start(store, hub.clone(), start.paths.clone(), on_anchor);
    let mut channel_key = super::channel::channel_key(&start.master);
    let key_locked = crate::sys::lock_in_memory(&channel_key[..])
        && crate::sys::lock_in_memory(&start.master.expose()[..]);
    // (The key's bytes are on the heap: moving `start.master` below moves only the pointer.)
    let status = initial_status(&start, &config, hardening, key_locked);
    let (stop, stopping) = watch::channel(None);
    let env = Arc::new(Env {
        db,
        hub,
        trust: start.trust,
        paths: start.paths.clone(),
        http: Arc::new(
            crate::exec::HttpExecutor::new(&config.limits).relaying_into(start.paths.relayed()),
        ),
        ssh: Arc::new(crate::exec::SshExecutor::new(&config.limits)),
        openbao,
        heads,
        config,
        stopping,
    });
    let listener = rt.block_on(async { bind(&start.socket) });
    let (listener, own) =
        match listener.and_then(|l| Ok((l, OwnPaths::of(&start.socket, &start.paths, lock)?))) {
            Ok(l) => l,
            Err(e) => {
                ready(Err(&e));
                return Err(e);
            }
        };
    ready(Ok(&status));
    tracing::info!(pid = status.pid, socket = %status.socket, locks_at = %status.locks_at, "vault agent listening");
    let agent = Arc::new(Agent {
        env,
        master: start.master,
        channel_key: std::mem::take(&mut channel_key),
        status: Mutex::new(status),
        last_activity: Mutex::new(Instant::now()),
        busy: AtomicUsize::new(0),
        admission: Arc::default(),
        stop,
        noticed: Mutex::new(Vec::new()),
        own,
    });
    let why = rt.block_on(run(agent.clone(), listener, start.lifetime));
    let _ = std::fs::remove_file(&start.socket);
    rt.block_on(shutdown(&agent, why));
    rt.shutdown_timeout(Duration::from_millis(200));
    drop(agent);
    let _ = db_thread.join();
    tracing::info!(why, "vault agent stopped");
    Ok(())
}

/// What `vault unlock` and `vault doctor` are told about this agent when it starts.
fn initial_status(
    start: &Start,
    config: &crate::config::Config,
    hardening: crate::sys::Hardening,
    key_locked: bool,
) -> AgentStatus {
    let now = jiff::Timestamp::now();
    AgentStatus {
        pid: std::process::id(),
        vault_id: start.trust.vault_id.clone(),
        socket: start.socket.display().to_string(),
        started_at: crate::time::format_utc(now),
        locks_at: crate::time::format_utc(now + start.lifetime),
        idle_seconds: config.agent.idle_seconds,
        hardening: crate::sys::Hardening {
            key_locked,
            ..hardening
        },
        connections: 0,
        version: env!("CARGO_PKG_VERSION").into(),
        store: None,
        config: config
            .settings(None)
            .into_iter()
            .map(|s| (format!("{}.{}", s.section, s.key), s.value))
            .collect(),
    }
}

fn bind(path: &std::path::Path) -> Result<UnixListener, AgentError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().unwrap_or(std::path::Path::new("/"));
    socket::prepare_dir(dir)?;
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

async fn run(agent: Arc<Agent>, listener: UnixListener, lifetime: Duration) -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(expiry_task(agent.env.clone()));
    let mut stop = agent.stop.subscribe();
    let ends = Instant::now() + lifetime;
    // 0: never stop for idleness.
    let idle = match agent.env.config.agent.idle_seconds {
        0 => Duration::from_secs(100 * 365 * 86400),
        s => Duration::from_secs(s),
    };
    let mut sigterm = signal(SignalKind::terminate()).ok();
    // `vault lock` and `vault pause` reach the agent by signal, not through a socket that a
    // same-uid process can move, relay or flood.
    let mut lock_signal = signal(SignalKind::user_defined1()).ok();
    let mut restart_signal = signal(SignalKind::hangup()).ok();
    let mut pause_signal = signal(SignalKind::user_defined2()).ok();
    let mut watch = tokio::time::interval(Duration::from_secs(1));
    loop {
        let idle_at = *agent
            .last_activity
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            + idle;
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    agent.touch();
                    tokio::spawn(super::connection::serve(agent.clone(), stream));
                }
                Err(e) => tracing::warn!("accept failed: {e}"),
            },
            _ = stop.changed() => return (*stop.borrow()).unwrap_or("locked"),
            _ = tokio::time::sleep_until(ends) => return "lifetime ended",
            _ = tokio::time::sleep_until(idle_at) => {
                let busy = agent.busy.load(Ordering::SeqCst) > 0;
                let quiet = agent.last_activity.lock().map(|t| t.elapsed() >= idle).unwrap_or(true);
                if quiet && !busy {
                    return "idle";
                }
                if busy {
                    // A call in flight is activity; counting it so also keeps this timer
                    // from firing again at once (a spin) until the call ends.
                    agent.touch();
                }
            }
            _ = watch.tick() => if let Some(why) = agent.own.check(&agent) { return why },
            _ = recv(&mut sigterm) => return "signal",
            _ = recv(&mut lock_signal) => return "vault lock",
            _ = recv(&mut restart_signal) => return "restart",
            _ = recv(&mut pause_signal) => {
                let paused = agent
                    .env
                    .db
                    .run(|s| crate::approvals::pause(s, "vault pause (by signal)"))
                    .await;
                match paused {
                    Ok(Ok(n)) => tracing::warn!(denied = n, "paused by signal"),
                    _ => tracing::error!("the pause by signal could not be journaled"),
                }
            }
        }
    }
}

/// The next delivery of a signal (never, if it could not be subscribed to).
async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
    match s.as_mut() {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Expires pending actions when their time comes (the writer then publishes them).
async fn expiry_task(env: Arc<Env>) {
    let mut queue = env.hub.watch_queue();
    loop {
        let next = env
            .db
            .run(|s| crate::approvals::next_expiry(s).ok().flatten())
            .await;
        let Ok(next) = next else { return };
        let wait = next
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(|t| {
                let ms = t.duration_since(jiff::Timestamp::now()).as_millis();
                Duration::from_millis(u64::try_from(ms.max(0)).unwrap_or(0) + 5)
            })
            .unwrap_or(Duration::from_secs(3600));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {
                if env.db.run(|s| crate::approvals::expire_due(s).map(|v| v.len())).await.is_err() {
                    return;
                }
            }
            changed = queue.changed() => if changed.is_err() { return },
        }
    }
}

async fn shutdown(agent: &Arc<Agent>, why: &'static str) {
    // Connections see the stop signal and end their sessions; give in-flight work the grace.
    agent.stop(why);
    let grace = agent.env.config.shutdown_grace();
    let deadline = Instant::now() + grace;
    while agent.admission.open() > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let locked = agent
        .env
        .db
        .run(move |s| {
            let tx = s.write()?;
            let body = crate::wire::journal::VaultLock {
                reason: why.to_string(),
            };
            let head = crate::audit::append(&tx, None, None, &body)
                .map_err(|_| crate::store::StoreError::Damaged("journal append failed"))?;
            tx.commit()?;
            Ok::<_, crate::store::StoreError>(head)
        })
        .await;
    // Team mode: the head at lock is written to OpenBao before the agent ends (within the
    // shutdown grace, at least 2 s).
    if let Ok(Ok(head)) = locked {
        if agent.env.openbao.is_logged_in() {
            agent.env.heads.publish(head.seq, head.hash);
            let heads = agent.env.heads.clone();
            let _ =
                tokio::task::spawn_blocking(move || heads.flush(grace.max(Duration::from_secs(2))))
                    .await;
        }
    }
}
