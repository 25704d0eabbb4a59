//! Request and response objects of BRC-193 §2 and the observation shapes of BRC-192 §1–§2.
//!
//! Requests (`Open`, `Read`, `Close`) have strict parsers: protocol objects are
//! closed (an unknown member is `invalid`), `null` is never accepted in place of
//! a missing optional member, and every field is validated. Responses (`Batch`,
//! `Group`, `Observation`, ...) serialize with serde in the field order of the
//! spec's type listings, U64 as decimal strings and Bytes as canonical base64.

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::encoding::{check_absolute_iri, check_request_id, check_text, parse_u32, Bytes, Hex32, U64};
use super::error::WireError;
use super::jcs;
use super::json::{parse_strict, NumberMode};
use super::limits::{Limits, MAX_EXTENSIONS, MAX_REQUEST_BYTES};

/// The constant `version: 1` member; serializes as the integer 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct V1;

impl Serialize for V1 {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(1)
    }
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

/// A validated Open request (BRC-193 §2), normalized: limits are clamped to the
/// profile maxima, so requests that differ only above the maxima are equal.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Open {
    pub version: V1,
    pub request_id: String,
    pub service: String,
    /// Application-defined; not closed, but within the hard JSON limits.
    pub query: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_rules_digest: Option<Hex32>,
    pub limits: Limits,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Map<String, Value>>,
    /// Always absent or empty after parsing: any critical extension is `unsupported`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub critical: Option<Vec<String>>,
}

impl Open {
    /// `queryDigest = digest("lookup-query", {service, query})` (BRC-193 §2).
    pub fn query_digest(&self) -> Hex32 {
        let mut body = Map::new();
        body.insert("service".to_string(), Value::String(self.service.clone()));
        body.insert("query".to_string(), self.query.clone());
        Hex32(jcs::digest_bytes("lookup-query", &Value::Object(body)))
    }

    /// RFC 8785 bytes of the normalized request: the identity compared when an
    /// Open is retried (BRC-192 §9 normalized equality, BRC-193 §8).
    pub fn normalized_bytes(&self) -> Vec<u8> {
        canonical_bytes(self).unwrap_or_default()
    }
}

/// A validated Read request (BRC-193 §2); limits clamped like [`Open`]'s.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Read {
    pub version: V1,
    pub session: String,
    pub cursor: String,
    pub limits: Limits,
}

/// A validated Close request (BRC-193 §2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Close {
    pub version: V1,
    pub session: String,
}

/// Parses and validates an Open request body.
pub fn parse_open(body: &[u8]) -> Result<Open, WireError> {
    let mut map = request_object(body)?;
    let obj = Obj::closed_map(
        &map,
        "",
        &["version", "requestId", "service", "query", "requiredRulesDigest", "limits", "extensions", "critical"],
    )?;
    let request_id = obj.req_str("requestId")?;
    check_request_id(request_id).map_err(|e| at("requestId", e))?;
    let service = obj.text("service")?;
    obj.req("query")?;
    let required_rules_digest = match obj.opt("requiredRulesDigest")? {
        Some(v) => Some(hex32(v, "requiredRulesDigest")?),
        None => None,
    };
    let limits = limits(obj.req("limits")?, "limits")?;
    let critical = match obj.opt("critical")? {
        Some(v) => Some(critical(v, obj.opt("extensions")?)?),
        None => None,
    };
    if let Some(v) = obj.opt("extensions")? {
        extensions(v)?;
    }
    if let Some(first) = critical.as_ref().and_then(|c| c.first()) {
        return Err(WireError::unsupported(format!(
            "critical extension {} is not supported",
            excerpt(first)
        )));
    }
    let request_id = request_id.to_string();
    let query = map.swap_remove("query").unwrap_or(Value::Null);
    let extensions = match map.swap_remove("extensions") {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    };
    Ok(Open {
        version: V1,
        request_id,
        service,
        query,
        required_rules_digest,
        limits,
        extensions,
        critical,
    })
}

/// Parses and validates a Read request body.
pub fn parse_read(body: &[u8]) -> Result<Read, WireError> {
    let map = request_object(body)?;
    let obj = Obj::closed_map(&map, "", &["version", "session", "cursor", "limits"])?;
    Ok(Read {
        version: V1,
        session: obj.text("session")?,
        cursor: obj.text("cursor")?,
        limits: limits(obj.req("limits")?, "limits")?,
    })
}

/// Parses and validates a Close request body.
pub fn parse_close(body: &[u8]) -> Result<Close, WireError> {
    let map = request_object(body)?;
    let obj = Obj::closed_map(&map, "", &["version", "session"])?;
    Ok(Close { version: V1, session: obj.text("session")? })
}

