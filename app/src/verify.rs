//! `verify`: checks, anywhere and without sf's stores, that a commit landed by sf was
//! Verified. The attestation is read from a local repository (a clone that fetched
//! `refs/sf/attestations/*`) or fetched from the team's remote, and checked against only the
//! trusted public keys: the signature first, then the Statement's shape, its subject against
//! the commit and its tree (both digests computed here from the commit's own objects), and a
//! Verified outcome. Each refusal has its own code.
//!
//! Where the evidence store is at hand (`rejudge`: the repository identity and the frozen
//! Slice), the judge also judges the attested attempt again from the stored records, and the
//! Verdict it makes must be the attested one, digest for digest (`rejudged-differently`
//! otherwise): the signature proves who said Verified, the re-judgement that the records say
//! it still.

use std::path::{Path, PathBuf};

use sf_attest::{Checked, Expected, TrustedKeys};
use sf_host::git_object::ObjectId;
use sf_host::git_remote::FetchedRefs;
use sf_host::git_source::read_attested;
use sf_host::repository::{ATTESTATION_REF_PREFIX, check_url};

use crate::attest::attest_error;
use crate::backends::Backends;
use crate::error::AppError;

/// Which commit of which repository to check, and whose signatures to trust.
#[derive(Clone, Debug)]
pub struct VerifyRequest {
    /// A local repository's directory, or a remote's URL (`--repo`).
    pub repo: String,
    /// The revision naming the commit (`--commit`).
    pub commit: String,
    /// The trusted keys file (`--trusted-keys`): OpenSSH `authorized_keys` or
    /// `allowed_signers` lines.
    pub trusted_keys: PathBuf,
    /// Where the evidence is at hand: judge the attested attempt again (`--identity`,
    /// `--slice`).
    pub rejudge: Option<Rejudge>,
}

/// The repository identity and the frozen Slice whose evidence store holds the attested
/// records.
#[derive(Clone, Debug)]
pub struct Rejudge {
    /// The repository identity file.
    pub identity: PathBuf,
    /// The frozen Slice directory.
    pub slice: PathBuf,
}

/// A commit whose attestation checked: Verified, about exactly this commit, signed by a
/// trusted key.
#[derive(Clone, Debug)]
pub struct Verification {
    /// The commit the revision named.
    pub commit: ObjectId,
    /// The ref the attestation was read from.
    pub name: String,
    /// What it says and who signed it.
    pub checked: Checked,
    /// The digest of the Verdict judged again from the stored records (the attested one),
    /// when asked for.
    pub rejudged: Option<sf_host::canonical::Digest>,
}

/// Checks `request.commit`'s attestation. `Err` for every case but a Verified attestation of
/// exactly that commit signed by a trusted key: `no-attestation`, `malformed-envelope`,
/// `bad-signature`, `untrusted-key`, `another-commit`, `not-verified`, or the reason the
/// repository or the keys could not be read.
pub fn verify(backends: &Backends, request: &VerifyRequest) -> Result<Verification, AppError> {
    let trusted = TrustedKeys::read(&request.trusted_keys).map_err(|error| attest_error(&error))?;
    let fetched;
    let local = if Path::new(&request.repo).is_dir() {
        Path::new(&request.repo)
    } else {
        fetched = fetch(backends, &request.repo, &request.commit)?;
        fetched.path()
    };
    let read = read_attested(local, &request.commit).map_err(|error| {
        AppError::coded(
            error.code(),
            format!("--repo {} --commit {}", request.repo, request.commit),
            error,
        )
    })?;
    let name = format!("{ATTESTATION_REF_PREFIX}{}", read.commit);
    let bytes = match read.attestation {
        None => {
            return Err(AppError::new(
                "no-attestation",
                format!(
                    "commit {} has no attestation in {} ({name} is absent): it was not landed \
                     by sf with [attest] configured, or the attestation was not fetched (a clone \
                     fetches only branches and tags: `git fetch origin \
                     '+{ATTESTATION_REF_PREFIX}*:{ATTESTATION_REF_PREFIX}*'`, or give --repo the \
                     remote's URL)",
                    read.commit, request.repo
                ),
            ));
        }
        Some(Err(why)) => return Err(AppError::new("malformed-envelope", why)),
        Some(Ok(bytes)) => bytes,
    };
    let expected = Expected {
        commit: read.commit,
        tree: read.tree,
        sf_tree: read.sf_tree,
    };
    let checked = sf_attest::check(&bytes, &trusted, &expected).map_err(|error| {
        AppError::new(error.code(), format!("{name} in {}: {error}", request.repo))
    })?;
    let rejudged = match &request.rejudge {
        None => None,
        Some(rejudge) => Some(judged_again(backends, &checked, rejudge)?),
    };
    Ok(Verification {
        commit: read.commit,
        name,
        checked,
        rejudged,
    })
}

/// The attested attempt judged again from the store `rejudge` names: its Verdict's digest,
/// which must be the attested one.
fn judged_again(
    backends: &Backends,
    checked: &Checked,
    rejudge: &Rejudge,
) -> Result<sf_host::canonical::Digest, AppError> {
    let landing = &checked.statement.predicate;
    let judged = crate::judge::judge(
        backends,
        &crate::judge::JudgeRequest {
            target: crate::loaded::Target {
                identity: rejudge.identity.clone(),
                candidate: landing.candidate.to_string(),
                slice: rejudge.slice.clone(),
            },
            attempt: Some(landing.verdict.attempt),
        },
    )?;
    if judged.digest != landing.verdict.digest {
        return Err(AppError::new(
            "rejudged-differently",
            format!(
                "the records of attempt {} of Candidate {} under {} give Verdict {} ({}), not                  the attested {} ({}): the attestation does not say what the evidence says",
                landing.verdict.attempt,
                landing.candidate,
                rejudge.slice.display(),
                judged.digest,
                judged.verdict.outcome.as_str(),
                landing.verdict.digest,
                landing.verdict.outcome
            ),
        ));
    }
    Ok(judged.digest)
}

/// Fetches from the remote at `url` what checking `rev` needs: its branches and tags, and
/// the attestations of the commit `rev` names when it is a full commit id (else every
/// attestation, since which commit a branch names is known only once fetched).
fn fetch(backends: &Backends, url: &str, rev: &str) -> Result<FetchedRefs, AppError> {
    check_url(url).map_err(|rule| {
        AppError::invalid(
            format!("--repo {url}"),
            format!("is neither a directory nor a Git URL sf fetches from ({rule})"),
        )
    })?;
    let attestations = match ObjectId::parse_hex(rev) {
        // A glob of one ref: a remote without it fetches nothing, and is no error.
        Some(commit) => {
            format!("+{ATTESTATION_REF_PREFIX}{commit}*:{ATTESTATION_REF_PREFIX}{commit}*")
        }
        None => format!("+{ATTESTATION_REF_PREFIX}*:{ATTESTATION_REF_PREFIX}*"),
    };
    let refspecs = [
        "+refs/heads/*:refs/heads/*".to_owned(),
        "+refs/tags/*:refs/tags/*".to_owned(),
        attestations,
    ];
    backends
        .remote()?
        .fetch_refs(url, &refspecs)
        .map_err(|error| AppError::coded("unavailable", format!("--repo {url}"), error))
}
