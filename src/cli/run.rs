//! `vault run [--project DIR] [--allow-write PATH]… [--allow-read PATH]… [--pass-env NAME]…
//! [--allow-host HOST[:PORT]]… [--network contained|open] [--allow-weaker] -- CLIENT [ARGS…]`:
//! starts the AI client in a sandbox the kernel enforces (`crate::contain`),
//! with its own terminal, and exits with its exit code. It says on stderr, in one line, what is
//! contained on this kernel; it refuses, naming what is missing and the one change that enables
//! it, where the kernel cannot contain (never a silently weaker sandbox).
use crate::cli::Exit;
use crate::contain::{
    self, ContainError, Launch, Listener, Plan, SocketAt, Spec, Support, VaultFiles,
};
use crate::paths::VaultPaths;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub(super) struct Args {
    /// The project the client may change (default: the working directory).
    #[arg(long, value_name = "DIR")]
    project: Option<PathBuf>,
    /// Also writable inside (repeatable).
    #[arg(long, value_name = "PATH")]
    allow_write: Vec<PathBuf>,
    /// Also shown inside, read-only (repeatable): nothing of your home is, unless named.
    #[arg(long, value_name = "PATH")]
    allow_read: Vec<PathBuf>,
    /// Pass this environment variable although its name looks secret (repeatable): other
    /// tools' tokens (`*KEY*`, `*SECRET*`, `*TOKEN*`, …) do not pass by default.
    #[arg(long, value_name = "NAME")]
    pass_env: Vec<String>,
    /// Start even where the kernel lacks Landlock's scopes (ABI 6): a weaker sandbox, whose
    /// actions are not marked contained.
    #[arg(long)]
    allow_weaker: bool,
    /// A host the sandbox may reach through the vault's proxy besides the client's model API
    /// (repeatable): HOST, HOST:PORT, [IPv6]:PORT or *.DOMAIN.
    #[arg(long, value_name = "HOST[:PORT]")]
    allow_host: Vec<String>,
    /// Give the client a placeholder in NAME for the vault's HTTP credential CREDENTIAL
    /// (repeatable): requests that send it to the credential's https:// host are swapped,
    /// gated and run by the vault like `http_request`; the secret never enters the sandbox.
    #[arg(long = "env", value_name = "NAME=CREDENTIAL")]
    env: Vec<String>,
    /// `contained` (the default): a network of its own whose only way out is the vault's proxy,
    /// to the allowed hosts. `open`: the person's network, loopback services included; its
    /// actions are not marked contained.
    #[arg(long, value_enum, default_value_t = Network::Contained, value_name = "MODE")]
    network: Network,
    /// The AI client and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CLIENT"
    )]
    command: Vec<OsString>,
}

/// How the sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Network {
    Contained,
    Open,
}

