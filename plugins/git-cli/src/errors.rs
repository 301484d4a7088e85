//! Builders for the contract's errors, so that every refusal names the path or input at fault
//! and the rule it broke in one consistent shape.

use std::fmt::Display;
use std::path::Path;
use std::time::Instant;

use sf_contracts::ObjectStoreError;

/// The root (or something in it) is not this store's to use. Never carries a raw io error
/// code: the rule is what the caller can act on.
pub(crate) fn unavailable(path: &Path, rule: impl Display) -> ObjectStoreError {
    ObjectStoreError::Unavailable {
        reason: format!("{}: {rule}", path.display()),
    }
}

/// Stored data or Git's answer failed verification.
pub(crate) fn corrupt(what: impl Display) -> ObjectStoreError {
    ObjectStoreError::Corrupt {
        what: what.to_string(),
    }
}

/// A read would exceed its byte budget.
pub(crate) fn limit(what: impl Display) -> ObjectStoreError {
    ObjectStoreError::Limit {
        what: what.to_string(),
    }
}

/// The deadline passed.
pub(crate) fn timeout(what: impl Display) -> ObjectStoreError {
    ObjectStoreError::Timeout {
        what: what.to_string(),
    }
}

/// Refuses with `timeout` when `deadline` has already passed, so that nothing starts late.
pub(crate) fn before(deadline: Instant, what: &str) -> Result<(), ObjectStoreError> {
    if Instant::now() >= deadline {
        return Err(timeout(format!(
            "{what}: the deadline passed before it started"
        )));
    }
    Ok(())
}
