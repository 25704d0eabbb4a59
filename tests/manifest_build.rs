//! BRC-194 manifest: body shape, validation, signing and the capability digest.
//!
//! The crate's real preimage lives in `wire`; these tests carry a small JCS for
//! integer-only JSON, itself checked against the BRC-192 digest vector for
//! the `capabilities` domain (spec/digest-vectors.json).
use overlay_lookup_live::manifest::{
    build_manifest, capability_digest, selection_check, sign_brc77, sign_manifest,
    verify_signed_manifest, ManifestConfig, LOOKUP_LIVE_PROFILE,
};
use secp256k1::{PublicKey, SecretKey};
use serde_json::{json, Value};

// ---- minimal RFC 8785 for JSON without fractional numbers (test-only) ----
fn jcs(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            assert!(n.is_i64() || n.is_u64(), "test JCS handles integers only");
            out.push_str(&n.to_string())
        }
        Value::String(s) => jcs_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                jcs(x, out);
            }
            out.push(']');
        }
        Value::Object(o) => {
            let mut keys: Vec<&String> = o.keys().collect();
            // RFC 8785 orders keys by UTF-16 code units.
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                jcs_string(k, out);
                out.push(':');
                jcs(&o[*k], out);
            }
            out.push('}');
        }
    }
}

fn jcs_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn preimage(t: &str, body: &Value) -> Vec<u8> {
    let mut canonical = String::new();
    jcs(body, &mut canonical);
    let mut out = format!("BRC-OUTPUT/1/{t}").into_bytes();
    out.push(0);
    out.extend_from_slice(canonical.as_bytes());
    out
}

/// The `capabilities` vector of spec/digest-vectors.json (an encoding probe).
#[test]
fn test_jcs_and_capability_digest_match_the_spec_vector() {
    let body = json!({"version": 1, "probe": {"\u{e000}": "BMP", "\u{1f600}": "non-BMP", "text": "\u{e9}\n\t", "empty": ""},
        "values": [null, false, true, 0, 1, 9007199254740991u64, "18446744073709551615", "YQ=="]});
    let expected_preimage = "4252432d4f55545055542f312f6361706162696c6974696573007b2270726f6265223a7b22656d707479223a22222c2274657874223a22c3a95c6e5c74222c22f09f9880223a226e6f6e2d424d50222c22ee8080223a22424d50227d2c2276616c756573223a5b6e756c6c2c66616c73652c747275652c302c312c393030373139393235343734303939312c223138343436373434303733373039353531363135222c2259513d3d225d2c2276657273696f6e223a317d";
    assert_eq!(hex::encode(preimage("capabilities", &body)), expected_preimage);
    assert_eq!(
        capability_digest(&body, preimage),
        "fec751a7791bbda899c866179189a3e21f56668ae9a46edeb45be360cb657f6b"
    );
}

// ---- fixtures ----
fn key() -> SecretKey {
    SecretKey::from_byte_array([0x11; 32]).unwrap()
}

fn identity_of(k: &SecretKey) -> String {
    hex::encode(PublicKey::from_secret_key_global(k).serialize())
}

const GENESIS: &str = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f";
const RULES_DIGEST: &str = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e";

fn config_json() -> Value {
    json!({
        "identity": identity_of(&key()),
        "baseURL": "https://Overlay.Example.test:443/api/",
        "chain": {"network": "mainnet", "genesisHash": GENESIS},
        "issuedAt": 1_764_460_800u64,
        "expiresAt": "1764547200",
        "services": [{
            "name": "ls_notes",
            "rules": {"id": "urn:example:notes-rules:1", "parameters": {}},
            "rulesDigest": RULES_DIGEST,
            "profile": {
                "authentication": "brc103",
                "maxRequestBytes": 1048576, "maxResponseBytes": 4194304,
                "sessionSeconds": 3600, "replaySeconds": "86400",
                "maxObservations": 1024, "maxWaitMs": 25000
            }
        }]
    })
}

fn config(v: Value) -> ManifestConfig {
    serde_json::from_value(v).expect("config parses")
}

fn build(v: Value) -> Result<Value, String> {
    build_manifest(&config(v)).map_err(|e| e.code.as_str().to_string() + ": " + &e.message)
}

