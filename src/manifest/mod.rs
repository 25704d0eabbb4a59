//! BRC-194 capability manifest for the BRC-193 `lookup-live-v1` profile, signed
//! with BRC-77 ([`crate::crypto`]) as a BRC-192 §1 signed packet.
//!
//! The manifest body is built from a plain configuration, validated against
//! the bounds of BRC-194 §1–2 and BRC-193 §2/§8, signed as a BRC-192 packet of
//! type `capabilities`, and its digest is what clients send back in the
//! selection headers (see [`selection`]).
//!
//! Canonical JSON is not this module's job: callers pass the BRC-192
//! `preimage(T, B)` function (the `wire` module's), so there is exactly one JCS
//! implementation in the crate.
pub mod accept;
pub mod base_url;
pub mod selection;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use secp256k1::{PublicKey, SecretKey};
use serde::{Deserialize, Deserializer};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

pub use accept::{accept_manifest, AcceptedManifest, Expectation, LiveOffer};
pub use base_url::canonical_base_url;
pub use crate::crypto::{sign_brc77, sign_brc77_with_key_id, verify_brc77, Brc77Error, Identity};
pub use selection::{
    selection_check, selection_echo, CAPABILITY_HEADER, LOOKUP_LIVE_PROFILE, PROFILE_HEADER,
};

/// BRC-192 packet type of the manifest.
pub const CAPABILITIES_TYPE: &str = "capabilities";
/// BRC-194 §1: the complete manifest, services and profiles per service.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
pub const MAX_SERVICES: usize = 256;
/// BRC-192 §1: unconstrained strings are at most 1024 UTF-8 bytes.
const MAX_STRING_BYTES: usize = 1024;

/// BRC-193 §2/§8 hard maxima of the lookup-live-v1 profile (defined once, in `wire`).
pub const PROFILE_MAX_REQUEST_BYTES: u32 = crate::wire::limits::MAX_REQUEST_BYTES as u32;
pub use crate::wire::limits::{
    PROFILE_MAX_BYTES as PROFILE_MAX_RESPONSE_BYTES, PROFILE_MAX_OBSERVATIONS, PROFILE_MAX_WAIT_MS,
    PROVIDER_MIN_BYTES as PROFILE_MIN_RESPONSE_BYTES,
};

/// Manifest failures use the protocol's one code set (BRC-192 §6).
pub use crate::wire::ErrorCode;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    pub code: ErrorCode,
    pub message: String,
}

impl ManifestError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ManifestError { code, message: message.into() }
    }
    fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Invalid, message)
    }
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ManifestError {}

/// Provider configuration for the published manifest. Times are Unix seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManifestConfig {
    /// Provider identity key, 66 lowercase hex (must match the signing key).
    pub identity: String,
    /// Advertised base; normalized to the canonical base of BRC-194 §6.
    #[serde(rename = "baseURL")]
    pub base_url: String,
    /// Local development only: accept an `http:` base (BRC-194 §1).
    #[serde(default)]
    pub allow_local_http: bool,
    pub chain: ChainConfig,
    #[serde(deserialize_with = "u64_lenient")]
    pub issued_at: u64,
    #[serde(deserialize_with = "u64_lenient")]
    pub expires_at: u64,
    pub services: Vec<ServiceConfig>,
    #[serde(default)]
    pub extensions: Option<Map<String, Value>>,
    #[serde(default)]
    pub critical: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChainConfig {
    pub network: String,
    pub genesis_hash: String,
}

/// One lookup service offering lookup-live-v1. Profile IDs must be unique per
/// service (BRC-194 §1), so a service carries exactly one such profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceConfig {
    pub name: String,
    /// `{id, parameters}` (BRC-194 §6); published as is.
    pub rules: Value,
    /// `digest("service-rules", rules)`, computed by the caller with `wire`.
    pub rules_digest: String,
    pub profile: LiveProfileConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Authentication {
    None,
    Brc103,
}

