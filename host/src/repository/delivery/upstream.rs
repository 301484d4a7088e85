//! A base's upstream: where the team's repository lives (a URL only Git's own transports
//! reach) and which branch follows the base, recorded once per base
//! (`refs/sf/upstreams/<base>`, tree `{upstream.json}`, parent the base) and read back whole.
//! Delivery pushes to the upstream of a Candidate's base.

use serde::{Deserialize, Serialize};

use crate::canonical;
use crate::contracts::{EncodedObject, RefName, RefUpdate};
use crate::git_object::{ObjectId, ObjectKind};

use super::super::Repository;
use super::super::error::RepositoryError;
use super::super::identity::check_target_ref;
use super::super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::super::record_commit::record_objects;

/// The protocol string of upstream records.
pub const UPSTREAM_PROTOCOL: &str = "sf-upstream/1";
/// The prefix of every upstream record ref.
pub const UPSTREAM_REF_PREFIX: &str = "refs/sf/upstreams/";
/// The name of the record in an upstream record commit's tree.
pub const UPSTREAM_RECORD_NAME: &str = "upstream.json";
/// The longest upstream URL, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// The largest upstream record read back.
const MAX_UPSTREAM_RECORD_BYTES: u64 = 8 * 1024;

const URL_RULE: &str = "an upstream is an absolute path, or a file://, git://, http://, \
                        https:// or ssh:// URL, of at most 2048 bytes, without spaces or \
                        control characters, not starting with -, and without a password (a \
                        credential helper or SSH agent holds credentials, never sf's records)";
const BRANCH_RULE: &str = "a branch is a name that refs/heads/<branch> makes a valid target \
                           ref (letters, digits, . _ - and /, at most 117 bytes)";

/// Where a base came from and which branch a delivery moves: the team's own repository.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// The repository's URL, as Git's own transports take it (see [`check_url`]).
    #[serde(deserialize_with = "url_text")]
    pub url: String,
    /// The branch, without `refs/heads/`.
    #[serde(deserialize_with = "branch_text")]
    pub branch: String,
}

fn url_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(
        deserializer,
        |url: &String| check_url(url).is_ok(),
        URL_RULE,
    )
}

fn branch_text<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(
        deserializer,
        |branch: &String| check_target_ref(&format!("refs/heads/{branch}")).is_ok(),
        BRANCH_RULE,
    )
}

/// Which of Git's transports a URL goes through: the one protocol a delivery's Git process
/// is allowed (`protocol.<name>.allow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A local path or `file://`.
    File,
    /// `git://`.
    Git,
    /// `http://`.
    Http,
    /// `https://`.
    Https,
    /// `ssh://`.
    Ssh,
}

impl Transport {
    /// Git's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Git => "git",
            Self::Http => "http",
            Self::Https => "https",
            Self::Ssh => "ssh",
        }
    }
}

/// Checks an upstream URL against [`URL_RULE`] and says which transport it goes through.
/// Git's other forms (`ext::`, `fd::`, scp-like `host:path`, remote helpers) are refused: a
/// URL that runs a command is never one a record may name.
pub fn check_url(url: &str) -> Result<Transport, &'static str> {
    if url.is_empty()
        || url.len() > MAX_URL_BYTES
        || url.starts_with('-')
        || url.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(URL_RULE);
    }
    if url.starts_with('/') {
        return Ok(Transport::File);
    }
    let (transport, rest) = [
        ("file://", Transport::File),
        ("git://", Transport::Git),
        ("http://", Transport::Http),
        ("https://", Transport::Https),
        ("ssh://", Transport::Ssh),
    ]
    .into_iter()
    .find_map(|(scheme, transport)| url.strip_prefix(scheme).map(|rest| (transport, rest)))
    .ok_or(URL_RULE)?;
    if transport == Transport::File {
        return if rest.starts_with('/') {
            Ok(transport)
        } else {
            Err(URL_RULE)
        };
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || rest.len() == authority.len() {
        return Err(URL_RULE);
    }
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && (userinfo.contains(':') || userinfo.is_empty())
    {
        return Err(URL_RULE);
    }
    Ok(transport)
}

impl Upstream {
    /// Checks both fields; `invalid-input` naming the field otherwise.
    pub fn validate(&self) -> Result<(), RepositoryError> {
        check_url(&self.url).map_err(|rule| RepositoryError::invalid("upstream.url", rule))?;
        check_target_ref(&self.branch_ref())
            .map_err(|_| RepositoryError::invalid("upstream.branch", BRANCH_RULE))?;
        Ok(())
    }

    /// `refs/heads/<branch>`.
    pub fn branch_ref(&self) -> String {
        format!("refs/heads/{}", self.branch)
    }
}

/// The upstream of one base, as its record holds it (`sf-upstream/1`): written once per base
/// commit, never moved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct UpstreamRecord {
    /// The repository's Product.
    pub product: String,
    /// The base commit (the initial commit or an imported one).
    pub base: ObjectId,
    /// Where the base came from and which branch follows it.
    pub upstream: Upstream,
}

canonical::literal_fields!(UpstreamRecord { "protocol": UPSTREAM_PROTOCOL });

/// The ref of the upstream record of `base`.
pub fn upstream_ref(base: &ObjectId) -> RefName {
    RefName::parse(&format!("{UPSTREAM_REF_PREFIX}{base}")).expect("upstream ref names are valid")
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_git_transports_without_credentials_or_commands() {
        for (url, transport) in [
            ("/srv/git/product.git", Transport::File),
            ("file:///srv/git/product.git", Transport::File),
            ("git://127.0.0.1:9418/product.git", Transport::Git),
            ("http://127.0.0.1:8080/product.git", Transport::Http),
            ("https://git.example.org/team/product.git", Transport::Https),
            ("ssh://git@git.example.org/team/product.git", Transport::Ssh),
        ] {
            assert_eq!(check_url(url), Ok(transport), "{url}");
        }
        for url in [
            "",
            "relative/path",
            "-uhello",
            "ext::sh -c touch% /tmp/pwned",
            "fd::3",
            "git.example.org:team/product.git",
            "https://user:secret@git.example.org/p.git",
            "https://@git.example.org/p.git",
            "https://git.example.org",
            "file://relative",
            "https://git.example.org/a b",
            "https://git.example.org/a\nb",
        ] {
            assert_eq!(check_url(url), Err(URL_RULE), "{url:?}");
        }
    }
}