#[test]
fn body_has_the_brc194_shape() {
    let body = build(config_json()).unwrap();
    let expected = json!({
        "version": 1,
        "identity": identity_of(&key()),
        "baseURL": "https://overlay.example.test/api",
        "chain": {"network": "mainnet", "genesisHash": GENESIS},
        "issuedAt": "1764460800",
        "expiresAt": "1764547200",
        "services": [{
            "name": "ls_notes",
            "kind": "lookup",
            "rules": {"id": "urn:example:notes-rules:1", "parameters": {}},
            "rulesDigest": RULES_DIGEST,
            "profiles": [{
                "id": LOOKUP_LIVE_PROFILE,
                "authentication": "brc103",
                "payment": "none",
                "maxRequestBytes": 1048576,
                "maxResponseBytes": 4194304,
                "parameters": {"replaySeconds": "86400", "sessionSeconds": "3600", "maxObservations": 1024, "maxWaitMs": 25000}
            }]
        }]
    });
    assert_eq!(body, expected);
}

#[test]
fn extensions_are_carried_and_checked() {
    let mut c = config_json();
    c["extensions"] = json!({"urn:example:x": {"a": 1}});
    c["critical"] = json!(["urn:example:x"]);
    let body = build(c.clone()).unwrap();
    assert_eq!(body["extensions"], json!({"urn:example:x": {"a": 1}}));
    assert_eq!(body["critical"], json!(["urn:example:x"]));
    c["critical"] = json!(["urn:example:y"]);
    assert!(build(c.clone()).is_err());
    c["critical"] = json!(["urn:example:x", "urn:example:x"]);
    assert!(build(c.clone()).is_err());
    c["critical"] = Value::Null;
    c["extensions"] = json!({"not-an-iri": 1});
    assert!(build(c).is_err());
}

#[test]
fn invalid_configurations_are_rejected_before_signing() {
    type Mutation = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Mutation)> = vec![
        ("identity not a key", Box::new(|c| c["identity"] = json!(format!("02{}", "ff".repeat(32))))),
        ("identity uppercase", Box::new(|c| c["identity"] = json!(c["identity"].as_str().unwrap().to_uppercase()))),
        ("http base", Box::new(|c| c["baseURL"] = json!("http://example.test"))),
        ("dot segment", Box::new(|c| c["baseURL"] = json!("https://example.test/a/../b"))),
        ("empty network", Box::new(|c| c["chain"]["network"] = json!(""))),
        ("genesis uppercase", Box::new(|c| c["chain"]["genesisHash"] = json!(GENESIS.to_uppercase()))),
        ("issued == expires", Box::new(|c| c["expiresAt"] = json!(1_764_460_800u64))),
        ("issued > expires", Box::new(|c| c["expiresAt"] = json!(1u64))),
        ("duplicate service", Box::new(|c| { let s = c["services"][0].clone(); c["services"].as_array_mut().unwrap().push(s) })),
        ("empty name", Box::new(|c| c["services"][0]["name"] = json!(""))),
        ("rules extra field", Box::new(|c| c["services"][0]["rules"]["x"] = json!(1))),
        ("rules without parameters", Box::new(|c| c["services"][0]["rules"] = json!({"id": "urn:x"}))),
        ("rules parameters not object", Box::new(|c| c["services"][0]["rules"]["parameters"] = json!([]))),
        ("rules id not an IRI", Box::new(|c| c["services"][0]["rules"]["id"] = json!("notes rules"))),
        ("rules digest short", Box::new(|c| c["services"][0]["rulesDigest"] = json!("abc"))),
        ("request bytes zero", Box::new(|c| c["services"][0]["profile"]["maxRequestBytes"] = json!(0))),
        ("request bytes over 1 MiB", Box::new(|c| c["services"][0]["profile"]["maxRequestBytes"] = json!(1048577))),
        ("response under 64 KiB", Box::new(|c| c["services"][0]["profile"]["maxResponseBytes"] = json!(65535))),
        ("response over 4 MiB", Box::new(|c| c["services"][0]["profile"]["maxResponseBytes"] = json!(4194305))),
        ("observations zero", Box::new(|c| c["services"][0]["profile"]["maxObservations"] = json!(0))),
        ("observations over 1024", Box::new(|c| c["services"][0]["profile"]["maxObservations"] = json!(1025))),
        ("wait over 25 s", Box::new(|c| c["services"][0]["profile"]["maxWaitMs"] = json!(25001))),
        ("session zero", Box::new(|c| c["services"][0]["profile"]["sessionSeconds"] = json!(0))),
        ("replay zero", Box::new(|c| c["services"][0]["profile"]["replaySeconds"] = json!("0"))),
        ("replay overflow", Box::new(|c| c["services"][0]["profile"]["replaySeconds"] = json!("18446744073709551615"))),
    ];
    for (what, mutate) in cases {
        let mut c = config_json();
        mutate(&mut c);
        match serde_json::from_value::<ManifestConfig>(c) {
            Ok(cfg) => {
                let err = build_manifest(&cfg).expect_err(what);
                assert_eq!(err.code.as_str(), "invalid", "{what}");
            }
            Err(_) => panic!("{what}: expected a build error, got a parse error"),
        }
    }
    // Zero wait is allowed (BRC-194 §2), and local HTTP when configured.
    let mut c = config_json();
    c["services"][0]["profile"]["maxWaitMs"] = json!(0);
    c["baseURL"] = json!("http://127.0.0.1:8080/");
    c["allowLocalHttp"] = json!(true);
    assert_eq!(build(c).unwrap()["baseURL"], "http://127.0.0.1:8080");
}