/// Size bound, strict JSON, a top-level object, then the version gate.
///
/// The version is judged before the other members: a different integer version
/// may define other fields, so it is `unsupported` whatever else it carries;
/// a missing or non-integer version is `invalid`.
fn request_object(body: &[u8]) -> Result<Map<String, Value>, WireError> {
    if body.len() > MAX_REQUEST_BYTES {
        return Err(WireError::limited(format!("request body larger than {MAX_REQUEST_BYTES} bytes")));
    }
    let Value::Object(map) = parse_strict(body, NumberMode::SafeInteger)? else {
        return Err(WireError::invalid("request body must be a JSON object"));
    };
    match map.get("version") {
        None => Err(WireError::invalid("version: missing")),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(1) => Ok(map),
            Some(other) => Err(WireError::unsupported(format!("version {other} is not supported"))),
            None => Err(WireError::invalid("version: expected the integer 1")),
        },
        Some(_) => Err(WireError::invalid("version: expected the integer 1")),
    }
}

fn limits(v: &Value, path: &str) -> Result<Limits, WireError> {
    let obj = Obj::closed(v, path, &["maxBytes", "maxObservations", "waitMs"])?;
    let positive = |key: &str| -> Result<u32, WireError> {
        let n = obj.u32(key)?;
        if n == 0 {
            return Err(WireError::invalid(format!("{path}.{key}: must be positive")));
        }
        Ok(n)
    };
    let l = Limits {
        max_bytes: positive("maxBytes")?,
        max_observations: positive("maxObservations")?,
        wait_ms: obj.u32("waitMs")?,
    };
    Ok(l.clamped())
}

pub(super) fn extensions(v: &Value) -> Result<(), WireError> {
    let Value::Object(map) = v else {
        return Err(WireError::invalid("extensions: expected an object"));
    };
    if map.len() > MAX_EXTENSIONS {
        return Err(WireError::invalid(format!("extensions: more than {MAX_EXTENSIONS} entries")));
    }
    for key in map.keys() {
        check_absolute_iri(key).map_err(|e| at("extensions", e))?;
    }
    Ok(())
}

/// `critical`: a duplicate-free array of keys present in `extensions` (BRC-192 §1).
pub(super) fn critical(v: &Value, extensions: Option<&Value>) -> Result<Vec<String>, WireError> {
    let Value::Array(items) = v else {
        return Err(WireError::invalid("critical: expected an array"));
    };
    if items.len() > MAX_EXTENSIONS {
        return Err(WireError::invalid(format!("critical: more than {MAX_EXTENSIONS} entries")));
    }
    let ext = extensions.and_then(Value::as_object);
    let mut out: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Value::String(s) = item else {
            return Err(WireError::invalid("critical: expected strings"));
        };
        if out.contains(s) {
            return Err(WireError::invalid("critical: duplicate entry"));
        }
        if !ext.is_some_and(|m| m.contains_key(s)) {
            return Err(WireError::invalid("critical: entry is not a key of extensions"));
        }
        out.push(s.clone());
    }
    Ok(out)
}

pub(super) fn hex32(v: &Value, path: &str) -> Result<Hex32, WireError> {
    let s = v.as_str().ok_or_else(|| WireError::invalid(format!("{path}: expected a string")))?;
    Hex32::parse(s).map_err(|e| at(path, e))
}

pub(super) fn at(path: &str, e: WireError) -> WireError {
    WireError { message: format!("{path}: {}", e.message), ..e }
}

/// A short, safe rendering of client-supplied text for messages.
pub(super) fn excerpt(s: &str) -> String {
    let mut end = s.len().min(64);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::new();
    jcs::write_json_string(&mut out, &s[..end]);
    out
}

/// Read access to a closed protocol object.
pub(super) struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
}

impl<'a> Obj<'a> {
    pub(super) fn closed(v: &'a Value, path: &'a str, allowed: &[&str]) -> Result<Obj<'a>, WireError> {
        match v {
            Value::Object(map) => Obj::closed_map(map, path, allowed),
            _ => Err(WireError::invalid(format!("{path}: expected an object"))),
        }
    }

    pub(super) fn closed_map(map: &'a Map<String, Value>, path: &'a str, allowed: &[&str]) -> Result<Obj<'a>, WireError> {
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let at = if path.is_empty() { String::new() } else { format!("{path}: ") };
            return Err(WireError::invalid(format!("{at}unknown member {}", excerpt(k))));
        }
        Ok(Obj { map, path })
    }

    pub(super) fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(super) fn req(&self, key: &str) -> Result<&'a Value, WireError> {
        self.map
            .get(key)
            .ok_or_else(|| WireError::invalid(format!("{}: missing", self.name(key))))
    }

    /// Missing is `None`; `null` is not a substitute for missing (BRC-192 §1).
    pub(super) fn opt(&self, key: &str) -> Result<Option<&'a Value>, WireError> {
        match self.map.get(key) {
            Some(Value::Null) => Err(WireError::invalid(format!("{}: null is not allowed", self.name(key)))),
            other => Ok(other),
        }
    }

    pub(super) fn req_str(&self, key: &str) -> Result<&'a str, WireError> {
        self.req(key)?
            .as_str()
            .ok_or_else(|| WireError::invalid(format!("{}: expected a string", self.name(key))))
    }

    pub(super) fn text(&self, key: &str) -> Result<String, WireError> {
        let s = self.req_str(key)?;
        check_text(s).map_err(|e| at(&self.name(key), e))?;
        Ok(s.to_string())
    }

    pub(super) fn u32(&self, key: &str) -> Result<u32, WireError> {
        parse_u32(self.req(key)?).map_err(|e| at(&self.name(key), e))
    }
}

