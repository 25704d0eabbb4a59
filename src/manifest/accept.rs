//! Client-side acceptance of a received signed manifest (BRC-194 §1–2, §6).
//!
//! Checks, in order: packet shape and BRC-77 signature with signer = identity;
//! the closed body shape; expected identity, canonical base and chain; time
//! (expired, issued in the future beyond the caller's skew); duplicates and
//! counts; the lookup-live-v1 parameter schema and bounds (values above a
//! profile maximum are clamped, zero where a positive value is required is
//! rejected). Profiles and
//! service kinds this crate does not implement are kept but not interpreted.
use serde_json::{Map, Value};

use super::{
    capability_digest, is_hex32, parse_u64, verify_signed_manifest, ErrorCode, ManifestError,
    LOOKUP_LIVE_PROFILE, MAX_MANIFEST_BYTES, MAX_SERVICES, PROFILE_MAX_OBSERVATIONS,
    PROFILE_MAX_REQUEST_BYTES, PROFILE_MAX_RESPONSE_BYTES, PROFILE_MAX_WAIT_MS,
};

/// BRC-194 §1: at most 32 profiles per service.
pub const MAX_PROFILES: usize = 32;

/// What the caller already trusts about the provider.
#[derive(Debug, Clone)]
pub struct Expectation<'a> {
    /// Expected identity (from SHIP/SLAP or configuration), if known.
    pub identity: Option<&'a str>,
    /// The canonical base the client selected.
    pub base_url: &'a str,
    pub network: &'a str,
    pub genesis_hash: &'a str,
    /// Local clock, Unix seconds.
    pub now: u64,
    /// Finite allowance for a provider clock ahead of ours.
    pub max_future_skew: u64,
}

/// A lookup-live-v1 offer taken from an accepted manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveOffer {
    pub service: String,
    pub rules_digest: String,
    pub authentication: String,
    pub max_request_bytes: u32,
    pub max_response_bytes: u32,
    pub session_seconds: u64,
    pub replay_seconds: u64,
    pub max_observations: u32,
    pub max_wait_ms: u32,
}

/// An accepted manifest: its digest (for `x-bsv-overlay-capability`), expiry
/// and the lookup-live offers it contains.
#[derive(Debug, Clone)]
pub struct AcceptedManifest {
    pub digest: String,
    pub identity: String,
    pub expires_at: u64,
    pub live: Vec<LiveOffer>,
}

fn invalid(m: impl Into<String>) -> ManifestError {
    ManifestError::new(ErrorCode::Invalid, m)
}

fn closed<'v>(v: &'v Value, what: &str, required: &[&str], optional: &[&str]) -> Result<&'v Map<String, Value>, ManifestError> {
    let obj = v.as_object().ok_or_else(|| invalid(format!("{what} must be an object")))?;
    if let Some(k) = obj.keys().find(|k| !required.contains(&k.as_str()) && !optional.contains(&k.as_str())) {
        return Err(invalid(format!("{what} has unknown field {k}")));
    }
    if let Some(k) = required.iter().find(|k| !obj.contains_key(**k)) {
        return Err(invalid(format!("{what} lacks {k}")));
    }
    Ok(obj)
}

/// BRC-192 §1 plain string: 1–1024 UTF-8 bytes.
fn str_field<'v>(o: &'v Map<String, Value>, k: &str) -> Result<&'v str, ManifestError> {
    o[k].as_str()
        .filter(|s| !s.is_empty() && s.len() <= 1024)
        .ok_or_else(|| invalid(format!("{k} must be a string of 1-1024 bytes")))
}

fn u64_field(o: &Map<String, Value>, k: &str) -> Result<u64, ManifestError> {
    o[k].as_str().and_then(parse_u64).ok_or_else(|| invalid(format!("{k} must be a U64 string")))
}

/// A U32 of at least `lo`; values above the profile maximum `hi` are clamped,
/// because the profile's own bounds override larger advertised values
/// (BRC-194 §2).
fn u32_field(o: &Map<String, Value>, k: &str, lo: u32, hi: u32) -> Result<u32, ManifestError> {
    o[k].as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n >= lo)
        .map(|n| n.min(hi))
        .ok_or_else(|| invalid(format!("{k} must be a U32 of at least {lo}")))
}

/// Verifies and checks a received `{body, signature}` manifest.
pub fn accept_manifest(
    signed: &Value,
    preimage: impl Fn(&str, &Value) -> Vec<u8>,
    expect: &Expectation<'_>,
) -> Result<AcceptedManifest, ManifestError> {
    let size = serde_json::to_vec(signed).map(|b| b.len()).unwrap_or(usize::MAX);
    if size > MAX_MANIFEST_BYTES {
        return Err(invalid("manifest exceeds 256 KiB"));
    }
    let signer = verify_signed_manifest(signed, &preimage)?.to_hex();
    let body = &signed["body"];
    let b = closed(body, "manifest", &["version", "identity", "baseURL", "chain", "issuedAt", "expiresAt", "services"], &["extensions", "critical"])?;
    match b["version"].as_u64() {
        Some(1) => {}
        Some(_) => return Err(ManifestError::new(ErrorCode::Unsupported, "manifest version is not 1")),
        None => return Err(invalid("manifest version must be an integer")),
    }
    if expect.identity.is_some_and(|id| id != signer) {
        return Err(invalid("manifest identity is not the expected provider"));
    }
    if b["baseURL"].as_str() != Some(expect.base_url) {
        return Err(invalid("manifest baseURL is not the selected base"));
    }
    let chain = closed(&b["chain"], "chain", &["network", "genesisHash"], &[])?;
    if chain["network"].as_str() != Some(expect.network) || chain["genesisHash"].as_str() != Some(expect.genesis_hash) {
        return Err(invalid("manifest is for a different chain"));
    }
    let (issued, expires) = (u64_field(b, "issuedAt")?, u64_field(b, "expiresAt")?);
    if issued > expires {
        return Err(invalid("issuedAt is after expiresAt"));
    }
    if expect.now >= expires {
        return Err(ManifestError::new(ErrorCode::Expired, "manifest expired"));
    }
    if issued > expect.now.saturating_add(expect.max_future_skew) {
        return Err(invalid("manifest issued in the future"));
    }
    check_critical(b)?;
    let services = b["services"].as_array().ok_or_else(|| invalid("services must be an array"))?;
    if services.len() > MAX_SERVICES {
        return Err(invalid("more than 256 services"));
    }
    let mut seen = std::collections::HashSet::new();
    let mut live = Vec::new();
    for s in services {
        let (kind, name, offer) = check_service(s)?;
        if !seen.insert((kind.to_string(), name.to_string())) {
            return Err(invalid(format!("duplicate service ({kind}, {name})")));
        }
        live.extend(offer);
    }
    Ok(AcceptedManifest { digest: capability_digest(body, &preimage), identity: signer, expires_at: expires, live })
}

