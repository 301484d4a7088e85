//! Review checks: a person's approval or rejection of a Candidate, recorded once and counted by
//! the judge.
//!
//! A review check of an `sf-repository-acceptance/4` names the reviewers who may answer it
//! (each by name, optionally with the Ed25519 SSH key whose signature their review must carry)
//! and how many distinct approvals it needs. A review is a write-once Evidence record
//! (`sf-review/1`), filed under the Candidate's pins and the attempt it reviewed, that names
//! the **review subject**: the digest of the part of what a reviewer reads that neither
//! reviews nor landing change (`sf-review-subject/1`: the Candidate, its commit and base, the
//! Slice, the attempt, and the digest of the Verdict of the process checks alone, which binds
//! every process check's record and what the judge found in it). The judge computes the
//! subject itself from the pins and the records it reads, so a review of another Candidate,
//! another attempt or other evidence counts for nothing.
//!
//! How a check is counted ([`count`]): only reviews that name this check and this subject,
//! by a reviewer the check lists, with a valid signature when the reviewer has a key, count.
//! A rejection always wins (met: false), whenever it was stored; otherwise the check is met
//! once distinct reviewers gave the number of approvals asked for (a reviewer approving twice
//! counts once), and waits (met: none) until then. A met check names the first approvals in
//! the store's order that met it, so approvals stored later do not change the Verdict.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, Value};
use crate::contracts::AttemptId;
use crate::contracts::grammar::{ID_RULE, is_valid_id};
use crate::git_object::ObjectId;

use super::pins::{RepositoryPins, SlicePins};
use super::{AssuranceError, invalid_field, record_bytes, record_bytes_digest};

/// The format of a review's Evidence record, and the protocol of the review it holds.
pub const REVIEW_FORMAT: &str = "sf-review/1";
/// The protocol string of the review subject.
pub const REVIEW_SUBJECT_PROTOCOL: &str = "sf-review-subject/1";
/// The SSHSIG namespace a review is signed in (`ssh-keygen -Y sign -n sf-review`), so that a
/// signature made for anything else (a Git commit, a file) is never taken for a review.
pub const SIGNATURE_NAMESPACE: &str = "sf-review";
/// The most reviewers a review check lists.
pub const MAX_REVIEWERS: usize = 64;
/// The longest reason, in bytes.
pub const MAX_REASON_BYTES: usize = 4096;
/// The longest armoured signature, in bytes (an Ed25519 SSHSIG is about 300).
pub const MAX_SIGNATURE_BYTES: usize = 4096;
/// The key algorithm a reviewer's key may have.
pub const KEY_ALGORITHM: &str = "ssh-ed25519";

crate::contracts::word_enum! {
    /// What a reviewer decided.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Decision {
        /// The reviewer read the subject and approves it.
        "approve" Approve,
        /// The reviewer read the subject and rejects it; a rejection always wins.
        "reject" Reject,
    }
}

/// A reviewer a review check lists: a name, and the key their reviews must be signed with,
/// if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reviewer {
    /// The reviewer's name, in the id grammar (`alice`, `release.team`).
    pub name: String,
    /// The reviewer's Ed25519 public key as OpenSSH writes it (`ssh-ed25519 AAAA…`, without a
    /// comment), or `None`: a review under this name is counted unsigned.
    #[serde(deserialize_with = "canonical::nullable")]
    pub key: Option<String>,
}

/// What a counted review check asks: `approvals` distinct approvals from `reviewers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewRequirement {
    /// How many distinct reviewers must approve (1 to the number listed).
    pub approvals: u64,
    /// Who may answer: 1 to 64 reviewers with distinct names.
    pub reviewers: Vec<Reviewer>,
}

