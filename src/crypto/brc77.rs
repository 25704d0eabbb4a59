//! BRC-77 message signatures, restricted to the `anyone` verifier that
//! BRC-192 §1 requires for signed packets.
//!
//! Wire layout of a signature (as produced by `SignedMessage.sign` in @bsv/sdk):
//! `42 42 33 01` (version) || signer identity key (33 bytes, compressed)
//! || recipient (`00` = anyone, else a 33-byte key) || key ID (32 bytes)
//! || DER-encoded ECDSA signature over SHA-256(message).
//! The signing key is the BRC-42 child of the identity towards the recipient
//! for invoice `2-message signing-<base64(keyID)>`.
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use secp256k1::{ecdsa, Message, PublicKey, SecretKey};
use sha2::{Digest, Sha256};

use super::brc42;

const VERSION: [u8; 4] = [0x42, 0x42, 0x33, 0x01];
const ANYONE_MARKER: u8 = 0x00;
const KEY_ID_LEN: usize = 32;
const HEADER_LEN: usize = 4 + 33 + 1 + KEY_ID_LEN;
/// A DER ECDSA signature is at most 72 bytes; anything longer is rejected
/// before parsing so a hostile input cannot make us do work.
const MAX_DER_LEN: usize = 72;

/// A verified signer: a valid compressed secp256k1 public key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity(pub PublicKey);

impl Identity {
    /// BRC-192 `Identity`: 66 lowercase hex characters.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0.serialize())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Brc77Error {
    /// Too short, too long, or a field that does not parse.
    Malformed(&'static str),
    /// The first four bytes are not the BRC-77 version we implement.
    Version,
    /// The signature names a specific recipient; packets must use `anyone`.
    NotAnyone,
    /// Well-formed, but the ECDSA check fails.
    BadSignature,
    /// Key derivation hit an invalid key (negligible probability).
    Derivation,
}

impl std::fmt::Display for Brc77Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Brc77Error::Malformed(what) => write!(f, "malformed BRC-77 signature: {what}"),
            Brc77Error::Version => f.write_str("unknown BRC-77 signature version"),
            Brc77Error::NotAnyone => f.write_str("BRC-77 signature is not verifiable by anyone"),
            Brc77Error::BadSignature => f.write_str("BRC-77 signature does not verify"),
            Brc77Error::Derivation => f.write_str("BRC-42 derivation failed"),
        }
    }
}

impl std::error::Error for Brc77Error {}

fn invoice(key_id: &[u8; KEY_ID_LEN]) -> String {
    format!("2-message signing-{}", STANDARD.encode(key_id))
}

fn message_digest(message: &[u8]) -> Message {
    Message::from_digest(Sha256::digest(message).into())
}

/// Signs `message` for the `anyone` verifier with a fresh random key ID.
pub fn sign_brc77(identity: &SecretKey, message: &[u8]) -> Vec<u8> {
    loop {
        let key_id: [u8; KEY_ID_LEN] = secp256k1::rand::random();
        // Derivation fails only if the child key is zero (probability ~2^-256);
        // a new key ID then gives an independent attempt.
        if let Ok(sig) = sign_brc77_with_key_id(identity, message, &key_id) {
            return sig;
        }
    }
}

/// Deterministic variant (fixed key ID) for test vectors. ECDSA nonces are
/// RFC 6979, so the same inputs give the same bytes.
pub fn sign_brc77_with_key_id(
    identity: &SecretKey,
    message: &[u8],
    key_id: &[u8; KEY_ID_LEN],
) -> Result<Vec<u8>, Brc77Error> {
    let child = brc42::derive_child_private(identity, &brc42::anyone_public(), &invoice(key_id))
        .map_err(|_| Brc77Error::Derivation)?;
    // libsecp256k1 always produces low-S signatures, like the SDK's default.
    let der = child.sign_ecdsa(message_digest(message)).serialize_der();
    let sender = PublicKey::from_secret_key_global(identity).serialize();
    let mut out = Vec::with_capacity(HEADER_LEN + der.len());
    out.extend_from_slice(&VERSION);
    out.extend_from_slice(&sender);
    out.push(ANYONE_MARKER);
    out.extend_from_slice(key_id);
    out.extend_from_slice(&der);
    Ok(out)
}

/// Verifies an `anyone` BRC-77 signature and returns the signer's identity.
/// High-S signatures are accepted (normalized) because the SDK's verifier
/// accepts them too; the protocol's digests never cover the signature bytes.
pub fn verify_brc77(message: &[u8], sig: &[u8]) -> Result<Identity, Brc77Error> {
    if sig.len() < 4 {
        return Err(Brc77Error::Malformed("too short"));
    }
    if sig[..4] != VERSION {
        return Err(Brc77Error::Version);
    }
    if sig.len() < 4 + 33 + 1 {
        return Err(Brc77Error::Malformed("too short"));
    }
    let signer_bytes = &sig[4..37];
    if signer_bytes[0] != 0x02 && signer_bytes[0] != 0x03 {
        return Err(Brc77Error::Malformed("signer key is not compressed"));
    }
    let signer =
        PublicKey::from_slice(signer_bytes).map_err(|_| Brc77Error::Malformed("signer key"))?;
    if sig[37] != ANYONE_MARKER {
        return Err(Brc77Error::NotAnyone);
    }
    if sig.len() < HEADER_LEN + 8 {
        return Err(Brc77Error::Malformed("too short"));
    }
    if sig.len() > HEADER_LEN + MAX_DER_LEN {
        return Err(Brc77Error::Malformed("too long"));
    }
    let key_id: &[u8; KEY_ID_LEN] = sig[38..HEADER_LEN].try_into().expect("length checked");
    let mut signature = ecdsa::Signature::from_der(&sig[HEADER_LEN..])
        .map_err(|_| Brc77Error::Malformed("DER signature"))?;
    signature.normalize_s();
    let child = brc42::derive_child_public(&signer, &brc42::anyone_private(), &invoice(key_id))
        .map_err(|_| Brc77Error::Derivation)?;
    child
        .verify(secp256k1::SECP256K1, message_digest(message), &signature)
        .map_err(|_| Brc77Error::BadSignature)?;
    Ok(Identity(signer))
}