#[test]
fn config_parsing_is_strict() {
    for mutate in [
        (|c: &mut Value| c["unknown"] = json!(1)) as fn(&mut Value),
        |c| c["services"][0]["profile"]["payment"] = json!("none"),
        |c| c["services"][0]["profile"]["authentication"] = json!("brc104"),
        |c| c["issuedAt"] = json!("01"),
        |c| c["issuedAt"] = json!(-1),
        |c| c["issuedAt"] = json!(1.5),
        |c| c["expiresAt"] = json!("18446744073709551616"),
    ] {
        let mut c = config_json();
        mutate(&mut c);
        assert!(serde_json::from_value::<ManifestConfig>(c).is_err());
    }
}

#[test]
fn service_and_size_limits() {
    let mut c = config_json();
    let template = c["services"][0].clone();
    let services: Vec<Value> = (0..257).map(|i| { let mut s = template.clone(); s["name"] = json!(format!("s{i}")); s }).collect();
    c["services"] = json!(services[..256]);
    assert!(build(c.clone()).is_ok());
    c["services"] = json!(services);
    assert!(build(c.clone()).is_err());
    let mut c = config_json();
    c["services"][0]["rules"]["parameters"] = json!({"blob": "a".repeat(300 * 1024)});
    assert!(build(c).unwrap_err().contains("256 KiB"));
}

#[test]
fn signed_manifest_verifies_and_tampering_fails() {
    let body = build(config_json()).unwrap();
    let signed = sign_manifest(&body, &key(), preimage).unwrap();
    assert_eq!(signed.as_object().unwrap().len(), 2);
    assert_eq!(signed["body"], body);
    let who = verify_signed_manifest(&signed, preimage).unwrap();
    assert_eq!(who.to_hex(), identity_of(&key()));

    let mut tampered = signed.clone();
    tampered["body"]["expiresAt"] = json!("1864547200");
    assert!(verify_signed_manifest(&tampered, preimage).is_err());

    let mut extra = signed.clone();
    extra["x"] = json!(1);
    assert!(verify_signed_manifest(&extra, preimage).is_err());

    let mut padded = signed.clone();
    padded["signature"] = json!(format!("{} ", signed["signature"].as_str().unwrap()));
    assert!(verify_signed_manifest(&padded, preimage).is_err());
}

#[test]
fn signer_must_be_the_manifest_identity() {
    let body = build(config_json()).unwrap();
    let other = SecretKey::from_byte_array([0x22; 32]).unwrap();
    assert!(sign_manifest(&body, &other, preimage).is_err());
    // A forged packet: valid signature by another key over the same body.
    use base64::Engine as _;
    let sig = sign_brc77(&other, &preimage("capabilities", &body));
    let forged = json!({"body": body, "signature": base64::engine::general_purpose::STANDARD.encode(sig)});
    let err = verify_signed_manifest(&forged, preimage).unwrap_err();
    assert!(err.message.contains("identity"), "{err}");
    // A signature over a different packet type does not verify as capabilities.
    let sig = sign_brc77(&key(), &preimage("service-rules", &body));
    let wrong_type = json!({"body": body, "signature": base64::engine::general_purpose::STANDARD.encode(sig)});
    assert!(verify_signed_manifest(&wrong_type, preimage).is_err());
}

