//! `$VAULT_DIR/config.toml`: byte budgets and approval timings (DESIGN §6). The defaults are
//! `assets/config.default.toml`, embedded, so the documented file and the code cannot disagree.
//! A missing file means the defaults; an unknown key or an unusable value is an error that names it.
use crate::paths::VaultPaths;
use serde::Deserialize;
use std::time::Duration;

const DEFAULTS: &str = include_str!("../assets/config.default.toml");

/// Errors reading the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path} is not valid: {message}; fix it or delete it to use the defaults (see assets/config.default.toml)")]
    Invalid { path: String, message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub stderr_retained_per_call_bytes: usize,
    pub stderr_retained_process_bytes: usize,
    pub stderr_agent_excerpt_bytes: usize,
    pub output_retained_per_call_bytes: usize,
    pub output_retained_process_bytes: usize,
    pub output_agent_bytes: usize,
    pub shutdown_grace_seconds: u64,
    pub refused_calls_per_second: u32,
    pub ssh_idle_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approvals {
    pub expiry_seconds: u64,
    pub wait_seconds: u64,
    pub session_grant_seconds: u64,
    pub approver_idle_seconds: u64,
    pub replay_window_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    pub idle_seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub limits: Limits,
    pub approvals: Approvals,
    pub agent: Agent,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Partial {
    #[serde(default)]
    limits: toml::Table,
    #[serde(default)]
    approvals: toml::Table,
    #[serde(default)]
    agent: toml::Table,
}

impl Default for Config {
    fn default() -> Self {
        toml::from_str(DEFAULTS).expect("assets/config.default.toml is valid")
    }
}

impl Config {
    /// The vault's configuration: the defaults, overridden key by key by `config.toml`.
    pub fn load(paths: &VaultPaths) -> Result<Self, ConfigError> {
        let path = paths.config();
        let shown = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: shown,
                    source,
                })
            }
        };
        Self::parse(&text).map_err(|message| ConfigError::Invalid {
            path: shown,
            message,
        })
    }

    /// Parses a config file's text over the defaults.
    pub fn parse(text: &str) -> Result<Self, String> {
        let user: Partial = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut merged: toml::Table = toml::from_str(DEFAULTS).expect("defaults parse");
        for (section, table) in [
            ("limits", user.limits),
            ("approvals", user.approvals),
            ("agent", user.agent),
        ] {
            let base = merged
                .get_mut(section)
                .and_then(toml::Value::as_table_mut)
                .expect("default section");
            for (k, v) in table {
                if !base.contains_key(&k) {
                    return Err(format!("unknown key [{section}] {k}"));
                }
                base.insert(k, v);
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
        let a = &self.approvals;
        let positive = [
            (
                "limits.output_retained_per_call_bytes",
                l.output_retained_per_call_bytes as u64,
            ),
            ("limits.output_agent_bytes", l.output_agent_bytes as u64),
            (
                "limits.stderr_retained_per_call_bytes",
                l.stderr_retained_per_call_bytes as u64,
            ),
            (
                "limits.refused_calls_per_second",
                u64::from(l.refused_calls_per_second),
            ),
            ("limits.ssh_idle_seconds", l.ssh_idle_seconds),
            ("approvals.expiry_seconds", a.expiry_seconds),
            ("approvals.session_grant_seconds", a.session_grant_seconds),
            ("approvals.approver_idle_seconds", a.approver_idle_seconds),
        ];
        if let Some((k, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{k} must be above 0"));
        }
        if l.output_agent_bytes > l.output_retained_per_call_bytes
            || l.output_retained_per_call_bytes > l.output_retained_process_bytes
        {
            return Err("limits must satisfy output_agent_bytes <= output_retained_per_call_bytes <= output_retained_process_bytes".into());
        }
        if l.stderr_agent_excerpt_bytes > l.stderr_retained_per_call_bytes
            || l.stderr_retained_per_call_bytes > l.stderr_retained_process_bytes
        {
            return Err("limits must satisfy stderr_agent_excerpt_bytes <= stderr_retained_per_call_bytes <= stderr_retained_process_bytes".into());
        }
        if a.wait_seconds > 120 {
            return Err(
                "approvals.wait_seconds must be at most 120 (clients time out near 60)".into(),
            );
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_design_and_overrides_apply_key_by_key() {
        let d = Config::default();
        assert_eq!(d.limits.output_agent_bytes, 65536);
        assert_eq!(d.limits.output_retained_per_call_bytes, 1 << 20);
        assert_eq!(d.approvals.expiry_seconds, 600);
        assert_eq!(d.approvals.wait_seconds, 50);
        let c = Config::parse("[approvals]\nexpiry_seconds = 60\n").unwrap();
        assert_eq!(c.approvals.expiry_seconds, 60);
        assert_eq!(c.approvals.wait_seconds, 50);
        assert_eq!(c.limits, d.limits);
        assert!(Config::parse("").is_ok());
    }

    #[test]
    fn unknown_keys_and_unusable_values_are_named() {
        assert!(Config::parse("[limits]\noutput_agnet_bytes = 5\n")
            .unwrap_err()
            .contains("output_agnet_bytes"));
        assert!(Config::parse("[extra]\nx = 1\n").is_err());
        assert!(Config::parse("[approvals]\nexpiry_seconds = 0\n")
            .unwrap_err()
            .contains("expiry_seconds"));
        assert!(Config::parse("[limits]\noutput_agent_bytes = 99999999\n").is_err());
        assert!(Config::parse("[approvals]\nwait_seconds = \"soon\"\n").is_err());
    }
}
