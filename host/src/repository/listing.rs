//! Reading what a repository holds, without writing: every Candidate its refs publish, and
//! every integration and delivery intent retained, each verified as the commands that use
//! one verify it. What `sf list` and `sf show` are made of.

use crate::canonical::Digest;
use crate::contracts::RefValue;
use crate::git_object::ObjectId;

use super::delivery::PreparedDelivery;
use super::error::RepositoryError;
use super::integration::PreparedIntegration;
use super::{CANDIDATE_REF_PREFIX, Repository};

impl Repository {
    /// Every Candidate a ref publishes, by digest, with the seal commit its ref names, sorted
    /// by digest. A ref under the Candidate prefix that is not one of sf's (a name that is no
    /// digest, a symbolic ref) is corruption, reported.
    pub fn candidates(&self) -> Result<Vec<(Digest, ObjectId)>, RepositoryError> {
        self.store
            .list_refs(CANDIDATE_REF_PREFIX, self.deadline())?
            .into_iter()
            .map(|(name, value)| {
                let hex = &name.as_str()[CANDIDATE_REF_PREFIX.len()..];
                let digest = Digest::parse(&format!("sha256:{hex}")).ok_or_else(|| {
                    RepositoryError::corrupt(format!("{name} does not name a Candidate digest"))
                })?;
                match value {
                    RefValue::Direct(id) => Ok((digest, id)),
                    RefValue::Symbolic(to) => Err(RepositoryError::corrupt(format!(
                        "{name} is a symbolic ref to {to}"
                    ))),
                }
            })
            .collect()
    }

    /// Every integration intent retained, verified, in ref order.
    pub fn retained_intents(&self) -> Result<Vec<PreparedIntegration>, RepositoryError> {
        self.listed()
    }

    /// Every delivery intent retained, verified, in ref order.
    pub fn retained_deliveries(&self) -> Result<Vec<PreparedDelivery>, RepositoryError> {
        self.listed()
    }
}
