//! BRC-77 (`anyone` verifier) signatures: round trip, tampering, and
//! interoperability with @bsv/sdk vectors from tests/fixtures/brc77-sdk-vectors.js.
use overlay_lookup_live::manifest::{sign_brc77, sign_brc77_with_key_id, verify_brc77, Brc77Error};
use secp256k1::{PublicKey, SecretKey};
use serde_json::Value;

const SDK_VECTORS: &str = include_str!("fixtures/brc77-sdk-vectors.json");

fn vectors(kind: &str) -> Vec<Value> {
    let all: Value = serde_json::from_str(SDK_VECTORS).unwrap();
    all[kind].as_array().unwrap().clone()
}

fn h(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap()).unwrap()
}

fn random_key() -> SecretKey {
    SecretKey::new(&mut secp256k1::rand::rng())
}

#[test]
fn round_trip_returns_the_signer_identity() {
    let key = random_key();
    let identity = PublicKey::from_secret_key_global(&key);
    for message in [&b""[..], b"x", &[0u8; 5000][..]] {
        let sig = sign_brc77(&key, message);
        let signer = verify_brc77(message, &sig).expect("own signature verifies");
        assert_eq!(signer.0, identity);
        assert_eq!(signer.to_hex(), hex::encode(identity.serialize()));
    }
}

#[test]
fn key_ids_are_random_so_signatures_differ() {
    let key = random_key();
    let (a, b) = (sign_brc77(&key, b"m"), sign_brc77(&key, b"m"));
    assert_ne!(a[38..70], b[38..70]);
    assert!(verify_brc77(b"m", &a).is_ok() && verify_brc77(b"m", &b).is_ok());
}

#[test]
fn tampered_message_fails() {
    let key = random_key();
    let sig = sign_brc77(&key, b"hello world");
    assert_eq!(verify_brc77(b"hello worle", &sig), Err(Brc77Error::BadSignature));
    assert_eq!(verify_brc77(b"hello world!", &sig), Err(Brc77Error::BadSignature));
    assert_eq!(verify_brc77(b"", &sig), Err(Brc77Error::BadSignature));
}

#[test]
fn every_single_byte_change_of_the_signature_fails() {
    let key = random_key();
    let message = b"BRC-OUTPUT/1/capabilities\0{}";
    let sig = sign_brc77(&key, message);
    for i in 0..sig.len() {
        for flip in [0x01u8, 0x80] {
            let mut bad = sig.clone();
            bad[i] ^= flip;
            let result = verify_brc77(message, &bad);
            assert!(result.is_err(), "byte {i} flip {flip:#x} accepted");
            if i == 37 {
                assert_eq!(result, Err(Brc77Error::NotAnyone));
            }
            if (38..70).contains(&i) {
                assert_eq!(result, Err(Brc77Error::BadSignature), "key ID byte {i}");
            }
        }
    }
}

#[test]
fn truncated_or_extended_signatures_are_clean_errors() {
    let key = random_key();
    let sig = sign_brc77(&key, b"m");
    for len in 0..sig.len() {
        assert!(verify_brc77(b"m", &sig[..len]).is_err(), "prefix of {len} bytes accepted");
    }
    let mut longer = sig.clone();
    longer.push(0);
    assert!(matches!(verify_brc77(b"m", &longer), Err(Brc77Error::Malformed(_))));
    assert_eq!(verify_brc77(b"m", &[0x42, 0x42, 0x33, 0x02]), Err(Brc77Error::Version));
    assert!(verify_brc77(b"m", &[0xff; 200]).is_err());
}

#[test]
fn a_specific_recipient_is_refused() {
    // A signature addressed to a particular verifier is not a packet signature.
    let key = random_key();
    let mut sig = sign_brc77(&key, b"m");
    let recipient = PublicKey::from_secret_key_global(&random_key()).serialize();
    sig.splice(37..38, recipient);
    assert_eq!(verify_brc77(b"m", &sig), Err(Brc77Error::NotAnyone));
}

#[test]
fn sdk_signatures_verify_in_rust() {
    let list = vectors("random");
    assert!(list.len() >= 9);
    for v in list {
        let signer = verify_brc77(&h(&v["message"]), &h(&v["signature"]))
            .unwrap_or_else(|e| panic!("SDK vector {v} rejected: {e}"));
        assert_eq!(signer.to_hex(), v["identity"].as_str().unwrap());
        let mut other_message = h(&v["message"]);
        other_message.push(b'!');
        assert!(verify_brc77(&other_message, &h(&v["signature"])).is_err());
    }
}

#[test]
fn fixed_key_id_signatures_match_the_sdk_byte_for_byte() {
    // Same BRC-42 child key and RFC 6979 nonces on both sides.
    for v in vectors("fixedKeyId") {
        let key = SecretKey::from_byte_array(h(&v["privateKey"]).try_into().unwrap()).unwrap();
        let key_id: [u8; 32] = h(&v["keyId"]).try_into().unwrap();
        let ours = sign_brc77_with_key_id(&key, &h(&v["message"]), &key_id).unwrap();
        assert_eq!(hex::encode(&ours), v["signature"].as_str().unwrap());
        assert!(verify_brc77(&h(&v["message"]), &ours).is_ok());
    }
}

/// n - s for a 32-byte big-endian s (0 < s < n).
fn negate_mod_n(s: &[u8]) -> [u8; 32] {
    const N: [u8; 32] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
        0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x41,
    ];
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = N[i] as i16 - s[i] as i16 - borrow;
        borrow = i16::from(d < 0);
        out[i] = (d + (borrow << 8)) as u8;
    }
    out
}

#[test]
fn high_s_form_of_a_valid_signature_is_accepted() {
    // The SDK's verifier accepts either S; so do we (the signature bytes are
    // never part of a digest, so malleability does not matter here).
    let key = random_key();
    let sig = sign_brc77(&key, b"m");
    let low = secp256k1::ecdsa::Signature::from_der(&sig[70..]).unwrap().serialize_compact();
    let mut high = low;
    high[32..].copy_from_slice(&negate_mod_n(&low[32..]));
    let high_der = secp256k1::ecdsa::Signature::from_compact(&high).unwrap().serialize_der();
    let mut variant = sig[..70].to_vec();
    variant.extend_from_slice(&high_der);
    assert_ne!(variant, sig);
    assert_eq!(verify_brc77(b"m", &variant).unwrap().0, PublicKey::from_secret_key_global(&key));
    assert!(verify_brc77(b"n", &variant).is_err());
}
