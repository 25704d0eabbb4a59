//! napi glue for `crate::manifest`: type conversion and error mapping only.
//!
//! Functions that need `preimage(T, B)` (BRC-192 §1) take it as a JS callback
//! `(type, body) => Buffer` for now. MERGE NOTE: once `crate::wire` lands, a
//! missing callback should fall back to `crate::wire::preimage` (see
//! `with_preimage`), and callers can drop the argument.
use std::cell::RefCell;

use napi::bindgen_prelude::{Buffer, FnArgs, Function};
use napi::{Error, Result};
use napi_derive::napi;
use secp256k1::SecretKey;
use serde_json::Value;

use crate::manifest::{self, ManifestConfig, ManifestError};

fn manifest_error(e: ManifestError) -> Error {
    super::error::status_error(e)
}

fn invalid(message: impl Into<String>) -> Error {
    manifest_error(ManifestError::new(crate::wire::ErrorCode::Invalid, message))
}

fn secret_key(hex_key: &str) -> Result<SecretKey> {
    let bytes: [u8; 32] = hex::decode(hex_key)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| invalid("private key must be 64 hex characters"))?;
    SecretKey::from_byte_array(bytes).map_err(|_| invalid("private key out of range"))
}

/// Runs `f` with a Rust preimage function backed by the JS callback. A JS
/// exception is remembered and returned instead of `f`'s result, so nothing
/// signed over an incomplete preimage ever leaves this function.
fn with_preimage<T>(
    callback: Option<Function<'_, FnArgs<(String, Value)>, Buffer>>,
    f: impl FnOnce(&dyn Fn(&str, &Value) -> Vec<u8>) -> Result<T>,
) -> Result<T> {
    // Without a callback the package's own RFC 8785 preimage is used (wire module).
    let Some(callback) = callback else {
        return f(&|t: &str, body: &Value| crate::wire::preimage(t, body));
    };
    let failure: RefCell<Option<Error>> = RefCell::new(None);
    let preimage = |t: &str, body: &Value| -> Vec<u8> {
        match callback.call((t.to_string(), body.clone()).into()) {
            Ok(buf) => buf.to_vec(),
            Err(e) => {
                failure.borrow_mut().get_or_insert(e);
                Vec::new()
            }
        }
    };
    let result = f(&preimage);
    match failure.into_inner() {
        Some(e) => Err(e),
        None => result,
    }
}

/// BRC-77 signature (anyone verifier, random key ID) by `privateKeyHex`.
#[napi]
pub fn sign_brc77(private_key_hex: String, message: Buffer) -> Result<Buffer> {
    Ok(manifest::sign_brc77(&secret_key(&private_key_hex)?, &message).into())
}

/// Verifies an anyone-verifiable BRC-77 signature; returns the signer identity hex.
#[napi]
pub fn verify_brc77(message: Buffer, signature: Buffer) -> Result<String> {
    manifest::verify_brc77(&message, &signature)
        .map(|id| id.to_hex())
        .map_err(|e| invalid(e.to_string()))
}

/// Builds the BRC-194 capabilities body from a `ManifestConfig`-shaped object.
#[napi]
pub fn build_manifest(config: Value) -> Result<Value> {
    let config: ManifestConfig = serde_json::from_value(config).map_err(|e| invalid(e.to_string()))?;
    manifest::build_manifest(&config).map_err(manifest_error)
}

/// Signs a manifest body: returns `{body, signature}`.
#[napi]
pub fn sign_manifest(body: Value, private_key_hex: String, preimage: Option<Function<'_, FnArgs<(String, Value)>, Buffer>>) -> Result<Value> {
    let key = secret_key(&private_key_hex)?;
    with_preimage(preimage, |p| manifest::sign_manifest(&body, &key, p).map_err(manifest_error))
}

/// `digest("capabilities", body)`: the `x-bsv-overlay-capability` value.
#[napi]
pub fn capability_digest(body: Value, preimage: Option<Function<'_, FnArgs<(String, Value)>, Buffer>>) -> Result<String> {
    with_preimage(preimage, |p| Ok(manifest::capability_digest(&body, p)))
}

/// Verifies a signed manifest's signature and signer; returns the identity hex.
#[napi]
pub fn verify_signed_manifest(signed: Value, preimage: Option<Function<'_, FnArgs<(String, Value)>, Buffer>>) -> Result<String> {
    with_preimage(preimage, |p| {
        manifest::verify_signed_manifest(&signed, p).map(|id| id.to_hex()).map_err(manifest_error)
    })
}

#[napi(object)]
pub struct SelectionFailure {
    /// `invalid`, `context-changed` or `unsupported` (BRC-192 §6 codes).
    pub code: String,
    pub message: String,
}

/// Checks the selection headers; `null` when the selection is acceptable.
#[napi]
pub fn selection_check(
    accepted_digests: Vec<String>,
    offered_profiles: Vec<String>,
    capability: Option<String>,
    profile: Option<String>,
) -> Option<SelectionFailure> {
    let digests: Vec<&str> = accepted_digests.iter().map(String::as_str).collect();
    let profiles: Vec<&str> = offered_profiles.iter().map(String::as_str).collect();
    manifest::selection_check(&digests, &profiles, capability.as_deref(), profile.as_deref())
        .err()
        .map(|e| SelectionFailure { code: e.code.as_str().to_string(), message: e.message })
}

/// Non-negative safe integer from a JS number (napi may hand it over as f64).
fn js_u64(v: &Value, what: &str) -> Result<u64> {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 9007199254740991.0).map(|f| f as u64))
        .ok_or_else(|| invalid(format!("{what} must be a non-negative safe integer")))
}

/// Client side: verifies and checks a received `{body, signature}` manifest.
/// `expectation` = `{identity?, baseURL, network, genesisHash, now, maxFutureSkew}`
/// (times in Unix seconds). Returns `{digest, identity, expiresAt, live: [...]}`.
#[napi]
pub fn accept_manifest(
    signed: Value,
    expectation: Value,
    preimage: Option<Function<'_, FnArgs<(String, Value)>, Buffer>>,
) -> Result<Value> {
    let text = |k: &str| expectation.get(k).and_then(Value::as_str).ok_or_else(|| invalid(format!("expectation.{k} must be a string")));
    let identity = match expectation.get("identity") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(_) => return Err(invalid("expectation.identity must be a string")),
    };
    let expect = manifest::Expectation {
        identity,
        base_url: text("baseURL")?,
        network: text("network")?,
        genesis_hash: text("genesisHash")?,
        now: js_u64(&expectation["now"], "expectation.now")?,
        max_future_skew: js_u64(&expectation["maxFutureSkew"], "expectation.maxFutureSkew")?,
    };
    with_preimage(preimage, |p| {
        let accepted = manifest::accept_manifest(&signed, p, &expect).map_err(manifest_error)?;
        let live: Vec<Value> = accepted
            .live
            .iter()
            .map(|o| {
                serde_json::json!({
                    "service": o.service, "rulesDigest": o.rules_digest, "authentication": o.authentication,
                    "maxRequestBytes": o.max_request_bytes, "maxResponseBytes": o.max_response_bytes,
                    "sessionSeconds": o.session_seconds.to_string(), "replaySeconds": o.replay_seconds.to_string(),
                    "maxObservations": o.max_observations, "maxWaitMs": o.max_wait_ms,
                })
            })
            .collect();
        Ok(serde_json::json!({
            "digest": accepted.digest, "identity": accepted.identity,
            "expiresAt": accepted.expires_at.to_string(), "live": live,
        }))
    })
}
