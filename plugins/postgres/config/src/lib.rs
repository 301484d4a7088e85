//! The connection sf makes: `[evidence_store] type = "postgres"` with `host`, `port`,
//! `database`, `user`, and the password from `password_file` (a file only its owner can read)
//! or `password_env` (a variable's name). The password is read when connecting and kept only
//! by the client; no error names it. With `sslmode = "verify-full"` the connection is TLS
//! (OpenSSL), the server's chain verified against `sslrootcert` (or the system's roots) and
//! its name against `host`; the client refuses a server that does not speak TLS.
//!
//! A crate of its own so that sf serve's queue connects as the plugin does without linking
//! the plugin (see Cargo.toml); sf-postgres re-exports it as `sf_postgres::config`.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

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
/// sslmode = "verify-full"                  # default "disable"
/// sslrootcert = "/etc/sf/pg-root.pem"      # default: the system's root certificates
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
    /// Whether the connection is TLS: `disable` (the default) or `verify-full`.
    #[serde(default, skip_serializing_if = "SslMode::is_disable")]
    pub sslmode: SslMode,
    /// The root certificates (PEM) a `verify-full` server's chain must lead to; the system's
    /// when absent. Refused with `disable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslrootcert: Option<PathBuf>,
}

/// `sslmode`: libpq's names, of the two modes sf offers. Nothing in between: a TLS connection
/// whose server is not verified protects against no one who can intercept it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// Plain TCP (a trusted network, a local tunnel).
    #[default]
    Disable,
    /// TLS, the server's certificate chain and host name verified.
    VerifyFull,
}

impl SslMode {
    fn is_disable(&self) -> bool {
        *self == Self::Disable
    }
}

/// What every session is opened with: the client configuration (the password read) and the
/// transport. Never printed: it holds the password.
#[derive(Clone)]
pub struct Connector {
    client: postgres::Config,
    transport: Transport,
}

impl Connector {
    /// Opens a session.
    pub fn connect(&self) -> Result<postgres::Client, postgres::Error> {
        self.transport.connect(&self.client)
    }
}

/// How a connection is made: plain, or TLS with a verifying connector.
#[derive(Clone)]
pub enum Transport {
    /// Plain TCP.
    Plain,
    /// TLS.
    Tls(postgres_openssl::MakeTlsConnector),
}

impl Transport {
    /// Connects as `config` says over this transport.
    pub fn connect(&self, config: &postgres::Config) -> Result<postgres::Client, postgres::Error> {
        match self {
            Self::Plain => config.connect(postgres::NoTls),
            Self::Tls(connector) => config.connect(connector.clone()),
        }
    }
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
        if self.sslmode == SslMode::VerifyFull {
            // The client refuses a server that answers the TLS request with "no".
            config.ssl_mode(postgres::config::SslMode::Require);
        }
        Ok(config)
    }

    /// The connector: the client configuration and the transport, the password and the root
    /// certificates read now.
    pub fn connector(&self) -> Result<Connector, ConfigError> {
        Ok(Connector {
            client: self.client_config()?,
            transport: self.transport()?,
        })
    }

    /// The transport `sslmode` and `sslrootcert` name, its root certificates read now.
    pub fn transport(&self) -> Result<Transport, ConfigError> {
        match (self.sslmode, &self.sslrootcert) {
            (SslMode::Disable, Some(_)) => Err(ConfigError(
                "sslrootcert is set, and sslmode is \"disable\": set sslmode = \"verify-full\""
                    .into(),
            )),
            (SslMode::Disable, None) => Ok(Transport::Plain),
            (SslMode::VerifyFull, roots) => {
                let failed = |what: String| ConfigError(format!("sslmode verify-full: {what}"));
                let mut builder =
                    openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls())
                        .map_err(|error| failed(error.to_string()))?;
                if let Some(roots) = roots {
                    builder.set_ca_file(roots).map_err(|error| {
                        failed(format!(
                            "sslrootcert {} is not a readable PEM file of certificates: {error}",
                            roots.display()
                        ))
                    })?;
                }
                // SslConnector verifies the chain and (through postgres-openssl, with the
                // configured host) the server's name by default.
                Ok(Transport::Tls(postgres_openssl::MakeTlsConnector::new(
                    builder.build(),
                )))
            }
        }
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

/// A PostgreSQL error as a message: the server's code and message, or the client's error
/// with its causes (a TLS handshake's is the certificate that failed: said too, as the fix
/// depends on it).
pub fn describe(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            let mut text = error.to_string();
            let mut cause = std::error::Error::source(error);
            while let Some(inner) = cause {
                text.push_str(&format!(": {inner}"));
                cause = inner.source();
            }
            text
        }
    }
}
