//! The BSV script interpreter the native verifier runs (post-Genesis rules, as
//! `@bsv/sdk`'s `Spend` applies them when `Transaction.verify` calls it without
//! verification flags).
//!
//! - this module: scripts as the SDK splits them into chunks, and the serializations the
//!   signature hash reads (a chunk list written back, `findAndDelete`, the removal of
//!   OP_CODESEPARATOR);
//! - [`num`]: script numbers (arbitrary size, signed magnitude, little-endian);
//! - [`sighash`]: the FORKID (BIP143-style) and original signature digests;
//! - [`interp`]: the interpreter itself, with its memory bound (`Limited`) and an
//!   operation budget.
//!
//! The SDK is the reference: where its reading of a script differs from a node's, the
//! interpreter follows the SDK, because the verdict must be the same whichever engine
//! produced it (docs/native-verify.md lists these points).

pub mod interp;
pub mod num;
pub mod sighash;

pub const OP_0: u8 = 0x00;
pub const OP_PUSHDATA1: u8 = 0x4c;
pub const OP_PUSHDATA2: u8 = 0x4d;
pub const OP_PUSHDATA4: u8 = 0x4e;
pub const OP_1NEGATE: u8 = 0x4f;
pub const OP_1: u8 = 0x51;
pub const OP_16: u8 = 0x60;
pub const OP_IF: u8 = 0x63;
pub const OP_NOTIF: u8 = 0x64;
pub const OP_VERIF: u8 = 0x65;
pub const OP_VERNOTIF: u8 = 0x66;
pub const OP_ENDIF: u8 = 0x68;
pub const OP_RETURN: u8 = 0x6a;
pub const OP_CODESEPARATOR: u8 = 0xab;

/// One chunk: an opcode, and the bytes it carries (pushes; OP_RETURN outside a
/// conditional carries the rest of the script, as the SDK's parser reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    pub op: u8,
    pub data: Option<&'a [u8]>,
    /// A push whose length runs past the end of the script (an error when reached).
    pub invalid_length: bool,
}

/// Splits a script into chunks exactly as the SDK's `Script.parseChunks` does.
pub fn parse(bytes: &[u8]) -> Vec<Chunk<'_>> {
    let mut chunks = Vec::new();
    let len = bytes.len();
    let mut pos = 0usize;
    // The SDK counts conditionals without a floor: an early OP_ENDIF makes it negative.
    let mut depth: i64 = 0;
    while pos < len {
        let op = bytes[pos];
        pos += 1;
        if op == OP_RETURN && depth == 0 {
            chunks.push(Chunk { op, data: Some(&bytes[pos..]), invalid_length: false });
            break;
        }
        if matches!(op, OP_IF | OP_NOTIF | OP_VERIF | OP_VERNOTIF) {
            depth += 1;
        } else if op == OP_ENDIF {
            depth -= 1;
        }
        let (want, has_length) = match op {
            1..=0x4b => (op as usize, true),
            OP_PUSHDATA1 => {
                let has = pos < len;
                let n = if has { bytes[pos] as usize } else { 0 };
                if has {
                    pos += 1;
                }
                (n, has)
            }
            OP_PUSHDATA2 => {
                let has = pos + 1 < len;
                let b0 = bytes.get(pos).copied().unwrap_or(0) as usize;
                let b1 = bytes.get(pos + 1).copied().unwrap_or(0) as usize;
                pos = (pos + 2).min(len);
                (b0 | (b1 << 8), has)
            }
            OP_PUSHDATA4 => {
                let has = pos + 3 < len;
                let mut n = 0usize;
                for i in 0..4 {
                    n |= (bytes.get(pos + i).copied().unwrap_or(0) as usize) << (8 * i);
                }
                pos = (pos + 4).min(len);
                (n, has)
            }
            _ => {
                chunks.push(Chunk { op, data: None, invalid_length: false });
                continue;
            }
        };
        let end = pos.saturating_add(want).min(len);
        chunks.push(Chunk { op, data: Some(&bytes[pos..end]), invalid_length: !has_length || end - pos != want });
        pos = end;
    }
    chunks
}

