//! The intent: one immutable record per action occurrence, written once under a create-only
//! ref, and every reading of it verified (canonical, rebuilt byte for byte, of this repository
//! and of the key it is found under).

use crate::canonical::{self, Digest};
use crate::contracts::RefUpdate;

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::manifest::SealedCandidate;
use super::messages::{PAYLOAD_NAME, intent_objects};
use super::payload::{Action, EffectPayload};
use super::prepared::Prepared;
use super::refs::IntentRefs;

impl Repository {
    /// The sealed Candidate `candidate` an intent is prepared for, which must be bound to a
    /// Slice digest, since no Verdict can be bound to one that is not. `field` names the
    /// input in errors; `never` says what is never done with an unbound Candidate.
    pub(in crate::repository) fn bound_candidate(
        &self,
        candidate: &Digest,
        field: &str,
        never: &str,
    ) -> Result<SealedCandidate, RepositoryError> {
        let sealed = self
            .read_by_reference(candidate)
            .map_err(|error| match error {
                RepositoryError::Missing { what } => {
                    RepositoryError::invalid(field, format!("no such Candidate: {what}"))
                }
                other => other,
            })?;
        if sealed.manifest.binding.is_none() {
            return Err(RepositoryError::invalid(
                field,
                format!(
                    "Candidate {candidate} is {}, sealed for no Slice digest: {never}",
                    sealed.manifest.protocol()
                ),
            ));
        }
        Ok(sealed)
    }

    /// Retains `payload` as the one immutable intent of its occurrence. An exact replay
    /// returns the retained intent; any other payload for the same occurrence is `conflict`.
    pub(in crate::repository) fn retain_intent<P: EffectPayload>(
        &self,
        payload: &P,
    ) -> Result<Prepared<P>, RepositoryError> {
        let bytes = payload.validate()?;
        let digest = Digest::of(&bytes);
        let refs = IntentRefs::of::<P>(&self.identity, payload.action());
        if let Some(existing) = self.read_intent::<P>(&refs)? {
            return replay(existing, &digest);
        }
        let objects = intent_objects::<P>(bytes, &digest);
        let intent = objects[2].id;
        self.store.write_objects(&objects, self.deadline())?;
        match self
            .store
            .create_ref(&refs.intent, &intent, self.deadline())?
        {
            RefUpdate::Applied => {}
            RefUpdate::Refused { .. } | RefUpdate::Unknown { .. } => {
                // A concurrent preparation may have won; what is retained decides.
                let existing =
                    self.read_intent::<P>(&refs)?
                        .ok_or_else(|| RepositoryError::GitFailed {
                            detail: format!(
                                "creating {} was not acknowledged and it is absent",
                                refs.intent
                            ),
                        })?;
                return replay(existing, &digest);
            }
        }
        // Read back what was written, independently.
        let retained = self
            .read_intent::<P>(&refs)?
            .ok_or_else(|| RepositoryError::corrupt(format!("{} vanished", refs.intent)))?;
        replay(retained, &digest)
    }

    /// The intent retained for `action`, verified, if there is one.
    pub(in crate::repository) fn retained<P: EffectPayload>(
        &self,
        action: &Action,
    ) -> Result<Option<Prepared<P>>, RepositoryError> {
        self.read_intent(&IntentRefs::of::<P>(&self.identity, action))
    }

    /// Every intent of `P` retained, verified, in ref order.
    pub(in crate::repository) fn listed<P: EffectPayload>(
        &self,
    ) -> Result<Vec<Prepared<P>>, RepositoryError> {
        let mut found = Vec::new();
        for (name, _) in self.store.list_refs(P::REF_PREFIX, self.deadline())? {
            if name.as_str().ends_with("/intent")
                && let Some(record) = self.read_intent(&IntentRefs::beside(&name)?)?
            {
                found.push(record);
            }
        }
        Ok(found)
    }

    /// Checks that `prepared` is retained here exactly (`missing` when no intent is, `conflict`
    /// when another is), and gives its refs.
    pub(in crate::repository) fn check_retained<P: EffectPayload>(
        &self,
        prepared: &Prepared<P>,
    ) -> Result<IntentRefs, RepositoryError> {
        prepared.validate()?;
        if prepared.payload.repository() != &self.identity {
            return Err(RepositoryError::invalid(
                "prepared.payload.repository",
                "must be this repository",
            ));
        }
        let refs = IntentRefs::of::<P>(&self.identity, prepared.payload.action());
        let what = P::WORDING.intent;
        match self.read_intent::<P>(&refs)? {
            None => Err(RepositoryError::Missing {
                what: format!("{what} {} ({})", prepared.digest, refs.intent),
            }),
            Some(retained) if retained == *prepared => Ok(refs),
            Some(retained) => Err(RepositoryError::Conflict {
                what: format!(
                    "the retained {what} is {} at {}, not this one",
                    retained.digest, retained.intent
                ),
            }),
        }
    }

    /// Reads and verifies the retained intent under `refs.intent`, if any.
    fn read_intent<P: EffectPayload>(
        &self,
        refs: &IntentRefs,
    ) -> Result<Option<Prepared<P>>, RepositoryError> {
        let Some(intent) = self.read_direct(&refs.intent)? else {
            return Ok(None);
        };
        let what = format!("{} {intent} under {}", P::WORDING.intent, refs.intent);
        let corrupt = |why: &str| RepositoryError::corrupt(format!("{what}: {why}"));
        let parts = P::WORDING.intent_parts.unwrap_or([what.as_str(); 3]);
        let bytes =
            self.read_record_file(intent, PAYLOAD_NAME, P::MAX_BYTES as u64, &what, parts)?;
        let payload: P = canonical::from_canonical_slice(&bytes, "payload")
            .map_err(|error| corrupt(&error.to_string()))?;
        let digest = Digest::of(&bytes);
        if payload
            .validate()
            .map_err(|error| corrupt(&error.to_string()))?
            != bytes
        {
            return Err(corrupt("the payload is not canonical"));
        }
        // The rebuilt commit has no parent: the same id proves the retained one has none.
        if intent_objects::<P>(bytes, &digest)[2].id != intent {
            return Err(corrupt(
                "the intent commit is not the one its payload gives",
            ));
        }
        if IntentRefs::of::<P>(&self.identity, payload.action()).intent != refs.intent
            || payload.repository() != &self.identity
        {
            return Err(corrupt(
                "the payload belongs to another action or repository",
            ));
        }
        Ok(Some(Prepared {
            digest,
            intent,
            payload,
        }))
    }
}

/// `existing`, the intent retained for an occurrence, when it is the one with `digest`.
fn replay<P: EffectPayload>(
    existing: Prepared<P>,
    digest: &Digest,
) -> Result<Prepared<P>, RepositoryError> {
    if existing.digest != *digest {
        return Err(RepositoryError::Conflict {
            what: format!(
                "action {} occurrence {} already has another {} ({})",
                existing.payload.action().id,
                existing.payload.action().occurrence,
                P::WORDING.intent,
                existing.digest
            ),
        });
    }
    Ok(existing)
}