impl ReviewRequirement {
    /// Checks the rules the types do not carry; errors name `field`'s parts.
    pub fn validate(&self, field: &str) -> Result<(), AssuranceError> {
        if self.reviewers.is_empty() || self.reviewers.len() > MAX_REVIEWERS {
            return Err(AssuranceError::invalid(
                format!("{field}.reviewers"),
                "lists 1 to 64 reviewers",
            ));
        }
        if self.approvals == 0 || self.approvals > self.reviewers.len() as u64 {
            return Err(AssuranceError::invalid(
                format!("{field}.approvals"),
                format!(
                    "is {}, but a review check needs 1 to as many approvals as it lists \
                     reviewers ({})",
                    self.approvals,
                    self.reviewers.len()
                ),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for (at, reviewer) in self.reviewers.iter().enumerate() {
            let here = format!("{field}.reviewers[{at}]");
            if !is_valid_id(&reviewer.name) {
                return Err(AssuranceError::invalid(format!("{here}.name"), ID_RULE));
            }
            if !names.insert(reviewer.name.as_str()) {
                return Err(AssuranceError::invalid(
                    format!("{here}.name ({})", reviewer.name),
                    "is listed twice: reviewers' names are distinct",
                ));
            }
            if let Some(key) = &reviewer.key {
                public_key(key)
                    .map_err(|why| AssuranceError::invalid(format!("{here}.key"), why))?;
            }
        }
        Ok(())
    }

    /// The reviewer named `name`, if the check lists one.
    pub fn reviewer(&self, name: &str) -> Option<&Reviewer> {
        self.reviewers.iter().find(|reviewer| reviewer.name == name)
    }
}

/// Reads a reviewer's key: exactly `ssh-ed25519 <base64>`, which OpenSSH reads as an Ed25519
/// public key.
fn public_key(key: &str) -> Result<ssh_key::PublicKey, String> {
    let mut words = key.split(' ');
    let (Some(algorithm), Some(_), None) = (words.next(), words.next(), words.next()) else {
        return Err(format!(
            "is not `{KEY_ALGORITHM} <base64>`: write the key as OpenSSH does, without a comment"
        ));
    };
    if algorithm != KEY_ALGORITHM {
        return Err(format!(
            "is a {algorithm:?} key; a reviewer's key is an Ed25519 key ({KEY_ALGORITHM})"
        ));
    }
    ssh_key::PublicKey::from_openssh(key)
        .map_err(|error| format!("is not an OpenSSH public key: {error}"))
}

/// Checks that `signature` (an armoured SSHSIG, as `ssh-keygen -Y sign` writes it) is `key`'s
/// signature of `message` in the namespace [`SIGNATURE_NAMESPACE`].
pub fn verify_signature(key: &str, message: &[u8], signature: &str) -> Result<(), String> {
    let key = public_key(key)?;
    let signature = ssh_key::SshSig::from_pem(signature)
        .map_err(|error| format!("the signature is not an SSH signature: {error}"))?;
    if signature.namespace() != SIGNATURE_NAMESPACE {
        return Err(format!(
            "the signature is for namespace {:?}, not {SIGNATURE_NAMESPACE:?}",
            signature.namespace()
        ));
    }
    key.verify(SIGNATURE_NAMESPACE, message, &signature)
        .map_err(|error| format!("the signature does not verify with the listed key: {error}"))
}

/// The part of what a reviewer reads that neither reviews nor landing change
/// (`sf-review-subject/1`); a review names its digest, and the judge recomputes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ReviewSubject {
    /// The Candidate digest.
    pub candidate: Digest,
    /// The Candidate's commit M (its tree and message: the diff against the base).
    pub commit: ObjectId,
    /// The base commit B.
    pub base: ObjectId,
    /// The Slice the Candidate was sealed for (its digest binds the acceptance).
    pub slice: SlicePins,
    /// The attempt whose records were read.
    pub attempt: AttemptId,
    /// The digest of the Verdict of the process checks alone (`sf-repository-verdict/1`),
    /// which names the pins, each process check's record and what the judge found in it.
    pub verdict: Digest,
}
canonical::literal_fields!(ReviewSubject { "protocol": REVIEW_SUBJECT_PROTOCOL });

impl ReviewSubject {
    /// The subject of the process Verdict with digest `verdict` of `attempt` under `pins`.
    pub fn new(pins: &RepositoryPins, attempt: &AttemptId, verdict: Digest) -> Self {
        Self {
            candidate: pins.candidate.digest.clone(),
            commit: pins.candidate.commit,
            base: pins.base.commit,
            slice: pins.slice.clone(),
            attempt: attempt.clone(),
            verdict,
        }
    }

    /// The canonical JSON value.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a subject holds only strings and integers")
    }

    /// The canonical bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        record_bytes(self, "review subject")
    }

