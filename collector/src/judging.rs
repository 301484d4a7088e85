//! Judging a Candidate from stored evidence, and the proof only the judge makes: a
//! [`Verified`] value exists only for an attempt whose stored records the judge finds
//! Verified, and the effects that move a target or push take nothing else. Immediately before
//! its effect, the proof's [guard](Verified::guard) judges the stored evidence again (the
//! judge is deterministic over the records) and requires the same Verified Verdict.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::assurance::judge::attempts;
use crate::assurance::{
    AssuranceError, FrozenSlice, JudgeRequest, Outcome, RepositoryPins, Verdict, judge,
};
use crate::canonical::Digest;
use crate::contracts::{AttemptId, EvidenceStore, Gate, GateAnswer, GateError};
use crate::git_object::ObjectId;
use crate::repository::Slice;

/// How long one judging of the stored evidence may take.
pub const JUDGE_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a judgment gave no proof.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// An input breaks a rule (an attempt that stored nothing, a record that cannot be
    /// read); nothing was judged.
    #[error("invalid input: {input}: {rule}")]
    InvalidInput {
        /// The input at fault (`--attempt 3`, `Candidate sha256:…`).
        input: String,
        /// The rule it breaks, as a sentence.
        rule: String,
    },
    /// The evidence does not hold a Verified Verdict for this Candidate under this Slice.
    #[error("not verified: {reason}")]
    NotVerified {
        /// What the evidence judges instead, or why a proof matches no Verified attempt.
        reason: String,
    },
    /// The evidence store failed; nothing was judged. Its class is kept (`unavailable`:
    /// retry later).
    #[error("{what}: {error}")]
    Store {
        /// What was being done.
        what: String,
        /// The store's error.
        error: crate::contracts::EvidenceStoreError,
    },
}

impl JudgeError {
    /// The stable kebab-case code of the error: a store's error keeps its own.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidInput { .. } => "invalid-input",
            Self::NotVerified { .. } => "not-verified",
            Self::Store { error, .. } => error.code(),
        }
    }

    fn invalid(input: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::InvalidInput {
            input: input.into(),
            rule: rule.into(),
        }
    }
}

impl From<AssuranceError> for JudgeError {
    fn from(error: AssuranceError) -> Self {
        match error {
            AssuranceError::InvalidInput { input, rule } => Self::InvalidInput { input, rule },
            AssuranceError::Store { what, error } => Self::Store { what, error },
        }
    }
}

/// What the judge needs for one Candidate under one Slice, and the store it reads.
#[derive(Clone)]
pub struct Judging {
    /// The frozen Slice whose acceptance, recipe and environment the judge applies.
    pub slice: FrozenSlice,
    /// The pins of the Candidate under the Slice ([`crate::collector::derive`]); records are
    /// looked up by their digest.
    pub pins: RepositoryPins,
    /// The Evidence store the records are read from.
    pub store: Arc<dyn EvidenceStore>,
}

impl std::fmt::Debug for Judging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judging")
            .field("pins", &self.pins)
            .finish_non_exhaustive()
    }
}

impl Judging {
    /// The Verdict of `attempt`.
    pub fn judge(&self, attempt: &AttemptId) -> Result<Verdict, AssuranceError> {
        judge(
            &JudgeRequest {
                pins: &self.pins,
                acceptance: &self.slice.acceptance,
                recipe: &self.slice.recipe,
                environment: &self.slice.environment,
                attempt,
            },
            self.store.as_ref(),
            Instant::now() + JUDGE_TIMEOUT,
        )
    }

    /// The attempts that stored records under these pins, oldest first.
    pub fn attempts(&self) -> Result<Vec<AttemptId>, AssuranceError> {
        attempts(
            &self.pins.digest()?,
            self.store.as_ref(),
            Instant::now() + JUDGE_TIMEOUT,
        )
    }

    /// The records filed under these pins that cannot be read, with why: never evidence,
    /// never repaired, reported beside each Verdict.
    pub fn unreadable(&self) -> Result<Vec<(Digest, String)>, AssuranceError> {
        Ok(crate::assurance::judge::unreadable_records(
            &self.pins.digest()?,
            self.store.as_ref(),
            Instant::now() + JUDGE_TIMEOUT,
        ))
    }