impl Authentication {
    fn as_str(self) -> &'static str {
        match self {
            Authentication::None => "none",
            Authentication::Brc103 => "brc103",
        }
    }
}

/// lookup-live-v1 profile entry (BRC-194 §2; payment is always `none`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LiveProfileConfig {
    pub authentication: Authentication,
    pub max_request_bytes: u32,
    pub max_response_bytes: u32,
    #[serde(deserialize_with = "u64_lenient")]
    pub session_seconds: u64,
    #[serde(deserialize_with = "u64_lenient")]
    pub replay_seconds: u64,
    pub max_observations: u32,
    pub max_wait_ms: u32,
}

/// Accepts an integer or a BRC-192 U64 decimal string. JS callers need the
/// string form above 2^53; an integral float from Node is accepted below it.
fn u64_lenient<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 9007199254740991.0).map(|f| f as u64))
            .ok_or_else(|| D::Error::custom("expected a non-negative safe integer")),
        Value::String(s) => parse_u64(&s).ok_or_else(|| D::Error::custom("expected a U64 decimal string")),
        _ => Err(D::Error::custom("expected an integer or U64 string")),
    }
}

/// BRC-192 §1 U64: `0|[1-9][0-9]*`, at most u64::MAX.
pub fn parse_u64(s: &str) -> Option<u64> {
    let canonical = s == "0" || (!s.is_empty() && !s.starts_with('0') && s.bytes().all(|b| b.is_ascii_digit()));
    if canonical { s.parse().ok() } else { None }
}

