//! Counterparties as `ProtoWallet` accepts them: `self`, `anyone` (the private
//! key 1, whose public key is G) or a public key in hex, parsed with the rules
//! of `@bsv/sdk` 2.1.0 (`PublicKey.fromString` -> `Point.fromDER`).
use secp256k1::PublicKey;

use super::WalletError;
use crate::crypto::brc42;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counterparty {
    /// The wallet's own identity key.
    Myself,
    /// The public key G of the private key 1.
    Anyone,
    Key(PublicKey),
}

/// Field prime p of secp256k1, big-endian.
const FIELD_PRIME: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xfc, 0x2f,
];

/// The SDK reduces coordinates modulo p before its on-curve check, so a
/// coordinate in [p, 2^256) names the same point as its reduction. Below
/// 2^256 < 2p one subtraction is enough.
fn reduce_mod_p(coord: &mut [u8]) {
    if coord[..] < FIELD_PRIME[..] {
        return;
    }
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let diff = coord[i] as i16 - FIELD_PRIME[i] as i16 - borrow;
        borrow = if diff < 0 { 1 } else { 0 };
        coord[i] = (diff + (borrow << 8)) as u8;
    }
}

/// Hex as the SDK's `toArray(str, 'hex')` reads it: any case, and an odd
/// length gets a leading zero.
fn sdk_hex(s: &str) -> Result<Vec<u8>, WalletError> {
    if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(WalletError::new("Invalid hex string"));
    }
    let padded;
    let even = if s.len() % 2 == 1 {
        padded = format!("0{s}");
        padded.as_str()
    } else {
        s
    };
    Ok(hex::decode(even).expect("checked hex digits"))
}

/// Parses a public key the way `PublicKey.fromString` does: compressed
/// (02/03), uncompressed (04) or hybrid (06/07, parity checked on the given y).
pub fn parse_public_key(s: &str) -> Result<PublicKey, WalletError> {
    let bytes = sdk_hex(s)?;
    let invalid = || WalletError::new("Invalid point");
    match bytes.first() {
        Some(0x04 | 0x06 | 0x07) if bytes.len() == 65 => {
            let y_odd = bytes[64] % 2 == 1;
            if (bytes[0] == 0x06 && y_odd) || (bytes[0] == 0x07 && !y_odd) {
                return Err(WalletError::new("Point string value is wrong length"));
            }
            let mut uncompressed = [0u8; 65];
            uncompressed[0] = 0x04;
            uncompressed[1..].copy_from_slice(&bytes[1..]);
            reduce_mod_p(&mut uncompressed[1..33]);
            reduce_mod_p(&mut uncompressed[33..65]);
            PublicKey::from_slice(&uncompressed).map_err(|_| invalid())
        }
        Some(0x02 | 0x03) if bytes.len() == 33 => {
            let mut compressed = [0u8; 33];
            compressed.copy_from_slice(&bytes);
            reduce_mod_p(&mut compressed[1..]);
            PublicKey::from_slice(&compressed).map_err(|_| invalid())
        }
        _ => Err(WalletError::new("Unknown point format")),
    }
}

impl Counterparty {
    /// `self`, `anyone` (exact, lower case) or a public key.
    pub fn parse(s: &str) -> Result<Counterparty, WalletError> {
        match s {
            "self" => Ok(Counterparty::Myself),
            "anyone" => Ok(Counterparty::Anyone),
            _ => parse_public_key(s).map(Counterparty::Key),
        }
    }

    /// The counterparty's public key, given the wallet's identity key.
    pub fn public_key(&self, identity: &PublicKey) -> PublicKey {
        match self {
            Counterparty::Myself => *identity,
            Counterparty::Anyone => brc42::anyone_public(),
            Counterparty::Key(k) => *k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: &str = "0279be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798";

    #[test]
    fn accepts_the_sdk_formats() {
        let g = parse_public_key(G).unwrap();
        assert_eq!(g, brc42::anyone_public());
        assert_eq!(parse_public_key(&G.to_uppercase()).unwrap(), g);
        let full = hex::encode(g.serialize_uncompressed());
        assert_eq!(parse_public_key(&full).unwrap(), g);
        // G's y is even: hybrid 06 is accepted, 07 is refused.
        assert_eq!(parse_public_key(&format!("06{}", &full[2..])).unwrap(), g);
        assert!(parse_public_key(&format!("07{}", &full[2..])).is_err());
    }

    #[test]
    fn refuses_malformed_keys() {
        assert_eq!(parse_public_key("").unwrap_err().to_string(), "Unknown point format");
        assert_eq!(parse_public_key("zz").unwrap_err().to_string(), "Invalid hex string");
        assert_eq!(parse_public_key(&G[..64]).unwrap_err().to_string(), "Unknown point format");
        // x = 5 has no square root of x^3 + 7 on secp256k1.
        let not_on_curve = format!("02{:064x}", 5);
        assert_eq!(parse_public_key(&not_on_curve).unwrap_err().to_string(), "Invalid point");
        assert!(Counterparty::parse("Self").is_err());
    }

    #[test]
    fn odd_length_hex_gets_a_leading_zero() {
        // "279be..." (65 digits) reads as 02 79 be ...
        assert_eq!(parse_public_key(&G[1..]).unwrap(), brc42::anyone_public());
    }

    #[test]
    fn coordinates_above_p_are_reduced() {
        // x + p for a small valid x: x = 1 (1 + 7 = 8 is a square mod p).
        let mut x = [0u8; 32];
        x[31] = 1;
        let base = PublicKey::from_slice(&[&[0x02u8][..], &x[..]].concat()).unwrap();
        let mut above = FIELD_PRIME;
        above[31] = 0x30; // p + 1
        let shifted = format!("02{}", hex::encode(above));
        assert_eq!(parse_public_key(&shifted).unwrap(), base);
    }
}
