//! An in-process SSH server on 127.0.0.1 (russh) for `vault demo` (which must run where no sshd
//! is installed) and the SSH executor's fast unit tests. It has a throwaway ed25519 host key
//! (which it can rotate), one user with a password or a public key, and a tiny fake shell that
//! runs nothing on the machine: `echo`, `exit N`, `yes [WORD] [1>&2]`, `sleep N`, `whoami`,
//! `hostname`, `login-info` (echoes the login, secret included, so scrubbing can be shown),
//! `stubborn-yes` (a flood that ignores TERM) and `exit-then-flood` (exits but keeps writing, like
//! a background child holding the stream). It counts connections, login attempts, commands and
//! signals, so tests can show at the target what did (not) happen.
use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::keys::{HashAlg, PrivateKey, PublicKey};
use russh::server::{self, Auth, Msg, Session};
use russh::{Channel, ChannelId, MethodKind, MethodSet, Sig};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use zeroize::Zeroizing;

/// How the one user may log in.
pub(crate) enum Accept {
    Password(Zeroizing<String>),
    #[cfg_attr(not(test), allow(dead_code))]
    Key(PublicKey),
}

struct Shared {
    user: String,
    accept: Accept,
    config: Mutex<Arc<server::Config>>,
    host_key: Mutex<String>,
    commands: Mutex<Vec<String>>,
    signals: Mutex<Vec<String>>,
    logins: AtomicUsize,
    connects: AtomicUsize,
    live: AtomicUsize,
    sessions: Mutex<Vec<server::Handle>>,
}

/// A running target; it stops when dropped.
pub(crate) struct SshTarget {
    pub port: u16,
    shared: Arc<Shared>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

fn host_config() -> (Arc<server::Config>, String) {
    let mut seed = Zeroizing::new([0u8; 32]);
    getrandom::fill(seed.as_mut_slice()).expect("the OS random number generator failed");
    let key = PrivateKey::from(Ed25519Keypair::from_seed(&seed));
    let fp = key.public_key().fingerprint(HashAlg::Sha256).to_string();
    let config = server::Config {
        keys: vec![key],
        methods: MethodSet::from(&[MethodKind::Password, MethodKind::PublicKey][..]),
        auth_rejection_time: Duration::from_millis(10),
        auth_rejection_time_initial: Some(Duration::ZERO),
        inactivity_timeout: None,
        ..server::Config::default()
    };
    (Arc::new(config), fp)
}

impl SshTarget {
    pub(crate) fn start(user: &str, accept: Accept) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let (config, fp) = host_config();
        let shared = Arc::new(Shared {
            user: user.to_owned(),
            accept,
            config: Mutex::new(config),
            host_key: Mutex::new(fp),
            commands: Mutex::default(),
            signals: Mutex::default(),
            logins: AtomicUsize::new(0),
            connects: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            sessions: Mutex::default(),
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("demo-ssh-target".into())
            .spawn(move || {
                rt.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = stopped => {}
                        _ = accept_loop(listener, s) => {}
                    }
                })
            })?;
        Ok(Self {
            port,
            shared,
            _stop: stop,
        })
    }

    /// `SHA256:…` of the current host key.
    pub(crate) fn host_key(&self) -> String {
        lock(&self.shared.host_key).clone()
    }
    /// Every command the fake shell was asked to run, in order.
    pub(crate) fn commands(&self) -> Vec<String> {
        lock(&self.shared.commands).clone()
    }
    /// Every signal a client sent.
    #[cfg(test)]
    pub(crate) fn signals(&self) -> Vec<String> {
        lock(&self.shared.signals).clone()
    }
    /// Login attempts (password or signed public key) seen.
    pub(crate) fn logins(&self) -> usize {
        self.shared.logins.load(Ordering::SeqCst)
    }
    /// TCP connections accepted, and those still open.
    #[cfg(test)]
    pub(crate) fn connections(&self) -> (usize, usize) {
        (
            self.shared.connects.load(Ordering::SeqCst),
            self.shared.live.load(Ordering::SeqCst),
        )
    }
    /// Drops every open connection (as a restarted server would).
    #[cfg(test)]
    pub(crate) fn drop_connections(&self) {
        let sessions: Vec<server::Handle> = lock(&self.shared.sessions).drain(..).collect();
        for h in sessions {
            let _ = tokio_block(h).join();
        }
    }
    /// A new host key for the connections that follow.
    #[cfg(test)]
    pub(crate) fn rotate_host_key(&self) {
        let (config, fp) = host_config();
        *lock(&self.shared.config) = config;
        *lock(&self.shared.host_key) = fp;
    }
}

