use super::*;

fn wallet(byte: u8) -> Wallet {
    Wallet::new(SecretKey::from_byte_array([byte; 32]).unwrap())
}

fn hex_key(w: &Wallet) -> String {
    hex::encode(w.identity_key().serialize())
}

const SIG: &str = "auth message signature";

fn key<'a>(counterparty: &'a str) -> KeyRef<'a> {
    KeyRef { level: 2.0, protocol: SIG, key_id: "nonce-a nonce-b", counterparty }
}

/// Values computed with @bsv/sdk 2.1.0's ProtoWallet for root keys 0x11.. and 0x22..
/// (the signatures agree byte for byte because both use RFC 6979 nonces).
#[test]
fn matches_protowallet_vectors() {
    let (a, b) = (wallet(0x11), wallet(0x22));
    let b_hex = hex_key(&b);
    assert_eq!(b_hex, "02466d7fcae563e5cb09a0d1870bb580344804617879a14949cf22285f1bae3f27");
    let data = [1u8, 2, 3, 4];
    let hex_of = |k: PublicKey| hex::encode(k.serialize());
    assert_eq!(
        hex_of(a.derive_public_key(&key(&b_hex), false).unwrap()),
        "02bdf514faffbc4df8bf76c7e0d9c5a6d18bcc4f8416c15fed0d994affb76c0a27"
    );
    assert_eq!(
        hex_of(a.derive_public_key(&key(&b_hex), true).unwrap()),
        "020c2b84c3839da63ccc8be4ef008142292b779ff515aabbd1abecb46a76d7c2c3"
    );
    assert_eq!(
        hex::encode(a.create_signature(&key(&b_hex), &sha256(&data)).unwrap()),
        "304402200ea73bc80184577255159183536a0118fa5bba589eb23aeca4badcb1b17a956902201aa822fc1f47ecbb68d8f2901c30e661c366c8e77ea04d22e5b6bda233545753"
    );
    assert_eq!(
        hex::encode(a.create_signature(&key("anyone"), &sha256(&data)).unwrap()),
        "3045022100d9da138566d22d276188e88b1314c9db5002e57c132973e1b25dee11eedc425d02201a8fb2dedf09c76cf1f2451e02a973fbbf99d6dc744d5a6d8860e12de34c299c"
    );
    assert_eq!(
        hex::encode(a.create_hmac(&key(&b_hex), &data).unwrap()),
        "db1d3d7f38b4bef0d6fdad3cd683634a7f001b8b415315d21430e4bc5f2fa6a1"
    );
    assert_eq!(
        hex::encode(a.create_hmac(&key("self"), &data).unwrap()),
        "71320c8bc4b9670a94fb4277826889b20c04caf27da5a9d2c6c2cffa008c6156"
    );
    assert_eq!(
        hex::encode(a.create_hmac(&key("anyone"), &data).unwrap()),
        "0bad97de5caeeca42be2d6ced3e3eb9378db1ee066e30e944df530101033e07b"
    );
}

fn compact(der: &[u8]) -> [u8; 64] {
    ecdsa::Signature::from_der(der).unwrap().serialize_compact()
}

#[test]
fn two_parties_agree() {
    let (a, b) = (wallet(3), wallet(4));
    let (a_hex, b_hex) = (hex_key(&a), hex_key(&b));
    let hash = sha256(b"hello");
    let sig = a.create_signature(&key(&b_hex), &hash).unwrap();
    assert!(b.verify_signature(&key(&a_hex), false, &hash, &compact(&sig)).unwrap());
    assert!(!b.verify_signature(&key(&a_hex), false, &sha256(b"hellp"), &compact(&sig)).unwrap());
    // The signer can check its own signature with forSelf.
    assert!(a.verify_signature(&key(&b_hex), true, &hash, &compact(&sig)).unwrap());
    // Symmetric keys are shared: each side's HMAC verifies on the other.
    let mac = a.create_hmac(&key(&b_hex), b"data").unwrap();
    assert!(b.verify_hmac(&key(&a_hex), b"data", &mac).unwrap());
    assert!(!b.verify_hmac(&key(&a_hex), b"datb", &mac).unwrap());
    assert!(!b.verify_hmac(&key(&a_hex), b"data", &mac[..31]).unwrap());
}

#[test]
fn anyone_signatures_verify_for_everyone() {
    let a = wallet(5);
    let anyone = Wallet::new(brc42::anyone_private());
    let hash = sha256(b"public");
    let sig = a.create_signature(&key("anyone"), &hash).unwrap();
    assert!(anyone.verify_signature(&key(&hex_key(&a)), false, &hash, &compact(&sig)).unwrap());
}

#[test]
fn matches_brc77_signing() {
    // BRC-77 signs with the BRC-42 child for "2-message signing-<base64 keyID>".
    use base64::Engine as _;
    let root = SecretKey::from_byte_array([9; 32]).unwrap();
    let key_id = [7u8; 32];
    let packet = crate::manifest::sign_brc77_with_key_id(&root, b"msg", &key_id).unwrap();
    let b64 = base64::engine::general_purpose::STANDARD.encode(key_id);
    let k = KeyRef { level: 2.0, protocol: "message signing", key_id: &b64, counterparty: "anyone" };
    let sig = Wallet::new(root).create_signature(&k, &sha256(b"msg")).unwrap();
    assert_eq!(&packet[70..], &sig[..]);
}

