//! The id grammar shared by every record: products, Slices, actions, owners and checks are
//! named by ids of one shape, checked here once.

/// Whether `text` matches `^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`, the id grammar of products,
/// slices, actions and owners.
pub fn is_valid_id(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
}

/// The rule [`is_valid_id`] checks, in words.
pub const ID_RULE: &str = "must match ^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(is_valid_id("a"));
        assert!(is_valid_id("Prod-1.x:y/z_"));
        assert!(is_valid_id(&"a".repeat(128)));
        assert!(!is_valid_id(&"a".repeat(129)));
        assert!(!is_valid_id(""));
        assert!(!is_valid_id("-a"));
        assert!(!is_valid_id("a b"));
    }
}