/// Disconnects a session from outside its runtime.
#[cfg(test)]
fn tokio_block(h: server::Handle) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(async move {
                let _ = h
                    .disconnect(russh::Disconnect::ByApplication, "bye".into(), "en".into())
                    .await;
            });
        }
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>) {
    while let Ok((socket, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            shared.connects.fetch_add(1, Ordering::SeqCst);
            shared.live.fetch_add(1, Ordering::SeqCst);
            let config = lock(&shared.config).clone();
            let handler = Conn {
                shared: shared.clone(),
                running: HashMap::new(),
            };
            if let Ok(session) = server::run_stream(config, socket, handler).await {
                lock(&shared.sessions).push(session.handle());
                let _ = session.await;
            }
            shared.live.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Ctl {
    Run,
    Signal(String),
    Closed,
}

struct Conn {
    shared: Arc<Shared>,
    running: HashMap<ChannelId, watch::Sender<Ctl>>,
}

impl server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        self.shared.logins.fetch_add(1, Ordering::SeqCst);
        let ok = matches!(&self.shared.accept, Accept::Password(p) if p.as_str() == password)
            && user == self.shared.user;
        Ok(if ok { Auth::Accept } else { Auth::reject() })
    }

    async fn auth_publickey_offered(
        &mut self,
        user: &str,
        offer: server::PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        let ok = matches!(&self.shared.accept, Accept::Key(k) if k.key_data() == offer.public_key.key_data())
            && user == self.shared.user;
        Ok(if ok { Auth::Accept } else { Auth::reject() })
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: server::VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        self.shared.logins.fetch_add(1, Ordering::SeqCst);
        let ok = matches!(&self.shared.accept, Accept::Key(k) if k.key_data() == key.public_key.key_data())
            && user == self.shared.user;
        Ok(if ok { Auth::Accept } else { Auth::reject() })
    }

    async fn channel_open_session(
        &mut self,
        _channel: Channel<Msg>,
        reply: server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        reply.accept().await;
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        let command = String::from_utf8_lossy(data).into_owned();
        lock(&self.shared.commands).push(command.clone());
        session.channel_success(channel)?;
        let (tx, rx) = watch::channel(Ctl::Run);
        self.running.insert(channel, tx);
        let shell = Shell {
            handle: session.handle(),
            id: channel,
            ctl: rx,
            shared: self.shared.clone(),
        };
        tokio::spawn(shell.run(command));
        Ok(())
    }

    async fn signal(
        &mut self,
        channel: ChannelId,
        signal: Sig,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let name = format!("{signal:?}");
        lock(&self.shared.signals).push(name.clone());
        if let Some(tx) = self.running.get(&channel) {
            let _ = tx.send(Ctl::Signal(name));
        }
        Ok(())
    }

    async fn channel_close(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(tx) = self.running.remove(&channel) {
            let _ = tx.send(Ctl::Closed);
        }
        Ok(())
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        for tx in self.running.values() {
            let _ = tx.send(Ctl::Closed);
        }
    }
}

/// The fake shell of one exec request.
struct Shell {
    handle: server::Handle,
    id: ChannelId,
    ctl: watch::Receiver<Ctl>,
    shared: Arc<Shared>,
}

/// How a fake command ended.
enum End {
    Exit(u32),
    Signal(String),
    Closed,
}

impl Shell {
    async fn out(&self, text: &str) {
        let _ = self.handle.data(self.id, text.as_bytes().to_vec()).await;
    }

    async fn err(&self, text: &str) {
        let _ = self
            .handle
            .extended_data(self.id, 1, text.as_bytes().to_vec())
            .await;
    }

    /// Writes `line` to stdout or stderr until told otherwise; TERM ends it unless `stubborn`.
    async fn flood(&mut self, line: &str, to_stderr: bool, stubborn: bool) -> End {
        let chunk = line
            .repeat((32 * 1024 / line.len().max(1)).max(1))
            .into_bytes();
        loop {
            let send = async {
                if to_stderr {
                    self.handle.extended_data(self.id, 1, chunk.clone()).await
                } else {
                    self.handle.data(self.id, chunk.clone()).await
                }
            };
            tokio::select! {
                biased;
                _ = self.ctl.changed() => match self.ctl.borrow().clone() {
                    Ctl::Closed => return End::Closed,
                    Ctl::Signal(s) if !stubborn => return End::Signal(s),
                    _ => {}
                },
                sent = send => if sent.is_err() { return End::Closed },
            }
        }
    }

    async fn run(mut self, command: String) {
        let words: Vec<&str> = command.split_whitespace().collect();
        let to_stderr = words.last() == Some(&"1>&2");
        let args: Vec<&str> = words
            .iter()
            .skip(1)
            .filter(|w| **w != "1>&2")
            .copied()
            .collect();
        let end = match words.first().copied().unwrap_or("") {
            "echo" => {
                let line = format!("{}\n", args.join(" "));
                if to_stderr {
                    self.err(&line).await;
                } else {
                    self.out(&line).await;
                }
                End::Exit(0)
            }
            "true" => End::Exit(0),
            "false" => End::Exit(1),
            "exit" => End::Exit(args.first().and_then(|a| a.parse().ok()).unwrap_or(0)),
            "whoami" => {
                self.out(&format!("{}\n", self.shared.user)).await;
                End::Exit(0)
            }
            "hostname" => {
                self.out("vault-demo-target\n").await;
                End::Exit(0)
            }
            "login-info" => {
                let how = match &self.shared.accept {
                    Accept::Password(p) => format!("password {}", p.as_str()),
                    Accept::Key(k) => format!("key {}", k.fingerprint(HashAlg::Sha256)),
                };
                self.out(&format!(
                    "debug: {} logged in with {how}\n",
                    self.shared.user
                ))
                .await;
                End::Exit(0)
            }
            "yes" => {
                let word = args.first().copied().unwrap_or("y");
                self.flood(&format!("{word}\n"), to_stderr, false).await
            }
            "stubborn-yes" => {
                let word = args.first().copied().unwrap_or("y");
                self.flood(&format!("{word}\n"), true, true).await
            }
            "exit-then-flood" => {
                let _ = self.handle.exit_status_request(self.id, 0).await;
                let word = args.first().copied().unwrap_or("bg");
                self.flood(&format!("{word}\n"), true, true).await
            }
            "sleep" => {
                let secs: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(1.0);
                self.sleep(Duration::from_secs_f64(secs.clamp(0.0, 600.0)))
                    .await
            }
            other => {
                self.err(&format!("fake-sh: {other}: command not found\n"))
                    .await;
                End::Exit(127)
            }
        };
        self.finish(end).await;
    }

    /// Sleeps like `sleep`, ended early by a signal or the channel's close.
    async fn sleep(&mut self, how_long: Duration) -> End {
        let sleep = tokio::time::sleep(how_long);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break End::Exit(0),
                _ = self.ctl.changed() => match self.ctl.borrow().clone() {
                    Ctl::Closed => break End::Closed,
                    Ctl::Signal(s) => break End::Signal(s),
                    Ctl::Run => {}
                },
            }
        }
    }

    /// Reports how the command ended (exit status or signal), then EOF and close.
    async fn finish(self, end: End) {
        let h = &self.handle;
        match end {
            End::Exit(code) => {
                let _ = h.exit_status_request(self.id, code).await;
            }
            End::Signal(name) => {
                let sig = match name.as_str() {
                    "TERM" => Sig::TERM,
                    "INT" => Sig::INT,
                    "KILL" => Sig::KILL,
                    "HUP" => Sig::HUP,
                    other => Sig::Custom(other.to_owned()),
                };
                let _ = h
                    .exit_signal_request(self.id, sig, false, String::new(), String::new())
                    .await;
            }
            End::Closed => return,
        }
        let _ = h.eof(self.id).await;
        let _ = h.close(self.id).await;
    }
}