/// `name` on `PATH` (or as given, if it has a slash).
fn resolve(name: &OsString) -> Option<PathBuf> {
    let p = Path::new(name);
    if p.components().count() > 1 {
        return p.is_file().then(|| p.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|c| {
            use std::os::unix::fs::PermissionsExt;
            c.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// `config.toml`'s `[network] allow`, as far as the approver signed it: a host passes when the
/// file names it and the agent's signed list does too (an edit that adds one waits for `vault
/// config --sign`; one that removes one holds at once). What is left out is said on stderr.
fn signed_hosts(paths: &VaultPaths) -> Vec<contain::egress::Entry> {
    use crate::agent::protocol::{Reply, Request, Role};
    let wanted = crate::config::Config::load(paths)
        .map(|c| c.network.allow)
        .unwrap_or_default();
    if wanted.is_empty() {
        return Vec::new();
    }
    let signed = match crate::agent::client::Client::connect(paths, Role::Cli) {
        Ok(Some(mut c)) => match c.call(Request::AllowedHosts) {
            Ok(Reply::Hosts(h)) => Some(h),
            _ => None,
        },
        _ => None,
    };
    let Some(signed) = signed else {
        super::out::note(format_args!("vault run: config.toml's [network] allow is not used: no vault agent answers to say which of its hosts you signed (`vault unlock`, then start again)"));
        return Vec::new();
    };
    let (mut out, mut unsigned) = (Vec::new(), Vec::new());
    for h in wanted {
        if !signed.contains(&h) && !crate::mutation::off("network_allow_signed") {
            unsigned.push(crate::term::escape(&h));
            continue;
        }
        match contain::egress::Entry::parse(&h) {
            Ok(e) => out.push(e),
            Err(e) => super::out::note(format_args!(
                "vault run: config.toml's [network] allow: {e}; it is left out"
            )),
        }
    }
    if !unsigned.is_empty() {
        super::out::note(format_args!(
            "vault run: config.toml's [network] allow names {}, which you have not signed: each waits for your card (`vault config --sign` lets them through)",
            unsigned.join(", ")
        ));
    }
    out
}

/// The trust bundle inside: the system's roots and the vault's proxy CA, rewritten each run.
const BUNDLE: &str = "proxy-ca-bundle.pem";

/// `--env NAME=CREDENTIAL`: for each, the agent's leaf for the credential's bound host and a
/// placeholder in `NAME`; the trust bundle (the system's roots and the vault's CA) written into
/// the vault's directory, shown inside read-only, and named by every tool's CA variable.
fn swaps(
    paths: &VaultPaths,
    wanted: &[String],
    contained: bool,
    env: &mut Vec<(OsString, OsString)>,
) -> anyhow::Result<(contain::intercept::Swaps, Option<PathBuf>)> {
    use crate::agent::protocol::{ClientInfo, Reply, Request, Role};
    let mut swaps = contain::intercept::Swaps::default();
    if wanted.is_empty() {
        return Ok((swaps, None));
    }
    if !contained {
        anyhow::bail!("--env swaps a placeholder in the vault's proxy, which --network open does not use; drop one of them");
    }
    let info = ClientInfo {
        name: "vault run --env".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: String::new(),
    };
    let mut client = crate::agent::client::Client::connect_as(paths, Role::Egress, Some(info))?
        .ok_or_else(|| anyhow::anyhow!("--env needs the vault unlocked, to make the placeholders' certificates: run `vault unlock`, then start again"))?;
    let mut ca = String::new();
    for w in wanted {
        let Some((name, cred)) = w.split_once('=').filter(|(n, c)| {
            !n.is_empty()
                && !c.is_empty()
                && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }) else {
            anyhow::bail!("--env {w:?}: give NAME=CREDENTIAL, e.g. --env GITHUB_TOKEN=github");
        };
        let issued = match client.call(Request::Intercept {
            credential: cred.into(),
        })? {
            Reply::Intercept(i) => i,
            Reply::Error { message, .. } => anyhow::bail!("{message}"),
            other => anyhow::bail!("the vault agent answered {other:?} to --env {w}"),
        };
        let swap =
            contain::intercept::Swapped::new(name, cred, &issued).map_err(anyhow::Error::msg)?;
        env.retain(|(k, _)| k.as_bytes() != name.as_bytes());
        env.push((name.into(), swap.placeholder.clone().into()));
        ca = issued.ca_pem;
        swaps.0.push(swap);
    }
    let _ = client.call(Request::End {
        reason: "placeholders made".into(),
    });
    let system = [
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .unwrap_or_default();
    let bundle = std::path::absolute(paths.dir())?.join(BUNDLE);
    let _ = std::fs::remove_file(&bundle);
    crate::paths::write_new_private(&bundle, format!("{system}\n{ca}").as_bytes())?;
    for var in [
        "SSL_CERT_FILE",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "GIT_SSL_CAINFO",
    ] {
        env.retain(|(k, _)| k != var);
        env.push((var.into(), bundle.clone().into()));
    }
    Ok((swaps, Some(bundle)))
}

fn cstring(s: &std::ffi::OsStr) -> anyhow::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| anyhow::anyhow!("{s:?} holds a NUL byte"))
}

fn absolute(p: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))
}

pub(super) fn run(paths: VaultPaths, args: Args) -> anyhow::Result<Exit> {
    // No fork to probe: the sandbox's own `unshare` reports a refusal (`NoUserNamespaces`).
    let support = Support::without_probe();
    if let Err(why) = &support.userns {
        return Err(ContainError::NoUserNamespaces {
            why: why.clone(),
            fix: contain::userns_fix(),
        }
        .into());
    }
    let full = support.full();
    if !full && !args.allow_weaker {
        return Err(ContainError::NoLandlock {
            abi: support.landlock_abi,
        }
        .into());
    }
    let home = dirs::home_dir().ok_or_else(|| anyhow::anyhow!("no home directory: set HOME"))?;
    let project = absolute(&match &args.project {
        Some(p) => p.clone(),
        None => std::env::current_dir()?,
    })?;
    let program = resolve(&args.command[0]).ok_or_else(|| {
        anyhow::anyhow!(
            "{} is not a program on PATH; give its path, e.g. `vault run -- /usr/local/bin/claude`",
            args.command[0].to_string_lossy()
        )
    })?;
    let spec = Spec {
        home: home.clone(),
        project: project.clone(),
        vault_dir: std::path::absolute(paths.dir())?,
        vault_exe: absolute(&std::env::current_exe()?)?,
        runtime_dir: std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute()),
        program: std::path::absolute(&program)?,
        allow_write: args
            .allow_write
            .iter()
            .map(|p| absolute(p))
            .collect::<Result<_, _>>()?,
        allow_read: args
            .allow_read
            .iter()
            .map(|p| absolute(p))
            .collect::<Result<_, _>>()?,
        pass_env: args.pass_env.clone(),
        env: std::env::vars_os().collect(),
    };
    let mut extra = args
        .allow_host
        .iter()
        .map(|h| contain::egress::Entry::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(anyhow::Error::msg)?;
    if args.network == Network::Contained {
        extra.extend(signed_hosts(&paths));
    }
    let mut plan = Plan::new(&spec)?;
    let network = (args.network == Network::Contained)
        .then(|| contain::egress::allow_for(plan.client, &spec.env, &extra));
    if network.is_some() {
        contain::egress::set_env(&mut plan.env);
    }
    let (swaps, bundle) = swaps(&paths, &args.env, network.is_some(), &mut plan.env)?;
    // Sessions are marked contained only where the sandbox is whole: its network too.
    let full = full && network.is_some();
    for d in plan.to_create() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)?;
    }
    for (p, content) in &plan.placeholders {
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        if content.is_empty() && p.extension().is_none() {
            std::fs::create_dir_all(p)?;
        } else {
            crate::paths::write_new_private(p, content.as_bytes())?;
        }
    }
    let argv = args
        .command
        .iter()
        .map(|a| cstring(a))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // The one way to the vault: a relay socket, bound inside where `vault mcp` looks.
    let vault_dir = spec.vault_dir.clone();
    let (socket, relay, files) = match paths.read_id() {
        Ok(id) if !id.is_empty() => {
            let dir = crate::agent::socket::socket_dir();
            crate::agent::socket::prepare_dir(&dir)?;
            let listener = Listener::bind(&dir)?;
            let socket = SocketAt {
                outside: listener.path.clone(),
                inside: crate::agent::socket::socket_path(&id),
            };
            let files: Vec<PathBuf> = [paths.id_file(), paths.config()]
                .into_iter()
                .chain(bundle.clone())
                .filter(|f| f.exists())
                .map(|f| vault_dir.join(f.file_name().unwrap_or_default()))
                .collect();
            (Some(socket), Some((listener, paths.clone(), full)), files)
        }
        _ => (None, None, Vec::new()),
    };
    let writable: Vec<String> = plan
        .shown
        .iter()
        .filter(|s| s.writable)
        .map(|s| s.path.display().to_string())
        .collect();
    let client = plan.client.map_or(String::new(), |c| {
        format!(
            "; {} keeps its state, not its self-update (update it outside)",
            c.label
        )
    });
    let net = match &network {
        Some(allow) if allow.0.is_empty() => {
            "the network: none (its own namespace; allow hosts with --allow-host)".to_owned()
        }
        Some(allow) => format!(
            "the network: only {} through the vault's proxy (more with --allow-host)",
            allow.describe()
        ),
        None => "the network stays OPEN (--network open), loopback services included".to_owned(),
    };
    let weaker = if full {
        ""
    } else if args.allow_weaker && !support.full() {
        ". WEAKER than a full sandbox (--allow-weaker): its actions are not marked contained"
    } else {
        ". Its actions are not marked contained (--network open)"
    };
    super::out::note(format_args!(
        "vault run: {} contained ({}); in view: the system read-only, its installation read-only, writable: {}{client}; nothing else of {} (name more with --allow-read/--allow-write); {net}{weaker}",
        program.display(),
        support.describe(network.is_some()),
        writable.join(", "),
        home.display(),
    ));
    let launch = Launch {
        plan,
        program: cstring(program.as_os_str())?,
        argv,
        cwd: project,
        socket,
        vault: VaultFiles {
            dir: vault_dir,
            files,
        },
        weaker_ok: args.allow_weaker,
        umask: crate::sys::started_umask(),
        network,
        swaps,
    };
    let code = contain::run(launch, relay)?;
    std::process::exit(code)
}