    /// The Verdict of the attempt with epoch `epoch`, or of the newest attempt when `None`.
    /// An attempt that stored nothing under these pins is an error, never a Verdict.
    pub fn verdict(&self, epoch: Option<u64>) -> Result<Verdict, JudgeError> {
        let attempt = self.attempt(epoch)?;
        Ok(self.judge(&attempt)?)
    }

    /// The attempt with epoch `epoch`, or the newest when `None`, that stored records under
    /// these pins.
    pub fn attempt(&self, epoch: Option<u64>) -> Result<AttemptId, JudgeError> {
        let attempts = self.attempts()?;
        match epoch {
            Some(epoch) => attempts
                .into_iter()
                .find(|attempt| attempt.epoch == epoch)
                .ok_or_else(|| {
                    JudgeError::invalid(
                        format!("--attempt {epoch}"),
                        "stored no record of this Candidate under this Slice; leave --attempt \
                         out to judge the newest attempt",
                    )
                }),
            None => attempts.into_iter().last().ok_or_else(|| {
                JudgeError::invalid(
                    format!("Candidate {}", self.pins.candidate.digest),
                    format!(
                        "has no evidence under Slice {} revision {}; run `sf collect` (or \
                         `sf land`) first",
                        self.pins.slice.id, self.pins.slice.revision
                    ),
                )
            }),
        }
    }

    /// For a Slice with counted review checks, the Verdict of the newest attempt when its
    /// process checks are Verified (the attempt its reviewers read); `None` otherwise, and for
    /// a Slice without review checks.
    pub fn reviewed_verdict(&self) -> Result<Option<Verdict>, AssuranceError> {
        if self.slice.acceptance.counted_reviews().next().is_none() {
            return Ok(None);
        }
        let Some(newest) = self.attempts()?.pop() else {
            return Ok(None);
        };
        let verdict = self.judge(&newest)?;
        Ok(verdict
            .reviews
            .as_ref()
            .is_some_and(|reviews| reviews.process == Outcome::Verified)
            .then_some(verdict))
    }

    /// The attempt whose Verdict has digest `proof` and is Verified, if there is one.
    pub fn verified_attempt(&self, proof: &Digest) -> Result<Option<AttemptId>, AssuranceError> {
        for attempt in self.attempts()?.into_iter().rev() {
            let verdict = self.judge(&attempt)?;
            if verdict.outcome == Outcome::Verified && verdict.digest()? == *proof {
                return Ok(Some(attempt));
            }
        }
        Ok(None)
    }

    /// The proof that `attempt` is Verified: its Verdict judged from the stored evidence.
    /// Anything but a Verified Verdict is [`JudgeError::NotVerified`].
    pub fn verified(&self, attempt: &AttemptId) -> Result<Verified, JudgeError> {
        let verdict = self.judge(attempt)?;
        if verdict.outcome != Outcome::Verified {
            return Err(JudgeError::NotVerified {
                reason: format!(
                    "attempt {attempt} is judged {}, not verified",
                    verdict.outcome.as_str()
                ),
            });
        }
        let digest = verdict.digest()?;
        Ok(Verified {
            admits: Admits::of(&self.pins, &digest),
            backing: Backing::Judged {
                judging: Box::new(self.clone()),
                attempt: attempt.clone(),
            },
            verdict: Some(verdict),
        })
    }

    /// The proof for an effect on Candidate `candidate` admitted by `proof`: the Verified
    /// attempt of that Candidate under this Slice whose Verdict has that digest (an
    /// integration's proof, a delivery's Verdict).
    pub fn verified_by(&self, candidate: &Digest, proof: &Digest) -> Result<Verified, JudgeError> {
        if *candidate != self.pins.candidate.digest {
            return Err(JudgeError::invalid(
                "the intent",
                format!(
                    "names Candidate {candidate}, not {}",
                    self.pins.candidate.digest
                ),
            ));
        }
        let attempt = self
            .verified_attempt(proof)?
            .ok_or_else(|| JudgeError::NotVerified {
                reason: format!(
                    "the intent's proof {proof} is not the Verdict digest of a Verified attempt \
                     of Candidate {candidate} under Slice {} revision {}; only a Verified \
                     Candidate is integrated or delivered",
                    self.pins.slice.id, self.pins.slice.revision
                ),
            })?;
        self.verified(&attempt)
    }
}

