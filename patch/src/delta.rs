//! Git's pack delta format, as a `delta N` binary hunk carries it: the source and target sizes
//! as varints, then copy (from the source) and insert (literal bytes) opcodes. Every copy is
//! checked against the source and every write against the declared target size.

/// Applies `delta` to `source`; the result is at most `max` bytes.
pub(crate) fn apply_delta(source: &[u8], delta: &[u8], max: u64) -> Result<Vec<u8>, String> {
    let mut pos = 0;
    let source_size = varint(delta, &mut pos)?;
    let target_size = varint(delta, &mut pos)?;
    if source_size != source.len() as u64 {
        return Err(format!(
            "the delta is for a {source_size}-byte file but the pre-image has {} bytes",
            source.len()
        ));
    }
    if target_size > max {
        return Err(format!(
            "the delta builds {target_size} bytes, more than the limit of {max}"
        ));
    }
    let target_size = usize::try_from(target_size).map_err(|_| "the target size is too large")?;
    let mut out = Vec::with_capacity(target_size);
    while let Some(&cmd) = delta.get(pos) {
        pos += 1;
        let piece = if cmd & 0x80 != 0 {
            let (offset, size) = copy_args(cmd, delta, &mut pos)?;
            offset
                .checked_add(size)
                .and_then(|end| source.get(offset..end))
                .ok_or("a copy reads past the end of the source")?
        } else if cmd != 0 {
            let end = pos + usize::from(cmd);
            let bytes = delta
                .get(pos..end)
                .ok_or("an insert runs past the end of the delta")?;
            pos = end;
            bytes
        } else {
            return Err("the reserved opcode 0".into());
        };
        if out.len() + piece.len() > target_size {
            return Err("the delta writes more than its declared target size".into());
        }
        out.extend_from_slice(piece);
    }
    if out.len() != target_size {
        return Err("the delta writes less than its declared target size".into());
    }
    Ok(out)
}

/// A size: 7 bits a byte, least significant first, high bit set when more follow.
fn varint(data: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut value: u64 = 0;
    let mut shift = 0;
    loop {
        let byte = *data.get(*pos).ok_or("the delta ends inside its header")?;
        *pos += 1;
        if shift >= 64 || (shift > 57 && u64::from(byte & 0x7f) >> (64 - shift) != 0) {
            return Err("a size in the delta overflows".into());
        }
        value |= u64::from(byte & 0x7f) << shift;
        shift += 7;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// A copy's offset (bits 0-3 say which of 4 bytes follow) and size (bits 4-6, 3 bytes;
/// 0 means 0x10000).
fn copy_args(cmd: u8, delta: &[u8], pos: &mut usize) -> Result<(usize, usize), String> {
    let mut fields = [0u32; 2];
    for (bit, field, shift) in (0..7).map(|b| (b, usize::from(b >= 4), 8 * (b % 4))) {
        if cmd & (1 << bit) != 0 {
            let byte = *delta
                .get(*pos)
                .ok_or("a copy runs past the end of the delta")?;
            *pos += 1;
            fields[field] |= u32::from(byte) << shift;
        }
    }
    let size = if fields[1] == 0 { 0x10000 } else { fields[1] };
    let as_usize = |v: u32| usize::try_from(v).map_err(|_| "a copy too large".to_string());
    Ok((as_usize(fields[0])?, as_usize(size)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_and_inserts() {
        // source 5, target 8: copy 0..3 ("abc"), insert "XYZ", copy 3..5 ("de")
        let delta = [5, 8, 0x91, 0, 3, 3, b'X', b'Y', b'Z', 0x91, 3, 2];
        assert_eq!(apply_delta(b"abcde", &delta, 100).unwrap(), b"abcXYZde");
    }

    #[test]
    fn refuses_bad_deltas() {
        let cases: &[&[u8]] = &[
            &[5, 8, 0x91, 4, 3], // copy past the source
            &[4, 3, 0x90, 3],    // wrong source size
            &[5, 2, 0x91, 0, 3], // writes more than declared
            &[5, 4, 0x91, 0, 3], // writes less than declared
            &[5, 1, 0],          // reserved opcode
            &[5, 3, 4, b'a'],    // insert past the end
            &[
                5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1,
            ], // overflow
            &[5],                // truncated header
            &[5, 3, 0x91, 0xff], // truncated copy
        ];
        for delta in cases {
            assert!(apply_delta(b"abcde", delta, 100).is_err(), "{delta:?}");
        }
        assert!(apply_delta(b"abcde", &[5, 101], 100).is_err());
    }
}
