//! Git blob ids (the hash of `blob <size>\0` and the content: SHA-1, or SHA-256 for a 64-digit
//! id), to check a pre-image and a result against a diff's `index` line.

use sha1::Digest;

/// The blob id of `content`, in the hash an id of `id_len` hex digits was made with.
pub(crate) fn blob_id(content: &[u8], id_len: usize) -> String {
    let header = format!("blob {}\0", content.len());
    if id_len > 40 {
        let mut hash = sha2::Sha256::new();
        hash.update(header.as_bytes());
        hash.update(content);
        hex::encode(hash.finalize())
    } else {
        let mut hash = sha1::Sha1::new();
        hash.update(header.as_bytes());
        hash.update(content);
        hex::encode(hash.finalize())
    }
}

/// Whether an `index` line id is Git's null id (no blob: a created or deleted side).
pub(crate) fn is_null(id: &str) -> bool {
    id.bytes().all(|c| c == b'0')
}

/// Checks `content` against an `index` line id (full or abbreviated); Err holds the content's
/// full id.
pub(crate) fn check(content: &[u8], id: &str) -> Result<(), String> {
    let actual = blob_id(content, id.len());
    if actual.starts_with(id) {
        Ok(())
    } else {
        Err(actual)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ids() {
        // `git hash-object /dev/null` and `printf 'hello\n' | git hash-object --stdin`
        assert_eq!(blob_id(b"", 40), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(
            blob_id(b"hello\n", 7),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert!(check(b"hello\n", "ce01362").is_ok());
        assert!(check(b"hello\n", "ce01363").is_err());
        assert_eq!(
            blob_id(b"", 64),
            "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
        );
    }
}