/// Writes chunks back (the SDK's `serializeChunksToBytes`): a push keeps its opcode
/// and writes the length of the bytes it actually holds.
pub fn serialize(chunks: &[Chunk<'_>], out: &mut Vec<u8>) {
    for c in chunks {
        out.push(c.op);
        let Some(d) = c.data else { continue };
        match c.op {
            OP_RETURN => {
                out.extend_from_slice(d);
                break;
            }
            0..=0x4b => {}
            OP_PUSHDATA1 => out.push(d.len() as u8),
            OP_PUSHDATA2 => out.extend_from_slice(&(d.len() as u16).to_le_bytes()),
            OP_PUSHDATA4 => out.extend_from_slice(&(d.len() as u32).to_le_bytes()),
            _ => continue,
        }
        out.extend_from_slice(d);
    }
}

/// The opcode the SDK's `writeBin` uses to push `data`.
pub fn push_op(len: usize) -> u8 {
    match len {
        0 => OP_0,
        1..=0x4b => len as u8,
        0x4c..=0xff => OP_PUSHDATA1,
        0x100..=0xffff => OP_PUSHDATA2,
        _ => OP_PUSHDATA4,
    }
}

/// Removes every chunk that is the canonical push of `sig` (the SDK's
/// `findAndDelete(new Script().writeBin(sig))`; an empty `sig` removes every OP_0).
pub fn find_and_delete(chunks: &mut Vec<Chunk<'_>>, sig: &[u8]) {
    let op = push_op(sig.len());
    chunks.retain(|c| !(c.op == op && c.data.unwrap_or(&[]) == sig));
}

/// The SDK's `Script.removeOpcodeBytes(bytes, OP_CODESEPARATOR)`: walks the bytes as
/// pushes and opcodes (OP_RETURN is an opcode here) and drops the separators.
pub fn remove_codeseparators(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let len = bytes.len();
    let mut pos = 0usize;
    while pos < len {
        let start = pos;
        let op = bytes[pos];
        pos += 1;
        let mut data_start = pos;
        let mut data_len = 0usize;
        match op {
            1..=0x4b => data_len = op as usize,
            OP_PUSHDATA1 => {
                if pos < len {
                    data_len = bytes[pos] as usize;
                    pos += 1;
                }
                data_start = pos;
            }
            OP_PUSHDATA2 => {
                if pos + 1 < len {
                    data_len = bytes[pos] as usize | (bytes[pos + 1] as usize) << 8;
                }
                pos = (pos + 2).min(len);
                data_start = pos;
            }
            OP_PUSHDATA4 => {
                if pos + 3 < len {
                    data_len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
                }
                pos = (pos + 4).min(len);
                data_start = pos;
            }
            _ => {}
        }
        let end = data_start.saturating_add(data_len).min(len);
        if op != OP_CODESEPARATOR {
            out.extend_from_slice(&bytes[start..end]);
        }
        pos = end;
    }
    out
}

/// The SDK's `isPushOnly`: every opcode at most OP_16.
pub fn is_push_only(chunks: &[Chunk<'_>]) -> bool {
    chunks.iter().all(|c| c.op <= OP_16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_round_trip_and_truncated_pushes_are_marked() {
        let s = [0x76, 0xa9, 0x02, 0xaa, 0xbb, 0x88, 0xac];
        let c = parse(&s);
        assert_eq!(c.len(), 5);
        let mut out = Vec::new();
        serialize(&c, &mut out);
        assert_eq!(out, s);
        let t = parse(&[0x05, 0x01]);
        assert!(t[0].invalid_length);
        assert_eq!(parse(&[0x4c])[0], Chunk { op: 0x4c, data: Some(&[]), invalid_length: true });
        // OP_RETURN outside a conditional takes the rest; inside one it is an opcode.
        assert_eq!(parse(&[0x6a, 0x63, 0x01]).len(), 1);
        assert_eq!(parse(&[0x63, 0x6a, 0x68]).len(), 3);
    }

    #[test]
    fn find_and_delete_and_codeseparators() {
        let s = [0x02, 0xaa, 0xbb, 0x00, 0xab, 0x02, 0xaa, 0xbb];
        let mut c = parse(&s);
        find_and_delete(&mut c, &[0xaa, 0xbb]);
        assert_eq!(c.len(), 2);
        find_and_delete(&mut c, &[]);
        assert_eq!(c.len(), 1);
        assert_eq!(remove_codeseparators(&s), vec![0x02, 0xaa, 0xbb, 0x00, 0x02, 0xaa, 0xbb]);
    }
}
