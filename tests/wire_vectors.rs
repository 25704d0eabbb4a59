//! RFC 8785 canonical form and BRC-192 §1 digests against the shared vectors.
//!
//! The vector file is vendored in `tests/fixtures/spec` (see its README); a missing
//! file fails the test rather than skipping it.

use std::path::PathBuf;

use overlay_lookup_live::wire::{self, parse_strict, NumberMode};
use serde_json::Value;

fn vectors() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec/digest-vectors.json");
    let bytes = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("digest vectors must be present at {}: {e}", path.display()));
    parse_strict(&bytes, NumberMode::Finite).expect("vector file is strict JSON")
}

#[test]
fn all_27_digest_vectors_match() {
    let file = vectors();
    let body = &file["body"];
    let canonical = file["canonical"].as_str().expect("canonical string");
    assert_eq!(wire::canonicalize(body).unwrap(), canonical);

    let vectors = file["vectors"].as_array().expect("vectors array");
    assert_eq!(vectors.len(), 27);
    for v in vectors {
        let domain = v["domain"].as_str().unwrap();
        let want_preimage = v["preimage"].as_str().unwrap();
        let want_sha = v["sha256"].as_str().unwrap();
        assert_eq!(hex::encode(wire::preimage(domain, body)), want_preimage, "preimage of {domain}");
        assert_eq!(wire::digest(domain, body), want_sha, "digest of {domain}");
        assert_eq!(wire::try_digest(domain, body).unwrap(), want_sha, "try_digest of {domain}");
        assert_eq!(hex::encode(wire::digest_bytes(domain, body)), want_sha);
    }
}

#[test]
fn canonical_form_does_not_depend_on_member_order() {
    let file = vectors();
    let body = file["body"].clone();
    // Rebuild every object with its members reversed; JCS must not change.
    fn reverse(v: Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(m.into_iter().rev().map(|(k, v)| (k, reverse(v))).collect()),
            Value::Array(a) => Value::Array(a.into_iter().map(reverse).collect()),
            other => other,
        }
    }
    let reversed = reverse(body.clone());
    assert_ne!(serde_json::to_string(&reversed).unwrap(), serde_json::to_string(&body).unwrap());
    assert_eq!(wire::canonicalize(&reversed).unwrap(), file["canonical"].as_str().unwrap());
}

#[test]
fn canonical_output_parses_back_to_the_same_canonical_form() {
    let file = vectors();
    let canonical = file["canonical"].as_str().unwrap();
    let again = parse_strict(canonical.as_bytes(), NumberMode::SafeInteger).unwrap();
    assert_eq!(wire::canonicalize(&again).unwrap(), canonical);
}