#[test]
fn selection_uses_the_capability_digest() {
    let body = build(config_json()).unwrap();
    let digest = capability_digest(&body, preimage);
    assert_eq!(digest.len(), 64);
    assert_eq!(selection_check(&[&digest], &[LOOKUP_LIVE_PROFILE], Some(&digest), Some(LOOKUP_LIVE_PROFILE)), Ok(()));
    // Re-issuing the manifest (new expiry) changes the digest: the old selection is stale.
    let mut c = config_json();
    c["expiresAt"] = json!("1764633600");
    let newer = capability_digest(&build(c).unwrap(), preimage);
    assert_ne!(newer, digest);
    let err = selection_check(&[&newer], &[LOOKUP_LIVE_PROFILE], Some(&digest), Some(LOOKUP_LIVE_PROFILE)).unwrap_err();
    assert_eq!(err.code.as_str(), "context-changed");
}

// ---- client-side acceptance ----
use overlay_lookup_live::manifest::{accept_manifest, Expectation};

const NOW: u64 = 1_764_500_000;

fn expectation(identity: &str) -> Expectation<'_> {
    Expectation {
        identity: Some(identity),
        base_url: "https://overlay.example.test/api",
        network: "mainnet",
        genesis_hash: GENESIS,
        now: NOW,
        max_future_skew: 300,
    }
}

fn signed_with(mutate: impl Fn(&mut Value)) -> Value {
    let mut body = build(config_json()).unwrap();
    mutate(&mut body);
    sign_manifest(&body, &key(), preimage).unwrap()
}

