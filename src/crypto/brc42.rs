//! BRC-42 child key derivation, as used by BRC-77 message signing.
//!
//! Both sides compute the same ECDH point `S = a·B = b·A`, then the tweak
//! `t = HMAC-SHA256(key = compressed(S), data = UTF-8(invoice))` reduced mod n.
//! The signer's child private key is `a + t`; a verifier who knows only the
//! signer's public key `A` computes the child public key `A + t·G`.
//! The BRC-77 `anyone` counterparty is the private key 1, whose public key is G,
//! so for it the shared point is simply the other party's public key.
use hmac::{Hmac, Mac};
use secp256k1::{PublicKey, Scalar, SecretKey, SECP256K1};
use sha2::Sha256;

/// Order of the secp256k1 group, big-endian.
const CURVE_ORDER: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
    0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
];

/// Derivation fails only when a tweak or result lands on zero or infinity,
/// which happens with negligible probability; callers still get a clean error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivationError;

impl std::fmt::Display for DerivationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BRC-42 derivation produced an invalid key")
    }
}

impl std::error::Error for DerivationError {}

/// The private key 1: the BRC-77 `anyone` counterparty.
pub fn anyone_private() -> SecretKey {
    let mut one = [0u8; 32];
    one[31] = 1;
    SecretKey::from_byte_array(one).expect("1 is a valid secret key")
}

/// The public key of `anyone`: the generator point G.
pub fn anyone_public() -> PublicKey {
    PublicKey::from_secret_key_global(&anyone_private())
}

/// Compressed ECDH point `counterparty · mine`, the HMAC key of BRC-42.
pub fn shared_point(mine: &SecretKey, counterparty: &PublicKey) -> Result<[u8; 33], DerivationError> {
    let point = counterparty
        .mul_tweak(SECP256K1, &Scalar::from(*mine))
        .map_err(|_| DerivationError)?;
    Ok(point.serialize())
}

/// HMAC output interpreted as an integer mod n. The HMAC is below 2^256 < 2n,
/// so at most one subtraction of n is needed.
pub fn reduce_mod_n(mut value: [u8; 32]) -> Scalar {
    if let Ok(scalar) = Scalar::from_be_bytes(value) {
        return scalar;
    }
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let diff = value[i] as i16 - CURVE_ORDER[i] as i16 - borrow;
        borrow = if diff < 0 { 1 } else { 0 };
        value[i] = (diff + (borrow << 8)) as u8;
    }
    Scalar::from_be_bytes(value).expect("value - n is below n")
}

/// The BRC-42 tweak for `invoice` from a shared point (HMAC-SHA256 mod n).
pub fn tweak(shared: &[u8; 33], invoice: &str) -> Scalar {
    let mut mac = Hmac::<Sha256>::new_from_slice(shared).expect("HMAC accepts any key length");
    mac.update(invoice.as_bytes());
    reduce_mod_n(mac.finalize().into_bytes().into())
}

/// Child private key of `mine` towards `counterparty` for `invoice`.
pub fn derive_child_private(
    mine: &SecretKey,
    counterparty: &PublicKey,
    invoice: &str,
) -> Result<SecretKey, DerivationError> {
    let t = tweak(&shared_point(mine, counterparty)?, invoice);
    mine.add_tweak(&t).map_err(|_| DerivationError)
}

/// Child public key of `theirs`, computed by the holder of `mine`, for `invoice`.
pub fn derive_child_public(
    theirs: &PublicKey,
    mine: &SecretKey,
    invoice: &str,
) -> Result<PublicKey, DerivationError> {
    let t = tweak(&shared_point(mine, theirs)?, invoice);
    theirs.add_exp_tweak(SECP256K1, &t).map_err(|_| DerivationError)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> SecretKey {
        SecretKey::from_byte_array([byte; 32]).unwrap()
    }

    #[test]
    fn private_and_public_derivations_agree() {
        let (alice, bob) = (key(7), key(9));
        let alice_pub = PublicKey::from_secret_key_global(&alice);
        let bob_pub = PublicKey::from_secret_key_global(&bob);
        let child = derive_child_private(&alice, &bob_pub, "2-test-1").unwrap();
        let seen_by_bob = derive_child_public(&alice_pub, &bob, "2-test-1").unwrap();
        assert_eq!(PublicKey::from_secret_key_global(&child), seen_by_bob);
        let other = derive_child_public(&alice_pub, &bob, "2-test-2").unwrap();
        assert_ne!(seen_by_bob, other);
    }

    #[test]
    fn anyone_shared_point_is_the_other_public_key() {
        let alice = key(3);
        let alice_pub = PublicKey::from_secret_key_global(&alice);
        assert_eq!(shared_point(&anyone_private(), &alice_pub).unwrap(), alice_pub.serialize());
        assert_eq!(shared_point(&alice, &anyone_public()).unwrap(), alice_pub.serialize());
    }

    #[test]
    fn reduction_subtracts_the_order_once() {
        let all_ones = [0xffu8; 32];
        // 2^256 - 1 - n = 0x14551231950b75fc4402da1732fc9bebe
        let expected = hex::decode("000000000000000000000000000000014551231950b75fc4402da1732fc9bebe").unwrap();
        assert_eq!(reduce_mod_n(all_ones).to_be_bytes().to_vec(), expected);
        let mut n = CURVE_ORDER;
        assert_eq!(reduce_mod_n(n), Scalar::ZERO);
        n[31] = 0x40; // n - 1 is already in range
        assert_eq!(reduce_mod_n(n).to_be_bytes(), n);
    }
}
