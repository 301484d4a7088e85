//! Enforcement as the formats written before its facts were the Executor's own words carried
//! it, in fixed fields: the `run` and `run_v2` answers of the plugin wire and the observations
//! of formats 1 and 2 hold `landlockAbi` and `landlock` (and, in `run_v2` answers and format 2,
//! optional `hostIdentity` and `memory`). Those fields map to facts of four mechanisms, so
//! that old records and old plugins read as facts, and an answer to an old host can still be
//! given in its shape.

use crate::executor::Enforcement;

/// The mechanism of the `landlock` field.
pub const LANDLOCK: &str = "landlock";
/// The mechanism of the `landlockAbi` field (its status is the ABI number in decimal).
pub const LANDLOCK_ABI: &str = "landlock-abi";
/// The mechanism of the `hostIdentity` field.
pub const HOST_IDENTITY: &str = "host-identity";
/// The mechanism of the `memory` field.
pub const MEMORY: &str = "memory";

/// The values the `landlock` field may hold.
pub const LANDLOCK_STATUSES: &[&str] = &["fully-enforced", "partially-enforced", "not-enforced"];
/// The values a stated `hostIdentity` field may hold.
pub const HOST_IDENTITIES: &[&str] = &["reserved-id", "caller-id"];
/// The values a stated `memory` field may hold.
pub const MEMORY_BOUNDS: &[&str] = &["cgroup-v1", "cgroup-v2", "per-process"];
/// What the old formats wrote for a fact the Executor did not state.
pub const NOT_STATED: &str = "not-stated";

/// The fixed enforcement fields of the old formats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyEnforcement {
    /// The `landlockAbi` field: the Landlock ABI version in force; 0 when none (or not stated).
    pub landlock_abi: u32,
    /// The `landlock` field: one of [`LANDLOCK_STATUSES`].
    pub landlock: String,
    /// `None`: not stated.
    pub host_identity: Option<String>,
    /// `None`: not stated.
    pub memory: Option<String>,
}

impl LegacyEnforcement {
    /// The fields for `facts`, for an answer in an old shape: a Landlock status or ABI the
    /// facts do not state in these words reads as `not-enforced` and 0 (the old formats had
    /// no way to say "not stated" for them); host identity and memory are left out unless
    /// stated in these words.
    pub fn from_facts(facts: &Enforcement) -> Self {
        let known = |mechanism: &str, values: &[&str]| {
            facts
                .status(mechanism)
                .filter(|status| values.contains(status))
                .map(str::to_owned)
        };
        Self {
            landlock_abi: facts
                .status(LANDLOCK_ABI)
                .and_then(|abi| abi.parse().ok())
                .unwrap_or(0),
            landlock: known(LANDLOCK, LANDLOCK_STATUSES).unwrap_or_else(|| "not-enforced".into()),
            host_identity: known(HOST_IDENTITY, HOST_IDENTITIES),
            memory: known(MEMORY, MEMORY_BOUNDS),
        }
    }

    /// The facts these fields state. `not-stated` (or an absent field) states nothing; any
    /// other value outside the field's set is refused with the field's name and rule.
    pub fn to_facts(&self) -> Result<Enforcement, (&'static str, &'static str)> {
        if !LANDLOCK_STATUSES.contains(&self.landlock.as_str()) {
            return Err((
                "landlock",
                "must be fully-enforced, partially-enforced or not-enforced",
            ));
        }
        let mut facts = Enforcement::new();
        let mut insert = |mechanism: &str, status: &str| {
            facts
                .insert(mechanism, status)
                .expect("four distinct mechanisms with values from fixed sets");
        };
        insert(LANDLOCK_ABI, &self.landlock_abi.to_string());
        insert(LANDLOCK, &self.landlock);
        for (field, mechanism, value, values, rule) in [
            (
                "hostIdentity",
                HOST_IDENTITY,
                &self.host_identity,
                HOST_IDENTITIES,
                "must be reserved-id, caller-id or not-stated",
            ),
            (
                "memory",
                MEMORY,
                &self.memory,
                MEMORY_BOUNDS,
                "must be cgroup-v1, cgroup-v2, per-process or not-stated",
            ),
        ] {
            match value.as_deref() {
                None | Some(NOT_STATED) => {}
                Some(status) if values.contains(&status) => insert(mechanism, status),
                Some(_) => return Err((field, rule)),
            }
        }
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_fields_and_facts_map_both_ways() {
        let fields = LegacyEnforcement {
            landlock_abi: 6,
            landlock: "fully-enforced".into(),
            host_identity: Some("reserved-id".into()),
            memory: None,
        };
        let facts = fields.to_facts().unwrap();
        assert_eq!(facts.status(LANDLOCK), Some("fully-enforced"));
        assert_eq!(facts.status(LANDLOCK_ABI), Some("6"));
        assert_eq!(facts.status(HOST_IDENTITY), Some("reserved-id"));
        assert_eq!(facts.status(MEMORY), None);
        assert_eq!(LegacyEnforcement::from_facts(&facts), fields);

        let mut bad = fields.clone();
        bad.landlock = "maybe".into();
        assert_eq!(bad.to_facts().unwrap_err().0, "landlock");
        let mut bad = fields.clone();
        bad.memory = Some("lots".into());
        assert_eq!(bad.to_facts().unwrap_err().0, "memory");
        let mut unstated = fields;
        unstated.host_identity = Some(NOT_STATED.into());
        assert_eq!(unstated.to_facts().unwrap().status(HOST_IDENTITY), None);

        // Facts in other words read as nothing enforced in the old shape.
        let other = Enforcement::from_facts([("macos-sandbox", "enforced")]).unwrap();
        let old = LegacyEnforcement::from_facts(&other);
        assert_eq!(
            (old.landlock_abi, old.landlock.as_str()),
            (0, "not-enforced")
        );
        assert_eq!((old.host_identity, old.memory), (None, None));
    }
}