    /// The subject digest: what a review names.
    pub fn digest(&self) -> Result<Digest, AssuranceError> {
        record_bytes_digest(self, "review subject")
    }
}

/// One review (`sf-review/1`): who decided what about which subject, when, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct Review {
    /// When it was made, `YYYY-MM-DDTHH:MM:SS.mmmZ` by the reviewer's clock (for people; the
    /// judge orders by the store, not by this).
    pub at: String,
    /// The Candidate digest (the subject names it too).
    pub candidate: Digest,
    /// The review check answered.
    pub check: String,
    /// Approve or reject.
    pub decision: Decision,
    /// Why, in the reviewer's words: 1 to 4096 bytes, no control character but newline and
    /// tab.
    pub reason: String,
    /// The reviewer's name, as the check lists it.
    pub reviewer: String,
    /// The armoured SSHSIG over [`Review::signed_message`], or `None`.
    #[serde(deserialize_with = "canonical::nullable")]
    pub signature: Option<String>,
    /// The review subject's digest.
    pub subject: Digest,
}
canonical::literal_fields!(Review { "protocol": REVIEW_FORMAT });

impl Review {
    /// Checks the rules the types do not carry.
    pub fn validate(&self) -> Result<(), AssuranceError> {
        if super::time::parse_millis(&self.at).is_none() {
            return Err(AssuranceError::invalid(
                "review.at",
                "is a time YYYY-MM-DDTHH:MM:SS.mmmZ",
            ));
        }
        for (field, value) in [
            ("review.check", &self.check),
            ("review.reviewer", &self.reviewer),
        ] {
            if !is_valid_id(value) {
                return Err(AssuranceError::invalid(field, ID_RULE));
            }
        }
        check_reason(&self.reason)
            .map_err(|rule| AssuranceError::invalid("review.reason", rule))?;
        if let Some(signature) = &self.signature
            && (signature.is_empty()
                || signature.len() > MAX_SIGNATURE_BYTES
                || !signature
                    .bytes()
                    .all(|b| b == b'\n' || (b' '..=b'~').contains(&b)))
        {
            return Err(AssuranceError::invalid(
                "review.signature",
                "is 1 to 4096 bytes of printable ASCII and newlines",
            ));
        }
        Ok(())
    }

    /// The canonical bytes: an Evidence record's payload.
    pub fn to_bytes(&self) -> Result<Vec<u8>, AssuranceError> {
        self.validate()?;
        record_bytes(self, "review")
    }

    /// The bytes a reviewer's key signs: the review's canonical bytes with `signature` null.
    pub fn signed_message(&self) -> Result<Vec<u8>, AssuranceError> {
        let unsigned = Self {
            signature: None,
            ..self.clone()
        };
        unsigned.to_bytes()
    }

    /// Reads a stored review: its exact canonical bytes and nothing else, then its rules.
    pub fn from_payload(bytes: &[u8]) -> Result<Self, AssuranceError> {
        let review: Self =
            canonical::from_canonical_slice(bytes, "review").map_err(invalid_field)?;
        review.validate()?;
        Ok(review)
    }

    /// The review as its canonical JSON value.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a review holds only strings")
    }
}

/// Checks a reason: 1 to 4096 bytes, no control character but newline and tab.
pub fn check_reason(reason: &str) -> Result<(), &'static str> {
    if reason.trim().is_empty()
        || reason.len() > MAX_REASON_BYTES
        || reason
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(
            "holds 1 to 4096 bytes, not only white space, and no control character but \
                    newline and tab",
        );
    }
    Ok(())
}

