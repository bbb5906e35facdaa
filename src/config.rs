//! `$VAULT_DIR/config.toml`: byte budgets and approval timings (docs/design.md §6). The defaults are
//! `assets/config.default.toml`, embedded, so the documented file and the code cannot disagree.
//! A missing file or key means its default; an unknown key, a value that is not a whole number,
//! or one outside its range (`BOUNDS`) is an error that names the key and the range. Nothing in
//! the file can make a later computation overflow.
use crate::paths::VaultPaths;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The documented default file (`vault config --defaults` prints it).
pub const DEFAULTS: &str = include_str!("../assets/config.default.toml");

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Every key of the file: (section, key, least, most, unit). A value outside its range is refused.
pub const BOUNDS: &[(&str, &str, u64, u64, &str)] = &[
    (
        "limits",
        "stderr_retained_per_call_bytes",
        1,
        16 * MIB,
        "bytes",
    ),
    (
        "limits",
        "stderr_retained_process_bytes",
        1,
        256 * MIB,
        "bytes",
    ),
    ("limits", "stderr_agent_excerpt_bytes", 1, MIB, "bytes"),
    (
        "limits",
        "output_retained_per_call_bytes",
        1,
        64 * MIB,
        "bytes",
    ),
    (
        "limits",
        "output_retained_process_bytes",
        1,
        1024 * MIB,
        "bytes",
    ),
    ("limits", "shutdown_grace_seconds", 0, 300, "seconds"),
    (
        "limits",
        "refused_calls_per_second",
        1,
        100_000,
        "journaled refusals per second",
    ),
    ("limits", "ssh_idle_seconds", 1, 86400, "seconds"),
    ("approvals", "expiry_seconds", 1, 7 * 86400, "seconds"),
    ("approvals", "wait_seconds", 0, 120, "seconds"),
    ("approvals", "session_grant_seconds", 1, 86400, "seconds"),
    ("approvals", "approver_idle_seconds", 1, 86400, "seconds"),
    ("approvals", "replay_window_seconds", 0, 86400, "seconds"),
    ("agent", "idle_seconds", 0, 30 * 86400, "seconds; 0: never"),
    ("agent", "answer_seconds", 1, 600, "seconds"),
    (
        "openbao",
        "secret_cache_seconds",
        0,
        3600,
        "seconds; 0: read on every call",
    ),
    ("openbao", "timeout_seconds", 1, 120, "seconds"),
];

/// Errors reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}; fix it or delete it to use the defaults (`vault config --defaults` prints every key, its default and what it does)")]
    Invalid { path: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub stderr_retained_per_call_bytes: usize,
    pub stderr_retained_process_bytes: usize,
    pub stderr_agent_excerpt_bytes: usize,
    pub output_retained_per_call_bytes: usize,
    pub output_retained_process_bytes: usize,
    pub shutdown_grace_seconds: u64,
    pub refused_calls_per_second: u32,
    pub ssh_idle_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approvals {
    pub expiry_seconds: u64,
    pub wait_seconds: u64,
    pub session_grant_seconds: u64,
    pub approver_idle_seconds: u64,
    pub replay_window_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// The agent locks itself after this long with no request (0: never).
    pub idle_seconds: u64,
    /// A person's command waits this long for the agent to answer, then says so and ends.
    pub answer_seconds: u64,
}

/// Team mode (`vault openbao login`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenBao {
    /// How long the agent keeps a secret read from OpenBao in memory (0: read on every call).
    pub secret_cache_seconds: u64,
    /// The deadline of one request to OpenBao.
    pub timeout_seconds: u64,
}

/// `vault run`'s network. `allow` counts only once the approver signed it (`vault config
/// --sign`): the agent keeps the signed list, and `vault run` lets through a host that is both
/// here and there, so an edit that adds a host waits for a signature and one that removes a host
/// holds at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Hosts the sandbox reaches without a card: `host`, `host:port`, `[v6]:port`, `*.domain`.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// The most hosts `[network] allow` may name, and the longest one.
pub const ALLOW_MAX: usize = 256;
const ALLOW_ENTRY_MAX: usize = 260;

/// Every field is required here: the user's keys are laid over the shipped file's table first,
/// so the defaults live in one place (`assets/config.default.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub limits: Limits,
    pub approvals: Approvals,
    pub agent: Agent,
    pub openbao: OpenBao,
    #[serde(default)]
    pub network: Network,
}

impl Default for Config {
    fn default() -> Self {
        toml::from_str(DEFAULTS).expect("assets/config.default.toml is valid")
    }
}

/// One key of the effective configuration, and whether `config.toml` set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub section: &'static str,
    pub key: &'static str,
    pub value: u64,
    pub unit: &'static str,
    pub from_file: bool,
}

