//! REAPI digests: the lowercase hex SHA-256 of a blob and its size, written `HASH/SIZE` where a
//! digest is text (configuration, an attestation, an error message).

use sha2::Digest as _;

use crate::proto::execution::Digest;

/// The digest of `bytes`.
pub fn of(bytes: &[u8]) -> Digest {
    Digest {
        hash: hex::encode(sha2::Sha256::digest(bytes)),
        size_bytes: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
    }
}

/// `HASH/SIZE`.
pub fn text(digest: &Digest) -> String {
    format!("{}/{}", digest.hash, digest.size_bytes)
}

/// Whether `digest` is a SHA-256 digest as sf writes them: 64 lowercase hex digits and a size
/// that is not negative.
pub fn is_valid(digest: &Digest) -> bool {
    digest.size_bytes >= 0
        && digest.hash.len() == 64
        && digest
            .hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The digest written `HASH/SIZE`; `Err` says what is wrong with the text.
pub fn parse(text: &str) -> Result<Digest, String> {
    let rule =
        "a digest is written HASH/SIZE: 64 lowercase hex digits, a slash and the size in bytes";
    let (hash, size) = text.split_once('/').ok_or(rule)?;
    let size_bytes = size.parse::<i64>().map_err(|_| rule)?;
    let digest = Digest {
        hash: hash.to_owned(),
        size_bytes,
    };
    if !is_valid(&digest) || size.starts_with('+') {
        return Err(rule.to_owned());
    }
    Ok(digest)
}

/// The size of a valid digest, in bytes.
pub fn size(digest: &Digest) -> u64 {
    u64::try_from(digest.size_bytes).unwrap_or(0)
}

/// Whether `bytes` are the blob `digest` names.
pub fn matches(digest: &Digest, bytes: &[u8]) -> bool {
    of(bytes) == *digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_written_and_read_back() {
        let digest = of(b"");
        assert_eq!(
            text(&digest),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/0"
        );
        assert_eq!(parse(&text(&digest)).unwrap(), digest);
        assert!(matches(&digest, b""));
        assert!(!matches(&digest, b"x"));
        for bad in [
            "",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855/0",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85/0",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/-1",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/+1",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855/x",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