/// What a proof admits: the one Candidate (its digest, base B and commit M) under the one
/// Slice, by the one Verdict digest. An effect whose intent names anything else is refused
/// before it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admits {
    /// The Candidate's digest.
    pub candidate: Digest,
    /// The base B the target moves from.
    pub base: ObjectId,
    /// The Candidate's commit M.
    pub commit: ObjectId,
    /// The Slice the Candidate was judged under.
    pub slice: Slice,
    /// The Verified Verdict's digest: the intent's proof.
    pub proof: Digest,
}

impl Admits {
    /// What an intent names: its Candidate `candidate` moved from `base` to `commit` under
    /// `slice`, admitted by the Verdict digest `proof`.
    pub fn new(
        candidate: &Digest,
        base: ObjectId,
        commit: ObjectId,
        slice: &Slice,
        proof: &Digest,
    ) -> Self {
        Self {
            candidate: candidate.clone(),
            base,
            commit,
            slice: slice.clone(),
            proof: proof.clone(),
        }
    }

    fn of(pins: &RepositoryPins, proof: &Digest) -> Self {
        Self {
            candidate: pins.candidate.digest.clone(),
            base: pins.base.commit,
            commit: pins.candidate.commit,
            slice: Slice {
                id: pins.slice.id.clone(),
                revision: pins.slice.revision,
            },
            proof: proof.clone(),
        }
    }

    /// Why an intent for `intent` is not one this proof admits, or `None`.
    pub fn refusal(&self, intent: &Admits) -> Option<String> {
        let differs = [
            ("Candidate", self.candidate != intent.candidate),
            ("base", self.base != intent.base),
            ("commit", self.commit != intent.commit),
            ("Slice", self.slice != intent.slice),
            ("proof", self.proof != intent.proof),
        ];
        differs
            .iter()
            .find(|(_, differs)| *differs)
            .map(|(what, _)| {
                format!(
                    "its {what} is not the one the proof admits (the Verified Verdict {} of \
                     Candidate {} under Slice {} revision {}); only the Verified Candidate a \
                     proof names moves or is pushed",
                    self.proof, self.candidate, self.slice.id, self.slice.revision
                )
            })
    }
}

/// Where a proof's Verdict comes from.
#[derive(Clone)]
enum Backing {
    /// Judged from stored evidence, and judged again before the effect.
    Judged {
        judging: Box<Judging>,
        attempt: AttemptId,
    },
    /// Assumed by a test of an effect's own failure semantics (feature `testing` only).
    #[cfg(feature = "testing")]
    Assumed,
}

/// A proof that a Candidate is Verified: made only by [`Judging::verified`] (and
/// [`Judging::verified_by`]) from stored evidence. Moving a target and pushing to a remote
/// take one, and refuse an intent it does not [admit](Admits).
#[derive(Clone)]
pub struct Verified {
    admits: Admits,
    backing: Backing,
    verdict: Option<Verdict>,
}

impl std::fmt::Debug for Verified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verified")
            .field("admits", &self.admits)
            .finish_non_exhaustive()
    }
}

impl Verified {
    /// What the proof admits.
    pub fn admits(&self) -> &Admits {
        &self.admits
    }

    /// The Verified Verdict's digest.
    pub fn digest(&self) -> &Digest {
        &self.admits.proof
    }

    /// The Verified Verdict (absent only for a proof a test assumed).
    pub fn verdict(&self) -> Option<&Verdict> {
        self.verdict.as_ref()
    }

    /// The attempt the Verdict is of (absent only for a proof a test assumed).
    pub fn attempt(&self) -> Option<&AttemptId> {
        match &self.backing {
            Backing::Judged { attempt, .. } => Some(attempt),
            #[cfg(feature = "testing")]
            Backing::Assumed => None,
        }
    }