fn check_critical(b: &Map<String, Value>) -> Result<(), ManifestError> {
    let ext = match b.get("extensions") {
        None => None,
        Some(Value::Object(e)) => Some(e),
        Some(_) => return Err(invalid("extensions must be an object")),
    };
    let Some(critical) = b.get("critical") else { return Ok(()) };
    let list = critical.as_array().ok_or_else(|| invalid("critical must be an array"))?;
    let mut seen = std::collections::HashSet::new();
    for k in list {
        let k = k.as_str().ok_or_else(|| invalid("critical entries are strings"))?;
        if !seen.insert(k) || !ext.is_some_and(|e| e.contains_key(k)) {
            return Err(invalid("critical must list distinct keys present in extensions"));
        }
    }
    // We interpret no manifest extensions, so any critical one is unsupported (BRC-192 §1).
    if !list.is_empty() {
        return Err(ManifestError::new(ErrorCode::Unsupported, "unknown critical manifest extension"));
    }
    Ok(())
}

fn check_service(s: &Value) -> Result<(&str, &str, Option<LiveOffer>), ManifestError> {
    let o = closed(s, "service", &["name", "kind", "rules", "rulesDigest", "profiles"], &[])?;
    let name = str_field(o, "name")?;
    let kind = o["kind"].as_str().filter(|k| matches!(*k, "lookup" | "topic" | "coordination")).ok_or_else(|| invalid("service kind"))?;
    let rules = closed(&o["rules"], "rules", &["id", "parameters"], &[])?;
    if !rules["id"].is_string() || !rules["parameters"].is_object() {
        return Err(invalid("rules must be {id:string, parameters:object}"));
    }
    let rules_digest = o["rulesDigest"].as_str().filter(|d| is_hex32(d)).ok_or_else(|| invalid("rulesDigest must be Hex32"))?;
    let profiles = o["profiles"].as_array().ok_or_else(|| invalid("profiles must be an array"))?;
    if profiles.len() > MAX_PROFILES {
        return Err(invalid("more than 32 profiles in a service"));
    }
    let mut ids = std::collections::HashSet::new();
    let mut offer = None;
    for p in profiles {
        let po = closed(p, "profile", &["id", "authentication", "payment", "maxRequestBytes", "maxResponseBytes", "parameters"], &[])?;
        let id = po["id"].as_str().ok_or_else(|| invalid("profile id must be a string"))?;
        if !ids.insert(id) {
            return Err(invalid(format!("duplicate profile {id} in service {name}")));
        }
        if id == LOOKUP_LIVE_PROFILE {
            // BRC-194 §6: lookup-live requires kind lookup.
            if kind != "lookup" {
                return Err(invalid("lookup-live-v1 offered on a non-lookup service"));
            }
            offer = Some(live_offer(name, rules_digest, po)?);
        }
    }
    Ok((kind, name, offer))
}

fn live_offer(name: &str, rules_digest: &str, p: &Map<String, Value>) -> Result<LiveOffer, ManifestError> {
    let authentication = p["authentication"].as_str().filter(|a| matches!(*a, "none" | "brc103")).ok_or_else(|| invalid("lookup-live authentication must be none or brc103"))?;
    if p["payment"].as_str() != Some("none") {
        return Err(invalid("lookup-live payment must be none"));
    }
    let params = closed(&p["parameters"], "lookup-live parameters", &["replaySeconds", "sessionSeconds", "maxObservations", "maxWaitMs"], &[])?;
    let positive = |k: &str| u64_field(params, k).and_then(|v| if v > 0 { Ok(v) } else { Err(invalid(format!("{k} must be positive"))) });
    Ok(LiveOffer {
        service: name.to_string(),
        rules_digest: rules_digest.to_string(),
        authentication: authentication.to_string(),
        max_request_bytes: u32_field(p, "maxRequestBytes", 1, PROFILE_MAX_REQUEST_BYTES)?,
        max_response_bytes: u32_field(p, "maxResponseBytes", 1, PROFILE_MAX_RESPONSE_BYTES)?,
        session_seconds: positive("sessionSeconds")?,
        replay_seconds: positive("replaySeconds")?,
        max_observations: u32_field(params, "maxObservations", 1, PROFILE_MAX_OBSERVATIONS)?,
        max_wait_ms: u32_field(params, "maxWaitMs", 0, PROFILE_MAX_WAIT_MS)?,
    })
}
