//! Script numbers: signed magnitude, little-endian, any length (post-Genesis), as the
//! SDK's `BigNumber.fromScriptNum` / `toScriptNum` read and write them.

use num_bigint::{BigInt, BigUint, Sign};
use num_traits::Zero;

/// Reads a script number; `minimal` refuses a non-minimal encoding (the SDK's
/// `requireMinimal`).
pub fn decode(b: &[u8], minimal: bool) -> Result<BigInt, String> {
    if b.is_empty() {
        return Ok(BigInt::zero());
    }
    let last = b[b.len() - 1];
    if minimal && last & 0x7f == 0 && (b.len() <= 1 || b[b.len() - 2] & 0x80 == 0) {
        return Err("non-minimally encoded script number".into());
    }
    let neg = last & 0x80 != 0;
    // Small numbers (the common case) without a heap magnitude.
    if b.len() <= 8 {
        let mut v: u64 = 0;
        for (i, x) in b.iter().enumerate() {
            let x = if i == b.len() - 1 { x & 0x7f } else { *x };
            v |= (x as u64) << (8 * i);
        }
        let m = BigInt::from(v);
        return Ok(if neg { -m } else { m });
    }
    let mut mag = b.to_vec();
    *mag.last_mut().unwrap() &= 0x7f;
    let m = BigInt::from_biguint(Sign::Plus, BigUint::from_bytes_le(&mag));
    Ok(if neg { -m } else { m })
}

/// Writes a script number in its minimal form.
pub fn encode(n: &BigInt) -> Vec<u8> {
    if n.is_zero() {
        return Vec::new();
    }
    let (sign, mut mag) = n.to_bytes_le();
    let top = *mag.last().unwrap();
    if top & 0x80 != 0 {
        mag.push(if sign == Sign::Minus { 0x80 } else { 0 });
    } else if sign == Sign::Minus {
        *mag.last_mut().unwrap() |= 0x80;
    }
    mag
}

/// Bytes of the magnitude (the SDK's `byteLength`: 0 for zero).
pub fn byte_len(n: &BigInt) -> u64 {
    n.bits().div_ceil(8)
}

pub fn from_i64(v: i64) -> Vec<u8> {
    encode(&BigInt::from(v))
}

/// The SDK's `minimallyEncode`.
pub fn minimally_encode(b: &[u8]) -> Vec<u8> {
    if b.is_empty() {
        return Vec::new();
    }
    let last = b[b.len() - 1];
    if last & 0x7f != 0 {
        return b.to_vec();
    }
    if b.len() == 1 {
        return Vec::new();
    }
    if b[b.len() - 2] & 0x80 != 0 {
        return b.to_vec();
    }
    let mut buf = b.to_vec();
    for i in (1..buf.len()).rev() {
        if buf[i - 1] != 0 {
            if buf[i - 1] & 0x80 != 0 {
                buf[i] = last;
                buf.truncate(i + 1);
            } else {
                buf[i - 1] |= last;
                buf.truncate(i);
            }
            return buf;
        }
    }
    Vec::new()
}

/// The SDK's `castToBool`: any non-zero byte, except a lone sign bit at the end.
pub fn cast_to_bool(v: &[u8]) -> bool {
    for (i, x) in v.iter().enumerate() {
        if *x != 0 {
            return !(i == v.len() - 1 && *x == 0x80);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_minimality() {
        for v in [-70000i64, -256, -255, -129, -128, -127, -1, 0, 1, 127, 128, 255, 256, 1 << 40, i64::MAX, i64::MIN + 1] {
            let e = from_i64(v);
            assert_eq!(decode(&e, true).unwrap(), BigInt::from(v), "{v}");
        }
        assert_eq!(from_i64(-1), vec![0x81]);
        assert_eq!(from_i64(128), vec![0x80, 0x00]);
        assert!(decode(&[0x00], true).is_err());
        assert!(decode(&[0x80], true).is_err());
        assert_eq!(decode(&[0x80], false).unwrap(), BigInt::zero());
        assert_eq!(decode(&[0x01, 0x00], false).unwrap(), BigInt::from(1));
        assert_eq!(minimally_encode(&[0x01, 0x00, 0x80]), vec![0x81]);
        assert_eq!(minimally_encode(&[0x80, 0x00, 0x00]), vec![0x80, 0x00]);
        assert!(!cast_to_bool(&[0, 0x80]));
        assert!(cast_to_bool(&[0x80, 0]));
    }
}
