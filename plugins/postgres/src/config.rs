//! The connection sf makes (`[evidence_store] type = "postgres"`): sf-postgres-config,
//! a crate of its own so that sf serve's queue connects the same way without linking this
//! plugin; see that crate for the settings, the password and TLS.

pub use sf_postgres_config::*;
