//! The keys of attestations, in OpenSSH's forms: the signing key as the private key file
//! `ssh-keygen -t ed25519` writes (`[attest] key`), and the keys a verifier trusts as the
//! lines of an `authorized_keys` or `allowed_signers` file. Only Ed25519 keys sign or are
//! trusted; a key's id is its OpenSSH SHA-256 fingerprint (`SHA256:…`, what `ssh-keygen -l`
//! prints), which DSSE carries as the signature's `keyid`.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use ed25519_dalek::{Signer as _, Verifier as _};
use ssh_key::HashAlg;

use crate::dsse::{Envelope, Signature};
use crate::error::AttestError;

/// The most bytes a private key file may have (an Ed25519 one has about 400).
const MAX_PRIVATE_KEY_BYTES: u64 = 16 * 1024;
/// The most bytes a trusted keys file may have.
const MAX_TRUSTED_KEYS_BYTES: u64 = 1024 * 1024;

/// The key attestations are signed with.
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    keyid: String,
    public: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("keyid", &self.keyid)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Reads the OpenSSH private key file at `path`: a regular file of its owner, readable by
    /// nobody else (as OpenSSH itself requires), holding one unencrypted Ed25519 key.
    pub fn read(path: &Path) -> Result<Self, AttestError> {
        let at =
            |detail: String| AttestError::Key(format!("[attest] key {}: {detail}", path.display()));
        let meta = std::fs::symlink_metadata(path).map_err(|error| {
            at(format!(
                "{error}; name the OpenSSH private key `ssh-keygen -t ed25519` wrote"
            ))
        })?;
        if !meta.is_file() {
            return Err(at("is not a regular file".into()));
        }
        if meta.len() > MAX_PRIVATE_KEY_BYTES {
            return Err(at(format!("is larger than {MAX_PRIVATE_KEY_BYTES} bytes")));
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
            return Err(at(format!(
                "must belong to this user and be readable by nobody else (mode {:o}); `chmod \
                 600` it",
                meta.mode() & 0o7777
            )));
        }
        let text = std::fs::read(path).map_err(|error| at(error.to_string()))?;
        let key = ssh_key::PrivateKey::from_openssh(&text)
            .map_err(|error| at(format!("is not an OpenSSH private key: {error}")))?;
        if key.is_encrypted() {
            return Err(at(
                "is encrypted; sf signs unattended, so give it a key without a passphrase \
                 (kept readable only by sf's user)"
                    .into(),
            ));
        }
        let pair = key.key_data().ed25519().ok_or_else(|| {
            at(format!(
                "is a {} key; attestations are signed with Ed25519 (`ssh-keygen -t ed25519`)",
                key.algorithm()
            ))
        })?;
        let signing = ed25519_dalek::SigningKey::from_bytes(&pair.private.to_bytes());
        if signing.verifying_key().to_bytes() != pair.public.0 {
            return Err(at(
                "its public half is not the private key's: the file is damaged".into(),
            ));
        }
        let public = key.public_key();
        Ok(Self {
            key: signing,
            keyid: public.fingerprint(HashAlg::Sha256).to_string(),
            public: format!("ssh-ed25519 {}", public_base64(public)?),
        })
    }

    /// The key id: the public key's OpenSSH SHA-256 fingerprint.
    pub fn keyid(&self) -> &str {
        &self.keyid
    }

    /// The public key as OpenSSH writes it (`ssh-ed25519 AAAA…`, no comment).
    pub fn public(&self) -> &str {
        &self.public
    }

    /// Signs the envelope's pre-authentication encoding, replacing any signature it had.
    pub fn sign(&self, envelope: &mut Envelope) {
        let signature = self.key.sign(&envelope.pae());
        envelope.signatures = vec![Signature {
            keyid: self.keyid.clone(),
            sig: signature.to_bytes().to_vec(),
        }];
    }
}

/// The base64 of an OpenSSH public key's blob.
fn public_base64(key: &ssh_key::PublicKey) -> Result<String, AttestError> {
    let line = key
        .to_openssh()
        .map_err(|error| AttestError::Key(format!("the public key cannot be written: {error}")))?;
    Ok(line.split(' ').nth(1).unwrap_or_default().to_owned())
}

/// One key a verifier trusts.
#[derive(Clone, Debug)]
pub struct TrustedKey {
    /// Who the file says it is: an `allowed_signers` line's principals, else the key's
    /// comment, else its id.
    pub name: String,
    /// The key id (OpenSSH SHA-256 fingerprint).
    pub keyid: String,
    /// The key as OpenSSH writes it (`ssh-ed25519 AAAA…`).
    pub public: String,
    key: ed25519_dalek::VerifyingKey,
}