#[test]
fn high_s_and_out_of_range_signatures() {
    let a = wallet(6);
    let a_hex = hex_key(&a);
    let hash = sha256(b"x");
    let sig = compact(&a.create_signature(&key("self"), &hash).unwrap());
    assert!(a.verify_signature(&key("self"), false, &hash, &sig).unwrap());
    // Negate s: the SDK accepts high-S signatures, so do we.
    let s = SecretKey::from_byte_array(sig[32..].try_into().unwrap()).unwrap().negate();
    let mut high = sig;
    high[32..].copy_from_slice(&s.secret_bytes());
    assert!(a.verify_signature(&key("self"), false, &hash, &high).unwrap());
    let mut zero = sig;
    zero[..32].fill(0);
    assert!(!a.verify_signature(&key("self"), false, &hash, &zero).unwrap());
    let mut big = sig;
    big[32..].fill(0xff);
    assert!(!a.verify_signature(&key("self"), false, &hash, &big).unwrap());
    assert!(a.verify_signature(&key(&a_hex), false, &hash, &sig).unwrap(), "self is the identity key");
}

#[test]
fn errors_carry_the_sdk_messages() {
    let a = wallet(8);
    let mut k = key("self");
    k.protocol = "bad";
    assert_eq!(a.create_hmac(&k, b"").unwrap_err().to_string(), "Protocol names must be 5 characters or more");
    assert_eq!(a.create_hmac(&key("nobody"), b"").unwrap_err().to_string(), "Invalid hex string");
    assert!(Wallet::from_hex("").is_err());
    assert!(Wallet::from_hex(&"f".repeat(64)).is_err());
    assert!(Wallet::from_hex(&"0".repeat(64)).is_err());
    assert_eq!(hex_key(&Wallet::from_hex("1").unwrap()), hex::encode(brc42::anyone_public().serialize()));
    assert!(!format!("{a:?}").contains(&"08".repeat(32)));
}

#[test]
fn the_shared_point_cache_stays_bounded() {
    let a = wallet(10);
    for i in 1..=(SHARED_CACHE_MAX as u32 + 10) {
        let mut bytes = [0u8; 32];
        bytes[28..].copy_from_slice(&i.to_be_bytes());
        let other = PublicKey::from_secret_key_global(&SecretKey::from_byte_array(bytes).unwrap());
        a.create_hmac(&key(&hex::encode(other.serialize())), b"d").unwrap();
        assert!(a.known.lock().unwrap().len() <= SHARED_CACHE_MAX);
    }
}

/// Verification under a child key by the shifted message (`shifted_message`) agrees
/// with verification against the derived child key itself, for valid signatures,
/// signatures over another hash, signatures by another key, and hashes at or above n.
#[test]
fn shifted_verification_agrees_with_the_derived_child_key() {
    let mut seed = [0u8; 32];
    let mut next = || {
        seed = sha256(&seed);
        seed
    };
    for i in 0..300 {
        let (signer, verifier) = (Wallet::new(SecretKey::from_byte_array(next()).unwrap()), Wallet::new(SecretKey::from_byte_array(next()).unwrap()));
        let (signer_hex, verifier_hex) = (hex_key(&signer), hex_key(&verifier));
        let key_id = hex::encode(next());
        let towards_verifier = KeyRef { level: 2.0, protocol: SIG, key_id: &key_id, counterparty: &verifier_hex };
        let towards_signer = KeyRef { counterparty: &signer_hex, ..towards_verifier };
        // Every tenth hash is at or above n, which both ways reduce mod n.
        let hash = if i % 10 == 0 { [0xff; 32] } else { next() };
        let sig = compact(&signer.create_signature(&towards_verifier, &hash).unwrap());
        let child = verifier.derive_public_key(&towards_signer, false).unwrap();
        let direct = |h: &[u8; 32], s: &[u8; 64]| {
            let mut sig = ecdsa::Signature::from_compact(s).unwrap();
            sig.normalize_s();
            child.verify(SECP256K1, Message::from_digest(brc42::reduce_mod_n(*h).to_be_bytes()), &sig).is_ok()
        };
        let other_hash = next();
        let by_another = compact(&verifier.create_signature(&towards_signer, &hash).unwrap());
        for (h, s, valid) in [(&hash, &sig, true), (&other_hash, &sig, false), (&hash, &by_another, false)] {
            assert_eq!(verifier.verify_signature(&towards_signer, false, h, s).unwrap(), valid, "round {i}");
            assert_eq!(direct(h, s), valid, "round {i}: the direct check");
        }
        // forSelf: the signer checks its own signature under its own child key.
        assert!(signer.verify_signature(&towards_verifier, true, &hash, &sig).unwrap(), "round {i}");
    }
}
