//! Parsing `git cat-file` batch output (the format of `--batch`, and of `--batch-command`'s
//! `contents`) strictly, against the ids that were asked for, one answer at a time as it
//! arrives.
//!
//! Every answer must echo the requested id, name a kind sf stores, declare a size the bytes
//! actually hold and end with a newline; each body is re-hashed, because replace refs, lazy
//! fetch or a tampered object file could make Git answer with other bytes than the id names.

use sf_contracts::git_object::{ObjectId, ObjectKind, object_id};
use sf_contracts::{ObjectStoreError, StoredObject};

use crate::errors::corrupt;

/// The longest header line accepted: 40 hex, a kind and a decimal size fit well within it.
const HEADER_MAX_BYTES: usize = 128;

/// Parses the answers to `ids` (asked in this order, each once) from a complete `output`:
/// every answer whole and nothing after the last.
#[cfg(test)]
pub(crate) fn parse(
    ids: &[ObjectId],
    output: &[u8],
) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
    let mut rest = output;
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        let Some((answer, used)) = parse_next(id, rest)? else {
            return Err(corrupt(format!(
                "git cat-file answer for {id}: the output ends inside it"
            )));
        };
        answers.push(answer);
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return Err(corrupt(format!(
            "git cat-file wrote {} bytes after the last answer",
            rest.len()
        )));
    }
    Ok(answers)
}

/// Parses the answer for `id` from the front of `input`, which may hold only part of it (the
/// output of a process still writing): `None` while the answer is incomplete, otherwise the
/// answer and how many bytes of `input` it took. What is there is checked as soon as it is
/// there, so a malformed header fails without waiting for a body.
pub(crate) fn parse_next(
    id: &ObjectId,
    input: &[u8],
) -> Result<Option<(Option<StoredObject>, usize)>, ObjectStoreError> {
    let malformed = |why: &str| corrupt(format!("git cat-file answer for {id}: {why}"));
    let window = &input[..input.len().min(HEADER_MAX_BYTES)];
    let Some(newline) = window.iter().position(|&b| b == b'\n') else {
        if input.len() >= HEADER_MAX_BYTES {
            return Err(malformed("no header line"));
        }
        return Ok(None);
    };
    let header =
        std::str::from_utf8(&input[..newline]).map_err(|_| malformed("header is not text"))?;
    let body_at = newline + 1;
    let mut fields = header.split(' ');
    let echoed = fields.next().unwrap_or_default();
    if echoed != id.to_hex() {
        return Err(malformed("answer names another object"));
    }
    let (kind, size) = match (fields.next(), fields.next(), fields.next()) {
        (Some("missing"), None, None) => return Ok(Some((None, body_at))),
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
    let end = body_at
        .checked_add(size)
        .ok_or_else(|| malformed("size is too large"))?;
    // The body and the newline after it.
    if input.len() <= end {
        return Ok(None);
    }
    if input[end] != b'\n' {
        return Err(malformed("body is not followed by a newline"));
    }
    let body = &input[body_at..end];
    if object_id(kind, body) != *id {
        return Err(malformed("the bytes do not hash to the requested id"));
    }
    Ok(Some((
        Some(StoredObject {
            kind,
            body: body.to_vec(),
        }),
        end + 1,
    )))
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
    fn an_answer_is_incomplete_until_its_last_byte() {
        let blob = object_id(ObjectKind::Blob, b"hi\n");
        let missing = ObjectId::from_bytes([7; 20]);
        let whole = answer(&blob, "blob", b"hi\n");
        for end in 0..whole.len() {
            assert_eq!(
                parse_next(&blob, &whole[..end]).expect("a prefix is no error"),
                None
            );
        }
        let mut two = whole.clone();
        two.extend_from_slice(format!("{missing} missing\n").as_bytes());
        let (first, used) = parse_next(&blob, &two).expect("parses").expect("complete");
        assert_eq!(used, whole.len());
        assert_eq!(first.expect("present").body, b"hi\n");
        assert_eq!(
            parse_next(&missing, &two[used..]).expect("parses"),
            Some((None, two.len() - used))
        );
        // A header that names another object fails before its body arrives.
        assert_eq!(
            parse_next(&missing, &whole[..49])
                .expect_err("another id")
                .code(),
            "corrupt"
        );
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
            format!("{blob} blob 3\nh").into_bytes(),
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
