//! Pack encoding: objects already encoded and hashed, framed as a version-2 pack for
//! `git index-pack --strict` (the object store keeps it as one pack) or `git unpack-objects`
//! (a push's temporary repository). No deltas: each object is its zlib-deflated body, so Git
//! re-hashes exactly the bytes the host hashed.

use std::io::Write;

use flate2::Compression;
use flate2::write::ZlibEncoder;
use sf_contracts::{EncodedObject, ObjectStoreError};
use sha1::{Digest as _, Sha1};

/// Encodes `objects` as one pack: `PACK`, version 2, the object count, each object's
/// type-and-size header and deflated body, and the SHA-1 of everything before it.
pub fn encode(objects: &[&EncodedObject]) -> Result<Vec<u8>, ObjectStoreError> {
    let count = u32::try_from(objects.len()).map_err(|_| ObjectStoreError::InvalidInput {
        input: format!("{} objects", objects.len()),
        rule: "one write holds at most 2^32 - 1 objects",
    })?;
    let mut pack = Vec::new();
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&count.to_be_bytes());
    for object in objects {
        push_header(&mut pack, object.kind.pack_type(), object.body.len() as u64);
        let mut encoder = ZlibEncoder::new(&mut pack, Compression::default());
        // Writing into a Vec cannot fail short of allocation failure, which aborts anyway;
        // the errors are still mapped rather than unwrapped.
        encoder
            .write_all(&object.body)
            .and_then(|()| encoder.finish().map(|_| ()))
            .map_err(|_| ObjectStoreError::InvalidInput {
                input: format!("object {}", object.id),
                rule: "an object can be deflated",
            })?;
    }
    let trailer = Sha1::digest(&pack);
    pack.extend_from_slice(&trailer);
    Ok(pack)
}

/// The pack object header: 3 type bits and the size's low 4 bits in the first byte, then the
/// size 7 bits at a time, each byte's high bit saying another follows.
fn push_header(pack: &mut Vec<u8>, kind: u8, size: u64) {
    let mut byte = (kind << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        pack.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    pack.push(byte);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sf_contracts::git_object::ObjectKind;

    #[test]
    fn header_varint() {
        let mut small = Vec::new();
        push_header(&mut small, 3, 15);
        assert_eq!(small, [0x3f]);
        let mut two = Vec::new();
        push_header(&mut two, 1, 16);
        assert_eq!(two, [0x90, 0x01]);
        let mut big = Vec::new();
        push_header(&mut big, 2, 0x1234);
        // low 4 bits 0x4, then 0x123 in 7-bit groups: 0x23, 0x02
        assert_eq!(big, [0xa4, 0xa3, 0x02]);
    }

    #[test]
    fn pack_frame() {
        let blob = EncodedObject::new(ObjectKind::Blob, b"hello\n".to_vec());
        let pack = encode(&[&blob]).expect("encodes");
        assert_eq!(&pack[..4], b"PACK");
        assert_eq!(&pack[4..8], &[0, 0, 0, 2]);
        assert_eq!(&pack[8..12], &[0, 0, 0, 1]);
        let (body, trailer) = pack.split_at(pack.len() - 20);
        assert_eq!(trailer, Sha1::digest(body).as_slice());
    }
}