pub(crate) fn is_hex32(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn check_string(what: &str, s: &str) -> Result<(), ManifestError> {
    if s.is_empty() || s.len() > MAX_STRING_BYTES {
        return Err(ManifestError::invalid(format!("{what} must be 1-1024 UTF-8 bytes")));
    }
    Ok(())
}

/// BRC-192 `Identity`: compressed key as 66 lowercase hex.
pub fn parse_identity(s: &str) -> Result<PublicKey, ManifestError> {
    let lower_hex = s.len() == 66 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let key = lower_hex.then(|| hex::decode(s).ok()).flatten().and_then(|b| PublicKey::from_slice(&b).ok());
    match key {
        Some(k) if s.starts_with("02") || s.starts_with("03") => Ok(k),
        _ => Err(ManifestError::invalid("identity must be a compressed public key in lowercase hex")),
    }
}

fn check_rules(name: &str, rules: &Value) -> Result<(), ManifestError> {
    let bad = || ManifestError::invalid(format!("service {name}: rules must be exactly {{id, parameters}}"));
    let obj = rules.as_object().ok_or_else(bad)?;
    if obj.len() != 2 || !obj.get("parameters").is_some_and(Value::is_object) {
        return Err(bad());
    }
    let id = obj.get("id").and_then(Value::as_str).ok_or_else(bad)?;
    check_string("rules.id", id)?;
    // BRC-194 §6: the rules id names an installed contract by IRI.
    if !is_absolute_iri(id) {
        return Err(ManifestError::invalid(format!("service {name}: rules.id must be an absolute IRI")));
    }
    Ok(())
}

fn check_profile(name: &str, p: &LiveProfileConfig) -> Result<(), ManifestError> {
    let range = |what: &str, v: u64, lo: u64, hi: u64| {
        if v < lo || v > hi {
            Err(ManifestError::invalid(format!("service {name}: {what} must be in {lo}..={hi}")))
        } else {
            Ok(())
        }
    };
    range("maxRequestBytes", p.max_request_bytes.into(), 1, PROFILE_MAX_REQUEST_BYTES.into())?;
    range("maxResponseBytes", p.max_response_bytes.into(), PROFILE_MIN_RESPONSE_BYTES.into(), PROFILE_MAX_RESPONSE_BYTES.into())?;
    range("maxObservations", p.max_observations.into(), 1, PROFILE_MAX_OBSERVATIONS.into())?;
    range("maxWaitMs", p.max_wait_ms.into(), 0, PROFILE_MAX_WAIT_MS.into())?;
    // Lifetime and retention limits must be positive (BRC-194 §2).
    range("sessionSeconds", p.session_seconds, 1, u64::MAX)?;
    range("replaySeconds", p.replay_seconds, 1, u64::MAX)?;
    // expiresAt = T + sessionSeconds and replayUntil = expiresAt + replaySeconds
    // must stay representable for any plausible T (BRC-193 §8 checked arithmetic).
    if p.session_seconds.checked_add(p.replay_seconds).and_then(|s| s.checked_add(1 << 40)).is_none() {
        return Err(ManifestError::invalid(format!("service {name}: session plus replay seconds overflow")));
    }
    Ok(())
}

fn is_absolute_iri(s: &str) -> bool {
    match s.split_once(':') {
        Some((scheme, rest)) => {
            !rest.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn check_extensions(ext: &Option<Map<String, Value>>, critical: &Option<Vec<String>>) -> Result<(), ManifestError> {
    if let Some(ext) = ext {
        if let Some(k) = ext.keys().find(|k| !is_absolute_iri(k)) {
            return Err(ManifestError::invalid(format!("extension key {k} is not an absolute IRI")));
        }
    }
    if let Some(critical) = critical {
        let mut seen = std::collections::HashSet::new();
        for k in critical {
            if !seen.insert(k) || !ext.as_ref().is_some_and(|e| e.contains_key(k)) {
                return Err(ManifestError::invalid("critical must list distinct keys present in extensions"));
            }
        }
    }
    Ok(())
}

fn profile_entry(p: &LiveProfileConfig) -> Value {
    // U64 fields are decimal strings, U32 fields JSON integers (BRC-192 §1).
    json!({
        "id": LOOKUP_LIVE_PROFILE,
        "authentication": p.authentication.as_str(),
        "payment": "none",
        "maxRequestBytes": p.max_request_bytes,
        "maxResponseBytes": p.max_response_bytes,
        "parameters": {
            "replaySeconds": p.replay_seconds.to_string(),
            "sessionSeconds": p.session_seconds.to_string(),
            "maxObservations": p.max_observations,
            "maxWaitMs": p.max_wait_ms,
        }
    })
}

fn service_entry(s: &ServiceConfig) -> Result<Value, ManifestError> {
    check_string("service name", &s.name)?;
    check_rules(&s.name, &s.rules)?;
    if !is_hex32(&s.rules_digest) {
        return Err(ManifestError::invalid(format!("service {}: rulesDigest must be Hex32", s.name)));
    }
    check_profile(&s.name, &s.profile)?;
    Ok(json!({
        "name": s.name,
        "kind": "lookup",
        "rules": s.rules,
        "rulesDigest": s.rules_digest,
        "profiles": [profile_entry(&s.profile)],
    }))
}

/// Builds the BRC-194 §1 `Capabilities` body for lookup services offering
/// lookup-live-v1. Every bound a client would reject is rejected here first.
pub fn build_manifest(config: &ManifestConfig) -> Result<Value, ManifestError> {
    parse_identity(&config.identity)?;
    let base = canonical_base_url(&config.base_url, config.allow_local_http)
        .map_err(|e| ManifestError::invalid(e.to_string()))?;
    check_string("chain.network", &config.chain.network)?;
    if !is_hex32(&config.chain.genesis_hash) {
        return Err(ManifestError::invalid("chain.genesisHash must be Hex32"));
    }
    if config.issued_at >= config.expires_at {
        return Err(ManifestError::invalid("issuedAt must be before expiresAt"));
    }
    if config.services.len() > MAX_SERVICES {
        return Err(ManifestError::invalid("at most 256 services"));
    }
    let mut names = std::collections::HashSet::new();
    let mut services = Vec::with_capacity(config.services.len());
    for s in &config.services {
        // All entries are kind `lookup`, so (kind, name) uniqueness is name uniqueness.
        if !names.insert(s.name.as_str()) {
            return Err(ManifestError::invalid(format!("duplicate service {}", s.name)));
        }
        services.push(service_entry(s)?);
    }
    check_extensions(&config.extensions, &config.critical)?;
    let mut body = json!({
        "version": 1,
        "identity": config.identity,
        "baseURL": base,
        "chain": { "network": config.chain.network, "genesisHash": config.chain.genesis_hash },
        "issuedAt": config.issued_at.to_string(),
        "expiresAt": config.expires_at.to_string(),
        "services": services,
    });
    if let Some(ext) = &config.extensions {
        body["extensions"] = Value::Object(ext.clone());
    }
    if let Some(critical) = &config.critical {
        body["critical"] = json!(critical);
    }
    check_size(&body)?;
    Ok(body)
}

fn check_size(v: &Value) -> Result<(), ManifestError> {
    let len = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX);
    if len > MAX_MANIFEST_BYTES {
        return Err(ManifestError::invalid("manifest exceeds 256 KiB"));
    }
    Ok(())
}

/// `digest("capabilities", body)`: the value of `x-bsv-overlay-capability`.
pub fn capability_digest(body: &Value, preimage: impl Fn(&str, &Value) -> Vec<u8>) -> String {
    hex::encode(Sha256::digest(preimage(CAPABILITIES_TYPE, body)))
}

/// Signs a manifest body as the BRC-192 packet `{body, signature}`. The key
/// must be the body's `identity` (BRC-194 §1: signer equals identity).
pub fn sign_manifest(
    body: &Value,
    key: &SecretKey,
    preimage: impl Fn(&str, &Value) -> Vec<u8>,
) -> Result<Value, ManifestError> {
    let signer = hex::encode(PublicKey::from_secret_key_global(key).serialize());
    if body.get("identity").and_then(Value::as_str) != Some(signer.as_str()) {
        return Err(ManifestError::invalid("signing key does not match the manifest identity"));
    }
    let signature = sign_brc77(key, &preimage(CAPABILITIES_TYPE, body));
    let signed = json!({ "body": body, "signature": STANDARD.encode(signature) });
    check_size(&signed)?;
    Ok(signed)
}

/// Verifies a signed manifest's signature and signer role; returns the signer.
/// Freshness, chain, base URL and trust policy are the caller's checks.
pub fn verify_signed_manifest(
    signed: &Value,
    preimage: impl Fn(&str, &Value) -> Vec<u8>,
) -> Result<Identity, ManifestError> {
    let bad = |m: &str| ManifestError::invalid(m.to_string());
    let obj = signed.as_object().filter(|o| o.len() == 2).ok_or_else(|| bad("expected {body, signature}"))?;
    let body = obj.get("body").filter(|b| b.is_object()).ok_or_else(|| bad("missing body"))?;
    let sig_b64 = obj.get("signature").and_then(Value::as_str).ok_or_else(|| bad("missing signature"))?;
    let sig = decode_canonical_base64(sig_b64).ok_or_else(|| bad("signature is not canonical base64"))?;
    let identity = verify_brc77(&preimage(CAPABILITIES_TYPE, body), &sig)
        .map_err(|e| ManifestError::invalid(e.to_string()))?;
    if body.get("identity").and_then(Value::as_str) != Some(identity.to_hex().as_str()) {
        return Err(bad("signer is not the manifest identity"));
    }
    Ok(identity)
}

/// BRC-192 `Bytes`: standard base64 with padding, and only the one spelling.
pub fn decode_canonical_base64(s: &str) -> Option<Vec<u8>> {
    let bytes = STANDARD.decode(s).ok()?;
    (STANDARD.encode(&bytes) == s).then_some(bytes)
}
