//! Parsing `git cat-file --batch` output strictly, against the ids that were asked for.
//!
//! Every answer must echo the requested id, name a kind sf stores, declare a size the bytes
//! actually hold and end with a newline; each body is re-hashed, because replace refs, lazy
//! fetch or a tampered object file could make Git answer with other bytes than the id names.

use sf_contracts::git_object::{ObjectId, ObjectKind, object_id};
use sf_contracts::{ObjectStoreError, StoredObject};

use crate::errors::corrupt;

/// The longest header line accepted: 40 hex, a kind and a decimal size fit well within it.
const HEADER_MAX_BYTES: usize = 128;

/// Parses the answers to `ids` (asked in this order, each once) from `output`.
pub(crate) fn parse(
    ids: &[ObjectId],
    output: &[u8],
) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
    let mut rest = output;
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        let (answer, after) = parse_one(id, rest)?;
        answers.push(answer);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(corrupt(format!(
            "git cat-file --batch wrote {} bytes after the last answer",
            rest.len()
        )));
    }
    Ok(answers)
}

/// Parses one answer for `id` from the front of `input`, returning what follows it.
fn parse_one<'a>(
    id: &ObjectId,
    input: &'a [u8],
) -> Result<(Option<StoredObject>, &'a [u8]), ObjectStoreError> {
    let malformed = |why: &str| corrupt(format!("git cat-file --batch answer for {id}: {why}"));
    let window = &input[..input.len().min(HEADER_MAX_BYTES)];
    let newline = window
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| malformed("no header line"))?;
    let header =
        std::str::from_utf8(&input[..newline]).map_err(|_| malformed("header is not text"))?;
    let after_header = &input[newline + 1..];
    let mut fields = header.split(' ');
    let echoed = fields.next().unwrap_or_default();
    if echoed != id.to_hex() {
        return Err(malformed("answer names another object"));
    }
    let (kind, size) = match (fields.next(), fields.next(), fields.next()) {
        (Some("missing"), None, None) => return Ok((None, after_header)),
        (Some(kind), Some(size), None) => (kind, size),
        _ => {
            return Err(malformed(
                "header is not `<id> <type> <size>` or `<id> missing`",
            ));
        }
    };
    let kind = ObjectKind::parse(kind)
        .ok_or_else(|| malformed("the object is not a blob, tree or commit"))?;
    let size = parse_size(size).ok_or_else(|| malformed("size is not a decimal number"))?;
    if after_header.len() < size || after_header.len() - size < 1 {
        return Err(malformed("body is shorter than its declared size"));
    }
    let (body, tail) = after_header.split_at(size);
    let Some((b'\n', rest)) = tail.split_first() else {
        return Err(malformed("body is not followed by a newline"));
    };
    if object_id(kind, body) != *id {
        return Err(malformed("the bytes do not hash to the requested id"));
    }
    Ok((
        Some(StoredObject {
            kind,
            body: body.to_vec(),
        }),
        rest,
    ))
}

/// A canonical decimal: digits only, no sign, no leading zero except `0` itself.
fn parse_size(text: &str) -> Option<usize> {
    if text.is_empty()
        || !text.bytes().all(|b| b.is_ascii_digit())
        || (text.len() > 1 && text.starts_with('0'))
    {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &ObjectId, kind: &str, body: &[u8]) -> Vec<u8> {
        let mut out = format!("{id} {kind} {}\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        out.push(b'\n');
        out
    }

    #[test]
    fn parses_objects_and_missing() {
        let blob = object_id(ObjectKind::Blob, b"hi\n");
        let missing = ObjectId::from_bytes([7; 20]);
        let mut output = answer(&blob, "blob", b"hi\n");
        output.extend_from_slice(format!("{missing} missing\n").as_bytes());
        let parsed = parse(&[blob, missing], &output).expect("parses");
        assert_eq!(
            parsed[0].as_ref().map(|o| o.body.as_slice()),
            Some(&b"hi\n"[..])
        );
        assert!(parsed[1].is_none());
    }

    #[test]
    fn refuses_malformed_and_lying_answers() {
        let blob = object_id(ObjectKind::Blob, b"hi\n");
        let cases: Vec<Vec<u8>> = vec![
            answer(&blob, "blob", b"ho\n"),
            answer(&blob, "tag", b"hi\n"),
            answer(&blob, "tree", b"hi\n"),
            format!("{blob} blob 03\nhi\n\n").into_bytes(),
            format!("{blob} blob 3\nhi\n").into_bytes(),
            format!("{blob} blob 3\nhi\nX").into_bytes(),
            format!("{blob} blob 3 x\nhi\n\n").into_bytes(),
            format!("{blob} ambiguous\n").into_bytes(),
            {
                let mut extra = answer(&blob, "blob", b"hi\n");
                extra.push(b'x');
                extra
            },
            Vec::new(),
        ];
        for case in cases {
            let error = parse(&[blob], &case).expect_err(&String::from_utf8_lossy(&case));
            assert_eq!(error.code(), "corrupt");
        }
    }
}