// ---------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------

/// `Chain` (BRC-192 §1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chain {
    pub network: String,
    pub genesis_hash: Hex32,
}

/// `Outpoint` (BRC-192 §1); equality compares all three components.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outpoint {
    pub chain: Chain,
    pub txid: Hex32,
    pub output_index: u32,
}

/// `Scope` (BRC-192 §1) that every observation of a batch carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scope {
    pub chain: Chain,
    pub provider: String,
    pub service: String,
    pub query_digest: Hex32,
    pub rules_digest: Hex32,
    pub access: String,
    pub epoch: String,
}

/// `Evidence` (BRC-192 §1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub txid: Hex32,
    pub output_index: u32,
    pub beef: Bytes,
}

/// Optional provider context of an `output` observation (BRC-192 §2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OutputContext {
    /// Absolute IRI of the context schema.
    pub schema: String,
    pub bytes: Bytes,
}

/// The `kind`/`payload` pairs a lookup-live provider emits (BRC-192 §2).
/// Serializes as the payload object only; [`Observation`] writes `kind`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Payload {
    Output {
        evidence: Evidence,
        #[serde(skip_serializing_if = "Option::is_none")]
        context: Option<OutputContext>,
    },
    Spend {
        previous: Outpoint,
        #[serde(rename = "spendingTxid")]
        spending_txid: Hex32,
        beef: Bytes,
    },
    Withdraw {
        outpoint: Outpoint,
        reason: String,
    },
    AssessmentInvalidated {
        #[serde(rename = "contextId")]
        context_id: String,
        reason: String,
    },
}

impl Payload {
    /// The observation `kind` of this payload.
    pub fn kind(&self) -> &'static str {
        match self {
            Payload::Output { .. } => "output",
            Payload::Spend { .. } => "spend",
            Payload::Withdraw { .. } => "withdraw",
            Payload::AssessmentInvalidated { .. } => "assessment-invalidated",
        }
    }
}

/// `Observation = {id, scope, kind, payload}` (BRC-192 §2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub id: String,
    pub scope: Scope,
    pub payload: Payload,
}

impl Serialize for Observation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Observation", 4)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("scope", &self.scope)?;
        st.serialize_field("kind", self.payload.kind())?;
        st.serialize_field("payload", &self.payload)?;
        st.end()
    }
}

/// `Group` (BRC-193 §2): one indivisible committed change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Group {
    pub id: String,
    pub sequence: U64,
    pub observations: Vec<Observation>,
}

/// Batch phase (BRC-193 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Snapshot,
    Live,
}

/// `Batch` (BRC-193 §2), the success response of open and read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    pub version: V1,
    pub session: String,
    pub scope: Scope,
    pub phase: Phase,
    pub groups: Vec<Group>,
    pub cursor: String,
    pub snapshot_complete: bool,
    pub through: U64,
    pub high_water: U64,
    pub expires_at: U64,
    pub replay_until: U64,
    pub limits: Limits,
}

/// `{version:1, closed:true}`, the close response (BRC-193 §2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Closed {
    pub version: V1,
    pub closed: ClosedTrue,
}

/// Serializes as `true`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClosedTrue;

impl Serialize for ClosedTrue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bool(true)
    }
}

/// Compact JSON of a response in its fixed field order: the same value always
/// gives the same bytes. Errors only if `T`'s Serialize impl fails.
pub fn response_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    serde_json::to_vec(value).map_err(|e| WireError::new(super::ErrorCode::Unavailable, format!("serialization failed: {e}")))
}

/// RFC 8785 canonical bytes of any serializable value (for digests and
/// normalized equality).
pub fn canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let v = serde_json::to_value(value)
        .map_err(|e| WireError::new(super::ErrorCode::Unavailable, format!("serialization failed: {e}")))?;
    jcs::canonicalize(&v).map(String::into_bytes)
}