/// Why `review` counts for nothing towards the check `check` asking `requirement`, for the
/// subject `subject` of Candidate `candidate`; `None` when it counts.
pub fn assess(
    review: &Review,
    check: &str,
    requirement: &ReviewRequirement,
    subject: &Digest,
    candidate: &Digest,
) -> Option<String> {
    if review.check != check {
        return Some(format!("it answers check {:?}", review.check));
    }
    if review.candidate != *candidate {
        return Some(format!("it names Candidate {}", review.candidate));
    }
    if review.subject != *subject {
        return Some(format!(
            "it names subject {}, not this one ({subject})",
            review.subject
        ));
    }
    let Some(reviewer) = requirement.reviewer(&review.reviewer) else {
        return Some(format!(
            "{} is not a reviewer the check lists",
            review.reviewer
        ));
    };
    match (&reviewer.key, &review.signature) {
        (None, _) => None,
        (Some(_), None) => Some(format!(
            "it is not signed, and the check lists a key for {}",
            reviewer.name
        )),
        (Some(key), Some(signature)) => {
            let message = match review.signed_message() {
                Ok(message) => message,
                Err(error) => return Some(error.to_string()),
            };
            verify_signature(key, &message, signature).err()
        }
    }
}

/// What the judge found for one review check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewVerdict {
    /// The review check's id.
    pub check: String,
    /// How many distinct approvals it needs.
    pub approvals: u64,
    /// The reviewers whose approvals count, in the store's order (at most `approvals` once
    /// the check is met).
    pub approved_by: Vec<String>,
    /// The records of those approvals.
    pub records: Vec<Digest>,
    /// Every reviewer who rejected the subject, with the record, in the store's order.
    pub rejected_by: Vec<(String, Digest)>,
    /// `Some(true)` met, `Some(false)` rejected, `None` still waiting for approvals.
    pub met: Option<bool>,
    /// Why it is not met: each rejection with its reason, the approvals awaited, and the
    /// reviews of this attempt that count for nothing and why. Empty once met.
    pub problems: Vec<String>,
}

