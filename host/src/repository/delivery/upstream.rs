//! A base's upstream: where the team's repository lives and which branch follows the base,
//! recorded once per base (`refs/sf/upstreams/<base>`, tree `{upstream.json}`, parent the
//! base) and read back whole. Delivery pushes to the upstream of a Candidate's base.

use crate::canonical;
use crate::contracts::{EncodedObject, RefUpdate};
use crate::git_object::{ObjectId, ObjectKind};

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::super::record_commit::record_objects;
use super::records::{
    UPSTREAM_PROTOCOL, UPSTREAM_RECORD_NAME, Upstream, UpstreamRecord, upstream_ref,
};

/// The largest upstream record read back.
const MAX_UPSTREAM_RECORD_BYTES: u64 = 8 * 1024;

impl Repository {
    /// Records where `base` came from: the team's repository and the branch that follows it.
    /// `base` must be the initial commit or an imported one. Written once per base: the same
    /// upstream again is a replay, another one is `conflict`.
    pub fn record_upstream(
        &self,
        base: &ObjectId,
        upstream: &Upstream,
    ) -> Result<UpstreamRecord, RepositoryError> {
        upstream.validate()?;
        if *base != self.identity.initial && self.recorded_import(base)?.is_none() {
            return Err(RepositoryError::invalid(
                format!("base {base}"),
                "an upstream is recorded for the initial commit or an imported one",
            ));
        }
        let record = UpstreamRecord {
            product: self.identity.product_id.clone(),
            base: *base,
            upstream: upstream.clone(),
        };
        let name = upstream_ref(base);
        let objects = upstream_objects(&record);
        let commit = objects[2].id;
        if let Some(stored) = self.upstream_of(base)? {
            return self.same_upstream(stored, &record);
        }
        self.store.write_objects(&objects, self.deadline())?;
        match self.store.create_ref(&name, &commit, self.deadline())? {
            RefUpdate::Applied => {}
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                let stored = self
                    .upstream_of(base)?
                    .ok_or_else(|| RepositoryError::GitFailed {
                        detail: format!("creating {name} was not acknowledged and it is absent"),
                    })?;
                return self.same_upstream(stored, &record);
            }
        }
        self.upstream_of(base)?
            .ok_or_else(|| RepositoryError::corrupt(format!("{name} vanished")))
    }

    /// `stored`, the upstream recorded for a base, when it is the one `asked` for.
    fn same_upstream(
        &self,
        stored: UpstreamRecord,
        asked: &UpstreamRecord,
    ) -> Result<UpstreamRecord, RepositoryError> {
        if stored == *asked {
            Ok(stored)
        } else {
            Err(RepositoryError::Conflict {
                what: format!(
                    "base {} already records upstream {} branch {}: an upstream is recorded \
                     once per base (nothing was written)",
                    stored.base, stored.upstream.url, stored.upstream.branch
                ),
            })
        }
    }

    /// The upstream recorded for `base`, verified whole, if any.
    pub fn upstream_of(&self, base: &ObjectId) -> Result<Option<UpstreamRecord>, RepositoryError> {
        let name = upstream_ref(base);
        let Some(commit) = self.read_direct(&name)? else {
            return Ok(None);
        };
        let what = format!("upstream record {name}");
        let bytes = self.read_record_file(
            commit,
            UPSTREAM_RECORD_NAME,
            MAX_UPSTREAM_RECORD_BYTES,
            &what,
            [what.as_str(); 3],
        )?;
        let record: UpstreamRecord = canonical::from_canonical_slice(&bytes, UPSTREAM_RECORD_NAME)
            .map_err(|error| RepositoryError::corrupt(format!("{what}: {error}")))?;
        if record.product != self.identity.product_id
            || record.base != *base
            || upstream_objects(&record)[2].id != commit
        {
            return Err(RepositoryError::corrupt(format!(
                "{what}: {commit} is not the record sf writes for base {base} of this repository"
            )));
        }
        Ok(Some(record))
    }

    /// The upstream that follows `commit`: its own record when it is a base, or, for a
    /// Candidate's commit M (what the target names after an integration), its base's.
    pub fn upstream_at(
        &self,
        commit: &ObjectId,
    ) -> Result<Option<UpstreamRecord>, RepositoryError> {
        if let Some(record) = self.upstream_of(commit)? {
            return Ok(Some(record));
        }
        let what = format!("commit {commit}");
        let body = self.read_one(
            *commit,
            ObjectKind::Commit,
            MAX_IMPORTED_COMMIT_BYTES,
            &what,
        )?;
        let heads = commit_heads(&body)
            .map_err(|rule| RepositoryError::corrupt(format!("{what}: {rule}")))?;
        match heads.parents.as_slice() {
            [parent] => self.upstream_of(parent),
            _ => Ok(None),
        }
    }
}

/// The objects of `record`'s commit: blob, tree and commit (last), the commit's parent the
/// base.
fn upstream_objects(record: &UpstreamRecord) -> Vec<EncodedObject> {
    // Bounded strings (a 2 KiB URL, a 117-byte branch): encoding cannot fail.
    let bytes = canonical::to_canonical_bytes(record).unwrap_or_default();
    record_objects(
        UPSTREAM_RECORD_NAME,
        bytes,
        vec![record.base],
        format!("{UPSTREAM_PROTOCOL}\n"),
    )
}
