//! The connection sf makes: `[evidence_store] type = "postgres"` with `host`, `port`,
//! `database`, `user`, and the password from `password_file` (a file only its owner can read)
//! or `password_env` (a variable's name). The password is read when connecting and kept only
//! by the client; no error names it.

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest password file read.
const MAX_PASSWORD_BYTES: u64 = 4096;

/// The `[evidence_store]` section of type `postgres`.
///
/// ```toml
/// [evidence_store]
/// type = "postgres"
/// host = "db.example.org"
/// port = 5432
/// database = "sf"
/// user = "sf_writer"
/// password_file = "/etc/sf/pg-password"   # or password_env = "SF_PG_PASSWORD"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostgresConfig {
    /// The server's host name or address.
    pub host: String,
    /// Its port.
    #[serde(default = "default_port")]
    pub port: u16,
    /// The database holding sf's schema.
    pub database: String,
    /// The role sf connects as: INSERT and SELECT on the table, nothing more.
    pub user: String,
    /// A file holding the password (only its first line is used); owned by the user sf runs
    /// as and readable by no one else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// The name of an environment variable holding the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
    /// How long connecting may take, in seconds (default 10).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_seconds: u64,
}

fn default_port() -> u16 {
    5432
}

fn default_connect_timeout() -> u64 {
    10
}

/// Why a configuration cannot be used; never holds the password.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("[evidence_store] type = \"postgres\": {0}")]
pub struct ConfigError(pub String);

impl PostgresConfig {
    /// The client configuration, with the password read now.
    pub fn client_config(&self) -> Result<postgres::Config, ConfigError> {
        if self.host.is_empty() || self.database.is_empty() || self.user.is_empty() {
            return Err(ConfigError(
                "host, database and user must be non-empty".into(),
            ));
        }
        if !(1..=300).contains(&self.connect_timeout_seconds) {
            return Err(ConfigError(
                "connect_timeout_seconds must be 1 to 300".into(),
            ));
        }
        let mut config = postgres::Config::new();
        config
            .host(&self.host)
            .port(self.port)
            .dbname(&self.database)
            .user(&self.user)
            .application_name("sf")
            .connect_timeout(Duration::from_secs(self.connect_timeout_seconds))
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        if let Some(password) = self.password()? {
            config.password(password);
        }
        Ok(config)
    }

    /// The password, from the file or the variable; `None` when neither is named (a server
    /// that trusts the connection).
    fn password(&self) -> Result<Option<String>, ConfigError> {
        match (&self.password_file, &self.password_env) {
            (Some(_), Some(_)) => Err(ConfigError(
                "name password_file or password_env, not both".into(),
            )),
            (Some(file), None) => {
                let meta = std::fs::symlink_metadata(file).map_err(|error| {
                    ConfigError(format!("password_file {}: {error}", file.display()))
                })?;
                if !meta.is_file() {
                    return Err(ConfigError(format!(
                        "password_file {} is not a regular file",
                        file.display()
                    )));
                }
                if meta.mode() & 0o077 != 0 || meta.uid() != nix::unistd::geteuid().as_raw() {
                    return Err(ConfigError(format!(
                        "password_file {} must be yours and readable by no one else (mode \
                         0600 or 0400)",
                        file.display()
                    )));
                }
                if meta.len() > MAX_PASSWORD_BYTES {
                    return Err(ConfigError(format!(
                        "password_file {} is larger than {MAX_PASSWORD_BYTES} bytes",
                        file.display()
                    )));
                }
                let text = std::fs::read_to_string(file).map_err(|error| {
                    ConfigError(format!("password_file {}: {error}", file.display()))
                })?;
                Ok(Some(text.lines().next().unwrap_or_default().to_owned()))
            }
            (None, Some(name)) => std::env::var(name)
                .map(Some)
                .map_err(|_| ConfigError(format!("password_env {name}: the variable is not set"))),
            (None, None) => Ok(None),
        }
    }
}