impl ReviewVerdict {
    /// The check's state in words: `met`, `rejected` or `awaiting approval`.
    pub fn state(&self) -> &'static str {
        match self.met {
            Some(true) => "met",
            Some(false) => "rejected",
            None => "awaiting approval",
        }
    }

    /// The check's entry in a Verdict record.
    pub fn to_value(&self) -> Value {
        let strings =
            |items: &[String]| Value::Array(items.iter().map(|s| s.as_str().into()).collect());
        canonical::object([
            ("check", self.check.as_str().into()),
            ("approvals", Value::from(self.approvals as i64)),
            ("approvedBy", strings(&self.approved_by)),
            (
                "records",
                Value::Array(
                    self.records
                        .iter()
                        .map(|id| id.to_string().into())
                        .collect(),
                ),
            ),
            (
                "rejectedBy",
                Value::Array(
                    self.rejected_by
                        .iter()
                        .map(|(name, record)| {
                            canonical::object([
                                ("reviewer", name.as_str().into()),
                                ("record", record.to_string().into()),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("met", self.met.map_or(Value::Null, Value::Bool)),
            (
                "problems",
                Value::Array(
                    super::sanitize_problems(&self.problems)
                        .into_iter()
                        .map(Value::from)
                        .collect(),
                ),
            ),
        ])
    }
}

/// Counts the reviews of one attempt (in the store's order) for the review check `check`
/// asking `requirement`, under the subject `subject` of Candidate `candidate` (see the module
/// documentation).
pub fn count(
    check: &str,
    requirement: &ReviewRequirement,
    reviews: &[(Digest, Review)],
    subject: &Digest,
    candidate: &Digest,
) -> ReviewVerdict {
    let mut approved_by: Vec<String> = Vec::new();
    let mut records = Vec::new();
    let mut rejected_by: Vec<(String, Digest)> = Vec::new();
    let mut rejections = Vec::new();
    let mut ignored = Vec::new();
    for (id, review) in reviews.iter().filter(|(_, review)| review.check == check) {
        if let Some(why) = assess(review, check, requirement, subject, candidate) {
            ignored.push(format!(
                "review {id} by {} counts for nothing: {why}",
                review.reviewer
            ));
            continue;
        }
        match review.decision {
            Decision::Reject => {
                rejections.push(format!(
                    "rejected by {} (review {id}): {}",
                    review.reviewer, review.reason
                ));
                rejected_by.push((review.reviewer.clone(), id.clone()));
            }
            Decision::Approve => {
                if !approved_by.contains(&review.reviewer)
                    && (approved_by.len() as u64) < requirement.approvals
                {
                    approved_by.push(review.reviewer.clone());
                    records.push(id.clone());
                }
            }
        }
    }
    let (met, problems) = if !rejections.is_empty() {
        (Some(false), [rejections, ignored].concat())
    } else if approved_by.len() as u64 >= requirement.approvals {
        (Some(true), Vec::new())
    } else {
        let waiting: Vec<&str> = requirement
            .reviewers
            .iter()
            .map(|reviewer| reviewer.name.as_str())
            .filter(|name| !approved_by.iter().any(|approved| approved == name))
            .collect();
        let awaiting = format!(
            "awaiting {} more approval(s) ({} of {}) from {}",
            requirement.approvals - approved_by.len() as u64,
            approved_by.len(),
            requirement.approvals,
            waiting.join(", ")
        );
        (None, [vec![awaiting], ignored].concat())
    };
    ReviewVerdict {
        check: check.to_owned(),
        approvals: requirement.approvals,
        approved_by,
        records,
        rejected_by,
        met,
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirement(approvals: u64, names: &[&str]) -> ReviewRequirement {
        ReviewRequirement {
            approvals,
            reviewers: names
                .iter()
                .map(|name| Reviewer {
                    name: (*name).to_owned(),
                    key: None,
                })
                .collect(),
        }
    }

    fn review(reviewer: &str, decision: Decision, subject: &Digest) -> Review {
        Review {
            at: "2026-01-01T00:00:00.000Z".into(),
            candidate: Digest::of(b"candidate"),
            check: "human".into(),
            decision,
            reason: "read it".into(),
            reviewer: reviewer.into(),
            signature: None,
            subject: subject.clone(),
        }
    }

    fn id(n: u8) -> Digest {
        Digest::of(&[n])
    }

    #[test]
    fn approvals_count_once_per_reviewer_and_a_rejection_always_wins() {
        let subject = Digest::of(b"subject");
        let needs_two = requirement(2, &["alice", "bob", "carol"]);
        let alice = review("alice", Decision::Approve, &subject);
        let twice = count(
            "human",
            &needs_two,
            &[(id(1), alice.clone()), (id(2), alice.clone())],
            &subject,
            &Digest::of(b"candidate"),
        );
        assert_eq!(twice.met, None);
        assert_eq!(twice.approved_by, ["alice"]);
        assert!(twice.problems[0].contains("awaiting 1 more approval(s) (1 of 2) from bob, carol"));
        let bob = review("bob", Decision::Approve, &subject);
        let carol = review("carol", Decision::Approve, &subject);
        let met = count(
            "human",
            &needs_two,
            &[(id(1), alice.clone()), (id(2), bob.clone()), (id(3), carol)],
            &subject,
            &Digest::of(b"candidate"),
        );
        assert_eq!(met.met, Some(true));
        // The first approvals that met it, so a later one changes nothing.
        assert_eq!(met.approved_by, ["alice", "bob"]);
        assert_eq!(met.records, [id(1), id(2)]);
        assert!(met.problems.is_empty());
        let rejected = count(
            "human",
            &needs_two,
            &[
                (id(1), alice),
                (id(2), bob.clone()),
                (id(4), review("bob", Decision::Reject, &subject)),
            ],
            &subject,
            &Digest::of(b"candidate"),
        );
        assert_eq!(rejected.met, Some(false));
        assert_eq!(rejected.rejected_by, [("bob".to_owned(), id(4))]);
        assert!(rejected.problems[0].starts_with("rejected by bob"));
    }

    #[test]
    fn reviews_of_another_subject_or_by_someone_unlisted_count_for_nothing() {
        let subject = Digest::of(b"subject");
        let needs_one = requirement(1, &["alice"]);
        let other = review("alice", Decision::Approve, &Digest::of(b"other"));
        let mallory = review("mallory", Decision::Reject, &subject);
        let elsewhere = Review {
            candidate: Digest::of(b"another candidate"),
            ..review("alice", Decision::Reject, &subject)
        };
        let verdict = count(
            "human",
            &needs_one,
            &[(id(1), other), (id(2), mallory), (id(3), elsewhere)],
            &subject,
            &Digest::of(b"candidate"),
        );
        assert_eq!(verdict.met, None);
        assert!(verdict.problems[1].contains("names subject"), "{verdict:?}");
        assert!(
            verdict.problems[3].contains("it names Candidate"),
            "{verdict:?}"
        );
        assert!(verdict.problems[2].contains("mallory is not a reviewer"));
    }

    #[test]
    fn a_review_round_trips_through_its_canonical_bytes_and_refuses_bad_fields() {
        let subject = Digest::of(b"subject");
        let review = review("alice", Decision::Approve, &subject);
        let bytes = review.to_bytes().unwrap();
        assert_eq!(Review::from_payload(&bytes).unwrap(), review);
        let spaced = String::from_utf8(bytes.clone()).unwrap().replace(",", ", ");
        assert!(Review::from_payload(spaced.as_bytes()).is_err());
        for bad in [
            Review {
                reason: " ".into(),
                ..review.clone()
            },
            Review {
                reason: "a\u{1b}[31m".into(),
                ..review.clone()
            },
            Review {
                reviewer: "-x".into(),
                ..review.clone()
            },
            Review {
                at: "yesterday".into(),
                ..review.clone()
            },
        ] {
            assert!(bad.to_bytes().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn keys_are_ed25519_without_a_comment() {
        let good =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIApFSYNzqs5gpK0T7WijAH1sr06jJkccGfPCfFIewY35";
        assert!(public_key(good).is_ok(), "{:?}", public_key(good));
        assert!(public_key(&format!("{good} alice@host")).is_err());
        assert!(public_key("ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ").is_err());
        assert!(public_key("ssh-ed25519 !!!").is_err());
    }

    /// Signs `message` with a fresh key in `namespace` through the real ssh-keygen.
    fn ssh_sign(dir: &std::path::Path, namespace: &str, message: &[u8]) -> (String, String) {
        use std::io::Write as _;
        let key = dir.join(format!("key-{namespace}"));
        let made = std::process::Command::new("/usr/bin/ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "c", "-f"])
            .arg(&key)
            .status()
            .unwrap();
        assert!(made.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        let public = public.split(' ').take(2).collect::<Vec<_>>().join(" ");
        let mut child = std::process::Command::new("/usr/bin/ssh-keygen")
            .args(["-Y", "sign", "-q", "-n", namespace, "-f"])
            .arg(&key)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(message).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        (public, String::from_utf8(output.stdout).unwrap())
    }

    #[test]
    fn an_ssh_signature_verifies_only_for_its_message_key_and_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let (key, signature) = ssh_sign(dir.path(), SIGNATURE_NAMESPACE, b"the review");
        assert_eq!(verify_signature(&key, b"the review", &signature), Ok(()));
        assert!(verify_signature(&key, b"another review", &signature).is_err());
        let (other, _) = ssh_sign(dir.path(), "other", b"x");
        assert!(verify_signature(&other, b"the review", &signature).is_err());
        // A signature made for Git (namespace "git") is never a review's.
        let (git_key, git_signature) = ssh_sign(dir.path(), "git", b"the review");
        let refused = verify_signature(&git_key, b"the review", &git_signature).unwrap_err();
        assert!(refused.contains("namespace \"git\""), "{refused}");
        assert!(verify_signature(&key, b"the review", "not a signature").is_err());
    }
}