fn accept_code(signed: &Value, e: &Expectation<'_>) -> Result<(), &'static str> {
    accept_manifest(signed, preimage, e).map(|_| ()).map_err(|e| e.code.as_str())
}

#[test]
fn a_valid_manifest_is_accepted_with_its_offer_and_digest() {
    let id = identity_of(&key());
    let signed = signed_with(|_| {});
    let accepted = accept_manifest(&signed, preimage, &expectation(&id)).unwrap();
    assert_eq!(accepted.digest, capability_digest(&signed["body"], preimage));
    assert_eq!(accepted.identity, id);
    assert_eq!(accepted.expires_at, 1_764_547_200);
    assert_eq!(accepted.live.len(), 1);
    let offer = &accepted.live[0];
    assert_eq!(
        (offer.service.as_str(), offer.rules_digest.as_str(), offer.authentication.as_str()),
        ("ls_notes", RULES_DIGEST, "brc103")
    );
    assert_eq!((offer.max_request_bytes, offer.max_response_bytes), (1048576, 4194304));
    assert_eq!((offer.session_seconds, offer.replay_seconds, offer.max_observations, offer.max_wait_ms), (3600, 86400, 1024, 25000));
    // Unknown expected identity is allowed (discovery by URL only).
    let mut open = expectation(&id);
    open.identity = None;
    assert!(accept_manifest(&signed, preimage, &open).is_ok());
}

#[test]
fn expectations_and_time_are_enforced() {
    let id = identity_of(&key());
    let signed = signed_with(|_| {});
    let other = identity_of(&SecretKey::from_byte_array([0x22; 32]).unwrap());
    assert_eq!(accept_code(&signed, &expectation(&other)), Err("invalid"));
    let mut e = expectation(&id);
    e.base_url = "https://overlay.example.test";
    assert_eq!(accept_code(&signed, &e), Err("invalid"));
    let mut e = expectation(&id);
    e.network = "testnet";
    assert_eq!(accept_code(&signed, &e), Err("invalid"));
    let mut e = expectation(&id);
    e.now = 1_764_547_200; // expiry is exclusive
    assert_eq!(accept_code(&signed, &e), Err("expired"));
    e.now = 1_764_547_199;
    assert_eq!(accept_code(&signed, &e), Ok(()));
    let mut e = expectation(&id);
    e.now = 1_764_460_800 - 301;
    assert_eq!(accept_code(&signed, &e), Err("invalid"));
    e.now = 1_764_460_800 - 300;
    assert_eq!(accept_code(&signed, &e), Ok(()));
}

#[test]
fn malformed_or_unsupported_manifests_are_rejected_even_when_signed() {
    let id = identity_of(&key());
    let e = expectation(&id);
    let live = "https://bsv.brc.dev/overlays/0193#lookup-live-v1";
    type Case = (&'static str, fn(&mut Value), &'static str);
    let cases: Vec<Case> = vec![
        ("extra field", |b| b["x"] = json!(1), "invalid"),
        ("version 2", |b| b["version"] = json!(2), "unsupported"),
        ("version string", |b| b["version"] = json!("1"), "invalid"),
        ("issuedAt number", |b| b["issuedAt"] = json!(1_764_460_800u64), "invalid"),
        ("issued after expiry", |b| b["issuedAt"] = json!("1764547201"), "invalid"),
        ("duplicate service", |b| { let s = b["services"][0].clone(); b["services"].as_array_mut().unwrap().push(s) }, "invalid"),
        ("duplicate profile", |b| { let p = b["services"][0]["profiles"][0].clone(); b["services"][0]["profiles"].as_array_mut().unwrap().push(p) }, "invalid"),
        ("unknown profile field", |b| b["services"][0]["profiles"][0]["x"] = json!(1), "invalid"),
        ("unknown parameter", |b| b["services"][0]["profiles"][0]["parameters"]["x"] = json!(1), "invalid"),
        ("missing parameter", |b| { b["services"][0]["profiles"][0]["parameters"].as_object_mut().unwrap().remove("maxWaitMs"); }, "invalid"),
        ("session zero", |b| b["services"][0]["profiles"][0]["parameters"]["sessionSeconds"] = json!("0"), "invalid"),
        ("observations zero", |b| b["services"][0]["profiles"][0]["parameters"]["maxObservations"] = json!(0), "invalid"),
        ("paid lookup-live", |b| b["services"][0]["profiles"][0]["payment"] = json!("brc105"), "invalid"),
        ("lookup-live on a topic", |b| b["services"][0]["kind"] = json!("topic"), "invalid"),
        ("bad kind", |b| b["services"][0]["kind"] = json!("other"), "invalid"),
        ("bad rules digest", |b| b["services"][0]["rulesDigest"] = json!("AB".repeat(32)), "invalid"),
        ("critical extension", |b| { b["extensions"] = json!({"urn:x": 1}); b["critical"] = json!(["urn:x"]) }, "unsupported"),
        ("critical without extension", |b| b["critical"] = json!(["urn:x"]), "invalid"),
    ];
    for (what, mutate, code) in cases {
        assert_eq!(accept_code(&signed_with(mutate), &e), Err(code), "{what}");
    }
    // Sanity: the profile IRI constant is what the builder emits.
    assert_eq!(signed_with(|_| {})["body"]["services"][0]["profiles"][0]["id"], live);
}

#[test]
fn acceptance_clamps_to_profile_maxima_and_keeps_other_profiles() {
    let id = identity_of(&key());
    let signed = signed_with(|b| {
        b["services"][0]["profiles"][0]["maxResponseBytes"] = json!(8 * 1024 * 1024);
        b["services"][0]["profiles"][0]["parameters"]["maxObservations"] = json!(5000);
        b["services"][0]["profiles"][0]["parameters"]["maxWaitMs"] = json!(60000);
        b["services"][0]["profiles"].as_array_mut().unwrap().push(json!({
            "id": "https://bsv.brc.dev/overlays/0195#paid-lookup-v1", "authentication": "brc103", "payment": "brc105",
            "maxRequestBytes": 1000, "maxResponseBytes": 1000, "parameters": {"anything": true}
        }));
        let topic = json!({"name": "tm_notes", "kind": "topic", "rules": {"id": "urn:x", "parameters": {}},
            "rulesDigest": RULES_DIGEST, "profiles": []});
        b["services"].as_array_mut().unwrap().push(topic);
    });
    let accepted = accept_manifest(&signed, preimage, &expectation(&id)).unwrap();
    assert_eq!(accepted.live.len(), 1);
    let offer = &accepted.live[0];
    assert_eq!((offer.max_response_bytes, offer.max_observations, offer.max_wait_ms), (4194304, 1024, 25000));
}

#[test]
fn tampered_or_oversized_signed_manifests_are_rejected() {
    let id = identity_of(&key());
    let mut signed = signed_with(|_| {});
    signed["body"]["services"][0]["profiles"][0]["parameters"]["maxWaitMs"] = json!(1);
    assert_eq!(accept_code(&signed, &expectation(&id)), Err("invalid"));
    // sign_manifest refuses to produce this, so sign it by hand.
    let mut body = build(config_json()).unwrap();
    body["extensions"] = json!({"urn:pad": "x".repeat(300 * 1024)});
    assert!(sign_manifest(&body, &key(), preimage).is_err());
    use base64::Engine as _;
    let sig = sign_brc77(&key(), &preimage("capabilities", &body));
    let big = json!({"body": body, "signature": base64::engine::general_purpose::STANDARD.encode(sig)});
    let err = accept_manifest(&big, preimage, &expectation(&id)).unwrap_err();
    assert!(err.message.contains("256 KiB"), "{err}");
}