    /// Why the stored evidence does not back the proof now, or `None`: the attempt judged
    /// again must be Verified with the same Verdict digest.
    pub fn recheck(&self) -> Option<String> {
        let (judging, attempt) = match &self.backing {
            Backing::Judged { judging, attempt } => (judging, attempt),
            #[cfg(feature = "testing")]
            Backing::Assumed => return None,
        };
        let verdict = match judging.judge(attempt) {
            Ok(verdict) => verdict,
            Err(error) => return Some(format!("the evidence could not be judged: {error}")),
        };
        if verdict.outcome != Outcome::Verified {
            return Some(format!(
                "attempt {attempt} is judged {}, not verified",
                verdict.outcome.as_str()
            ));
        }
        match verdict.digest() {
            Ok(digest) if digest == self.admits.proof => None,
            Ok(digest) => Some(format!(
                "attempt {attempt} now judges {digest}, not the proof {}",
                self.admits.proof
            )),
            Err(error) => Some(format!("the Verdict does not encode: {error}")),
        }
    }

    /// The gate an effect consults immediately before it starts: it proceeds only while the
    /// stored evidence still backs the proof ([`Self::recheck`]), and then only if `then`
    /// (the operator's gate, when there is one) proceeds. Everything else is a refusal.
    pub fn guard(&self, then: Option<Arc<dyn Gate>>) -> Arc<dyn Gate> {
        Arc::new(Guard {
            proof: self.clone(),
            then,
        })
    }

    /// A proof assumed without evidence, for the tests of an effect's own failure semantics
    /// (claims, receipts, unknown outcomes), which need an intent moved and no collection:
    /// compiled only with the feature `testing`, which only sf's test crate enables (the
    /// layering test keeps it so), so no `sf` a user installs can make one.
    #[cfg(feature = "testing")]
    pub fn assumed(admits: Admits) -> Self {
        Self {
            admits,
            backing: Backing::Assumed,
            verdict: None,
        }
    }
}

/// The pre-effect guard of a proof ([`Verified::guard`]).
struct Guard {
    proof: Verified,
    then: Option<Arc<dyn Gate>>,
}

impl Gate for Guard {
    fn current(&self, deadline: Instant) -> Result<GateAnswer, GateError> {
        if let Some(reason) = self.proof.recheck() {
            return Ok(GateAnswer::Refuse {
                reason: printable(&reason),
            });
        }
        match &self.then {
            Some(then) => then.current(deadline),
            None => Ok(GateAnswer::Proceed),
        }
    }
}

/// `text` as a refusal reason: printable ASCII, at most 256 characters.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(256)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits() -> Admits {
        Admits {
            candidate: Digest::of(b"candidate"),
            base: ObjectId::from_bytes([1; 20]),
            commit: ObjectId::from_bytes([2; 20]),
            slice: Slice {
                id: "fix".into(),
                revision: 1,
            },
            proof: Digest::of(b"verdict"),
        }
    }

    #[test]
    fn a_proof_admits_exactly_its_intent() {
        let proof = admits();
        assert_eq!(proof.refusal(&admits()), None);
        let mut changed: Vec<(&str, Admits)> = Vec::new();
        let mut intent = admits();
        intent.candidate = Digest::of(b"another");
        changed.push(("Candidate", intent));
        let mut intent = admits();
        intent.base = ObjectId::from_bytes([3; 20]);
        changed.push(("base", intent));
        let mut intent = admits();
        intent.commit = ObjectId::from_bytes([3; 20]);
        changed.push(("commit", intent));
        let mut intent = admits();
        intent.slice.revision = 2;
        changed.push(("Slice", intent));
        let mut intent = admits();
        intent.proof = Digest::of(b"another verdict");
        changed.push(("proof", intent));
        for (what, intent) in changed {
            let refusal = proof.refusal(&intent).unwrap();
            assert!(refusal.starts_with(&format!("its {what} ")), "{refusal}");
        }
    }
}