impl Config {
    /// Every key (in `BOUNDS` order) with its value here; `from_file` names the keys `file_text`
    /// (the text of `config.toml`, if any) sets.
    pub fn settings(&self, file_text: Option<&str>) -> Vec<Setting> {
        let values = serde_json::to_value(self).expect("a configuration serializes");
        let user: toml::Table = file_text
            .and_then(|t| toml::from_str(t).ok())
            .unwrap_or_default();
        BOUNDS
            .iter()
            .map(|&(section, key, _, _, unit)| Setting {
                section,
                key,
                value: values[section][key].as_u64().unwrap_or_default(),
                unit,
                from_file: user
                    .get(section)
                    .and_then(toml::Value::as_table)
                    .is_some_and(|t| t.contains_key(key)),
            })
            .collect()
    }

    /// The vault's configuration: the defaults, overridden key by key by `config.toml`.
    pub fn load(paths: &VaultPaths) -> Result<Self, ConfigError> {
        Self::read(paths).map(|(config, _)| config)
    }

    /// `load`, and the text of `config.toml` it was read from (`None` when there is none).
    pub fn read(paths: &VaultPaths) -> Result<(Self, Option<String>), ConfigError> {
        let path = paths.config();
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok((Self::default(), None))
            }
            Err(source) => {
                return Err(ConfigError::Read {
                    path: shown,
                    source,
                })
            }
        };
        let config = Self::parse(&text).map_err(|message| ConfigError::Invalid {
            path: shown,
            message,
        })?;
        Ok((config, Some(text)))
    }

    /// Parses a config file's text over the defaults. Every key is checked against `BOUNDS`
    /// before anything is typed, so the error names the key and its range.
    pub fn parse(text: &str) -> Result<Self, String> {
        let user: toml::Table = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut merged: toml::Table = toml::from_str(DEFAULTS).expect("defaults parse");
        for (section, table) in &user {
            let Some(table) = table.as_table() else {
                return Err(format!(
                    "[{section}] must be a section; the sections are [limits], [approvals], [agent], [openbao] and [network]"
                ));
            };
            if section == "network" {
                let network = parse_network(table)?;
                merged.insert(section.clone(), toml::Value::Table(network));
                continue;
            }
            for (key, value) in table {
                let Some(&(_, _, min, max, unit)) =
                    BOUNDS.iter().find(|(s, k, ..)| s == section && k == key)
                else {
                    return Err(format!(
                        "unknown key [{section}] {key} (`vault config --defaults` lists the keys)"
                    ));
                };
                let ok = value
                    .as_integer()
                    .and_then(|n| u64::try_from(n).ok())
                    .is_some_and(|n| (min..=max).contains(&n));
                if !ok {
                    let value = match value {
                        toml::Value::Integer(n) => n.to_string(),
                        toml::Value::Float(f) => f.to_string(),
                        toml::Value::String(s) => format!("{s:?}"),
                        toml::Value::Boolean(b) => b.to_string(),
                        _ => "a table or array".to_owned(),
                    };
                    return Err(format!(
                        "[{section}] {key} = {value} is outside {min}..={max} ({unit}); give a whole number in that range"
                    ));
                }
                if let Some(base) = merged.get_mut(section).and_then(toml::Value::as_table_mut) {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        let cfg: Config = toml::Value::Table(merged)
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_owned())?;
        cfg.check()?;
        Ok(cfg)
    }

    fn check(&self) -> Result<(), String> {
        let l = &self.limits;
        if l.output_retained_per_call_bytes > l.output_retained_process_bytes {
            return Err("limits must satisfy output_retained_per_call_bytes <= output_retained_process_bytes".into());
        }
        if l.stderr_agent_excerpt_bytes > l.stderr_retained_per_call_bytes
            || l.stderr_retained_per_call_bytes > l.stderr_retained_process_bytes
        {
            return Err("limits must satisfy stderr_agent_excerpt_bytes <= stderr_retained_per_call_bytes <= stderr_retained_process_bytes".into());
        }
        Ok(())
    }

    pub fn expiry(&self) -> Duration {
        Duration::from_secs(self.approvals.expiry_seconds)
    }
    pub fn replay_window(&self) -> Duration {
        Duration::from_secs(self.approvals.replay_window_seconds)
    }
    pub fn session_grant(&self) -> Duration {
        Duration::from_secs(self.approvals.session_grant_seconds)
    }
    pub fn approver_idle(&self) -> Duration {
        Duration::from_secs(self.approvals.approver_idle_seconds)
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.limits.shutdown_grace_seconds)
    }
    pub fn agent_answer(&self) -> Duration {
        Duration::from_secs(self.agent.answer_seconds)
    }
}

