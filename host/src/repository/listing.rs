//! Reading what a repository holds, without writing: every Candidate its refs publish, and
//! every integration and delivery intent retained, each verified as the commands that use
//! one verify it. What `sf list` and `sf show` are made of.

use crate::canonical::Digest;
use crate::contracts::{ObjectStore as _, RefName, RefValue};
use crate::git_object::ObjectId;

use super::delivery::{DELIVERY_REF_PREFIX, PreparedDelivery};
use super::error::RepositoryError;
use super::integration::{INTEGRATION_REF_PREFIX, PreparedIntegration};
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
        let mut intents = Vec::new();
        for name in self.intent_refs(INTEGRATION_REF_PREFIX)? {
            if let Some(intent) = self.intent_at(&name)? {
                intents.push(intent);
            }
        }
        Ok(intents)
    }

    /// Every delivery intent retained, verified, in ref order.
    pub fn retained_deliveries(&self) -> Result<Vec<PreparedDelivery>, RepositoryError> {
        let mut deliveries = Vec::new();
        for name in self.intent_refs(DELIVERY_REF_PREFIX)? {
            if let Some(delivery) = self.delivery_at(&name)? {
                deliveries.push(delivery);
            }
        }
        Ok(deliveries)
    }

    /// The `…/intent` refs under `prefix`.
    fn intent_refs(&self, prefix: &str) -> Result<Vec<RefName>, RepositoryError> {
        Ok(self
            .store
            .list_refs(prefix, self.deadline())?
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| name.as_str().ends_with("/intent"))
            .collect())
    }
}