/// The keys of a trusted keys file.
#[derive(Clone, Debug)]
pub struct TrustedKeys {
    keys: Vec<TrustedKey>,
}

impl TrustedKeys {
    /// Reads `path` (`--trusted-keys`).
    pub fn read(path: &Path) -> Result<Self, AttestError> {
        let at = |detail: String| {
            AttestError::TrustedKeys(format!("--trusted-keys {}: {detail}", path.display()))
        };
        let meta = std::fs::metadata(path).map_err(|error| at(error.to_string()))?;
        if !meta.is_file() || meta.len() > MAX_TRUSTED_KEYS_BYTES {
            return Err(at(format!(
                "must be a regular file of at most {MAX_TRUSTED_KEYS_BYTES} bytes"
            )));
        }
        let text = std::fs::read(path).map_err(|error| at(error.to_string()))?;
        let text = String::from_utf8(text).map_err(|_| at("is not UTF-8".into()))?;
        Self::parse(&text).map_err(at)
    }

    /// Reads the lines of an `authorized_keys` (`[options] TYPE BASE64 [comment]`) or
    /// `allowed_signers` (`PRINCIPALS [options] TYPE BASE64 [comment]`) file: blank lines and
    /// `#` comments are skipped, and so are keys of other types and certificate authorities
    /// (an Ed25519 signature is checked only against Ed25519 keys). A line that names an
    /// Ed25519 key that cannot be read is refused, and so is a file without one.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut keys = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.contains("cert-authority") {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|word| *word == "ssh-ed25519") else {
                continue;
            };
            let Some(blob) = words.get(at + 1) else {
                return Err(format!("line {}: ssh-ed25519 without a key", number + 1));
            };
            let public = format!("ssh-ed25519 {blob}");
            let parsed = ssh_key::PublicKey::from_openssh(&public).map_err(|error| {
                format!("line {}: not an OpenSSH public key: {error}", number + 1)
            })?;
            let raw = parsed
                .key_data()
                .ed25519()
                .ok_or_else(|| format!("line {}: not an Ed25519 key", number + 1))?;
            let key = ed25519_dalek::VerifyingKey::from_bytes(&raw.0)
                .map_err(|error| format!("line {}: not an Ed25519 point: {error}", number + 1))?;
            let keyid = parsed.fingerprint(HashAlg::Sha256).to_string();
            // allowed_signers puts the principals first; authorized_keys the comment last.
            let name = if at > 0 && !words[0].contains('=') {
                words[0].to_owned()
            } else if words.len() > at + 2 {
                words[at + 2..].join(" ")
            } else {
                keyid.clone()
            };
            keys.push(TrustedKey {
                name,
                keyid,
                public,
                key,
            });
        }
        if keys.is_empty() {
            return Err(
                "holds no Ed25519 key; list the signer's public key, as `ssh-keygen \
                        -y -f KEY` prints it, one per line"
                    .into(),
            );
        }
        Ok(Self { keys })
    }

    /// The trusted key whose signature of `envelope` verifies (the signature's key id naming
    /// it): `bad-signature` when a
    /// signature names a trusted key (its key id) and does not verify with it, so the bytes
    /// were changed; `untrusted-key` when no signature is by a trusted key.
    pub fn signer(&self, envelope: &Envelope) -> Result<&TrustedKey, AttestError> {
        let pae = envelope.pae();
        for signature in &envelope.signatures {
            let Ok(sig) = ed25519_dalek::Signature::from_slice(&signature.sig) else {
                continue;
            };
            // A signature counts only under the key its key id names, as DSSE verifiers
            // match them: the key id is not signed, so one changed there is refused too.
            for key in self.keys.iter().filter(|key| key.keyid == signature.keyid) {
                if key.key.verify(&pae, &sig).is_ok() {
                    return Ok(key);
                }
            }
        }
        let named: Vec<&str> = envelope
            .signatures
            .iter()
            .map(|signature| signature.keyid.as_str())
            .collect();
        if let Some(key) = self
            .keys
            .iter()
            .find(|key| named.contains(&key.keyid.as_str()))
        {
            return Err(AttestError::BadSignature(format!(
                "the envelope's signature by {} ({}) does not verify: the envelope was changed \
                 after it was signed; do not trust this attestation",
                key.keyid, key.name
            )));
        }
        Err(AttestError::UntrustedKey(format!(
            "the envelope is signed by {}, and no key of --trusted-keys verifies it; add the \
             signer's public key to the file only if you trust it",
            named.join(", ")
        )))
    }
}