/// `[network]`: only `allow`, a list of at most `ALLOW_MAX` host strings (each entry's form is
/// checked where it is used, by `vault run` and `vault config --sign`).
fn parse_network(table: &toml::Table) -> Result<toml::Table, String> {
    let mut out = toml::Table::new();
    for (key, value) in table {
        if key != "allow" {
            return Err(format!(
                "unknown key [network] {key}; the section has one key, allow = [\"HOST\", …]"
            ));
        }
        let hosts = value.as_array().filter(|a| {
            a.len() <= ALLOW_MAX
                && a.iter().all(|h| {
                    h.as_str()
                        .is_some_and(|h| !h.is_empty() && h.len() <= ALLOW_ENTRY_MAX)
                })
        });
        if hosts.is_none() {
            return Err(format!(
                "[network] allow must be a list of at most {ALLOW_MAX} hosts, each a string (HOST, HOST:PORT, [IPv6]:PORT or *.DOMAIN)"
            ));
        }
        out.insert(key.clone(), value.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design_and_overrides_apply_key_by_key() {
        let d = Config::default();
        assert_eq!(d.limits.output_retained_per_call_bytes, 1 << 20);
        assert_eq!(d.approvals.expiry_seconds, 600);
        assert_eq!(d.approvals.wait_seconds, 50);
        let c = Config::parse("[approvals]\nexpiry_seconds = 60\n").unwrap();
        assert_eq!(c.approvals.expiry_seconds, 60);
        assert_eq!(c.approvals.wait_seconds, 50);
        assert_eq!(c.limits, d.limits);
        assert!(Config::parse("").is_ok());
        // The shipped file parses to the defaults, and every default is inside its bounds.
        assert_eq!(Config::parse(DEFAULTS).unwrap(), d);
        let table: toml::Table = toml::from_str(DEFAULTS).unwrap();
        let keys: usize = table.values().map(|s| s.as_table().unwrap().len()).sum();
        assert_eq!(
            keys,
            BOUNDS.len() + 1,
            "BOUNDS covers every key of the defaults but [network] allow"
        );
        assert!(d.network.allow.is_empty());
    }

    #[test]
    fn network_allow_is_a_bounded_list_of_hosts() {
        let c = Config::parse("[network]\nallow = [\"registry.npmjs.org\", \"*.crates.io:443\"]\n")
            .unwrap();
        assert_eq!(c.network.allow, ["registry.npmjs.org", "*.crates.io:443"]);
        assert_eq!(c.approvals, Config::default().approvals);
        let many = vec!["\"h\""; ALLOW_MAX + 1].join(", ");
        for (text, want) in [
            ("[network]\nallow = \"h\"\n", "must be a list"),
            ("[network]\nallow = [1]\n", "must be a list"),
            ("[network]\nallow = [\"\"]\n", "must be a list"),
            (&format!("[network]\nallow = [{many}]\n"), "at most 256"),
            ("[network]\ndeny = []\n", "unknown key [network] deny"),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_keys_and_unusable_values_are_named_with_the_range() {
        assert!(Config::parse("[limits]\noutput_agnet_bytes = 5\n")
            .unwrap_err()
            .contains("output_agnet_bytes"));
        assert!(Config::parse("[extra]\nx = 1\n").is_err());
        assert!(Config::parse("limits = 3\n").is_err());
        for (text, want) in [
            (
                "[approvals]\nexpiry_seconds = 0\n",
                "expiry_seconds = 0 is outside 1..=604800",
            ),
            (
                "[approvals]\nexpiry_seconds = 9223372036854775807\n",
                "outside 1..=604800 (seconds)",
            ),
            (
                "[approvals]\nwait_seconds = -1\n",
                "wait_seconds = -1 is outside 0..=120",
            ),
            ("[approvals]\nwait_seconds = \"soon\"\n", "outside 0..=120"),
            ("[approvals]\nwait_seconds = 1.5\n", "outside 0..=120"),
            (
                "[limits]\noutput_retained_per_call_bytes = 99999999999\n",
                "outside 1..=67108864",
            ),
        ] {
            let e = Config::parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        assert!(
            Config::parse("[limits]\noutput_retained_per_call_bytes = 33554432\n")
                .unwrap_err()
                .contains("output_retained_per_call_bytes <= output_retained_process_bytes")
        );
        // A key nothing reads is not offered: the agent's share is each call's max_output_bytes.
        assert!(Config::parse("[limits]\noutput_agent_bytes = 65536\n")
            .unwrap_err()
            .contains("unknown key [limits] output_agent_bytes"));
    }

    #[test]
    fn every_bound_takes_its_edges_and_refuses_one_past_them() {
        for &(section, key, least, most, _) in BOUNDS {
            let at = |v: u64| Config::parse(&format!("[{section}]\n{key} = {v}\n"));
            for edge in [least, most] {
                // An edge may still break a rule between two keys (a call's share above the
                // process's), but never its own range.
                if let Err(e) = at(edge) {
                    assert!(!e.contains("outside"), "{section}.{key} = {edge}: {e}");
                }
            }
            let mut past = vec![most + 1];
            if least > 0 {
                past.push(least - 1);
            }
            for v in past {
                let e = at(v).expect_err(&format!("{section}.{key} = {v} is refused"));
                assert!(
                    e.contains(key) && e.contains("outside"),
                    "{section}.{key} = {v}: {e}"
                );
            }
        }
    }
}
