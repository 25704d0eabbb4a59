//! Parsing a received batch from the exact response bytes (BRC-193 §2, BRC-192 §1–§2).
//!
//! The parse call is isolated in [`parse_batch`] so it can be switched to the strict
//! `wire` parser without touching the checks or the store. Objects are closed
//! (`deny_unknown_fields`); U64 fields are decimal strings; Hex32 is lowercase hex.
//!
//! Each observation is also reduced to its normalized bytes (keys sorted recursively,
//! compact) so that identity deduplication and equivocation compare content, not
//! the provider's key order (BRC-192 §2).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ClientError;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chain {
    pub network: String,
    #[serde(rename = "genesisHash")]
    pub genesis_hash: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    pub chain: Chain,
    pub provider: String,
    pub service: String,
    #[serde(rename = "queryDigest")]
    pub query_digest: String,
    #[serde(rename = "rulesDigest")]
    pub rules_digest: String,
    pub access: String,
    pub epoch: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    Snapshot,
    Live,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Snapshot => "snapshot",
            Phase::Live => "live",
        }
    }
}

/// An outpoint inside one source: the chain comes from the session scope (BRC-192 §1
/// compares all three components; within one scope the chain is fixed).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OutpointId {
    pub txid: String,
    #[serde(rename = "outputIndex")]
    pub output_index: u32,
}

impl OutpointId {
    /// Key bytes: 32 raw txid bytes then the index big-endian, so rows sort by outpoint.
    pub fn key(&self) -> Vec<u8> {
        let mut k = hex::decode(&self.txid).expect("txid was validated as Hex32");
        k.extend_from_slice(&self.output_index.to_be_bytes());
        k
    }
}

/// What an observation does to source membership (BRC-193 §9).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "lowercase")]
pub enum Effect {
    /// `output`: present, with the newest context (absent context is `None`).
    Present { outpoint: OutpointId, context: Option<Value> },
    /// `withdraw`: absent.
    Absent { outpoint: OutpointId },
    /// `spend` and other kinds: retained as receipts, no membership change.
    None,
}

#[derive(Clone, Debug)]
pub struct ParsedObservation {
    pub id: String,
    pub kind: String,
    pub effect: Effect,
    /// Transaction evidence it carries: the BEEF of an `output` (its evidence) or a
    /// `spend` (the spending transaction).
    pub evidence: Option<EvidenceClaim>,
    /// sha256 of the normalized observation bytes.
    pub digest: [u8; 32],
}

/// What an observation's BEEF is offered as evidence of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// `output`: the target transaction has this output.
    Output(u32),
    /// `spend`: the target transaction consumes this outpoint.
    Spends(OutpointId),
}

#[derive(Clone, Debug)]
pub struct EvidenceClaim {
    /// The asserted target txid (Hex32).
    pub txid: String,
    /// The bundle, base64 (validated canonical).
    pub beef: String,
    pub claim: Claim,
}

#[derive(Clone, Debug)]
pub struct ParsedGroup {
    pub id: String,
    pub sequence: u64,
    pub observations: Vec<ParsedObservation>,
    /// sha256 over the id, sequence and observation digests, in order.
    pub digest: [u8; 32],
}

#[derive(Clone, Debug)]
pub struct ParsedBatch {
    pub session: String,
    pub scope: Scope,
    pub phase: Phase,
    pub groups: Vec<ParsedGroup>,
    pub cursor: String,
    pub snapshot_complete: bool,
    pub through: u64,
    pub high_water: u64,
    pub expires_at: u64,
    pub replay_until: u64,
}

impl ParsedBatch {
    pub fn observation_count(&self) -> usize {
        self.groups.iter().map(|g| g.observations.len()).sum()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    #[serde(rename = "maxBytes")]
    _max_bytes: u32,
    #[serde(rename = "maxObservations")]
    _max_observations: u32,
    #[serde(rename = "waitMs")]
    _wait_ms: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBatch {
    version: u32,
    session: String,
    scope: Scope,
    phase: Phase,
    groups: Vec<RawGroup>,
    cursor: String,
    #[serde(rename = "snapshotComplete")]
    snapshot_complete: bool,
    through: String,
    #[serde(rename = "highWater")]
    high_water: String,
    #[serde(rename = "expiresAt")]
    expires_at: String,
    #[serde(rename = "replayUntil")]
    replay_until: String,
    #[serde(rename = "limits")]
    _limits: RawLimits,
    extensions: Option<serde_json::Map<String, Value>>,
    critical: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    id: String,
    sequence: String,
    observations: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObservation {
    id: String,
    scope: Scope,
    kind: String,
    payload: Value,
    extensions: Option<serde_json::Map<String, Value>>,
    critical: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvidence {
    txid: String,
    #[serde(rename = "outputIndex")]
    output_index: u32,
    beef: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    schema: String,
    bytes: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutputPayload {
    evidence: RawEvidence,
    context: Option<RawContext>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutpoint {
    chain: Chain,
    txid: String,
    #[serde(rename = "outputIndex")]
    output_index: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpendPayload {
    previous: RawOutpoint,
    #[serde(rename = "spendingTxid")]
    spending_txid: String,
    beef: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWithdrawPayload {
    outpoint: RawOutpoint,
    reason: String,
}

/// Parses and shape-checks one batch body. Every failure is `invalid`
/// (or `unsupported` for an unknown critical extension).
pub fn parse_batch(bytes: &[u8]) -> Result<ParsedBatch, ClientError> {
    let StrictValue(value) =
        serde_json::from_slice(bytes).map_err(|e| ClientError::invalid(format!("batch JSON: {e}")))?;
    let raw: RawBatch = serde_json::from_value(value).map_err(|e| ClientError::invalid(format!("batch: {e}")))?;
    if raw.version != 1 {
        return Err(ClientError::unsupported(format!("batch version {}", raw.version)));
    }
    check_extensions(&raw.extensions, &raw.critical)?;
    check_text("session", &raw.session)?;
    check_text("cursor", &raw.cursor)?;
    check_scope(&raw.scope)?;
    let mut groups = Vec::with_capacity(raw.groups.len());
    for g in raw.groups {
        groups.push(parse_group(g, &raw.scope)?);
    }
    Ok(ParsedBatch {
        session: raw.session,
        scope: raw.scope,
        phase: raw.phase,
        groups,
        cursor: raw.cursor,
        snapshot_complete: raw.snapshot_complete,
        through: parse_u64("through", &raw.through)?,
        high_water: parse_u64("highWater", &raw.high_water)?,
        expires_at: parse_u64("expiresAt", &raw.expires_at)?,
        replay_until: parse_u64("replayUntil", &raw.replay_until)?,
    })
}

fn parse_group(g: RawGroup, scope: &Scope) -> Result<ParsedGroup, ClientError> {
    check_text("group id", &g.id)?;
    let sequence = parse_u64("sequence", &g.sequence)?;
    let mut observations = Vec::with_capacity(g.observations.len());
    let mut h = Sha256::new();
    h.update((g.id.len() as u64).to_be_bytes());
    h.update(g.id.as_bytes());
    h.update(sequence.to_be_bytes());
    for v in g.observations {
        let o = parse_observation(v, scope)?;
        h.update(o.digest);
        observations.push(o);
    }
    Ok(ParsedGroup { id: g.id, sequence, observations, digest: h.finalize().into() })
}

fn parse_observation(v: Value, scope: &Scope) -> Result<ParsedObservation, ClientError> {
    let digest: [u8; 32] = Sha256::digest(normalized_bytes(&v)).into();
    let raw: RawObservation =
        serde_json::from_value(v).map_err(|e| ClientError::invalid(format!("observation: {e}")))?;
    check_text("observation id", &raw.id)?;
    check_extensions(&raw.extensions, &raw.critical)?;
    // BRC-193 §8: every observation's scope equals the batch scope.
    if &raw.scope != scope {
        return Err(ClientError::invalid(format!("observation {} has a scope other than the batch scope", raw.id)));
    }
    let mut evidence = None;
    let effect = match raw.kind.as_str() {
        "output" => {
            let p: RawOutputPayload = payload(&raw)?;
            check_hex32("evidence.txid", &p.evidence.txid)?;
            check_base64("evidence.beef", &p.evidence.beef)?;
            let context = match p.context {
                Some(c) => {
                    check_text("context.schema", &c.schema)?;
                    check_base64("context.bytes", &c.bytes)?;
                    Some(serde_json::json!({"schema": c.schema, "bytes": c.bytes}))
                }
                None => None,
            };
            evidence = Some(EvidenceClaim {
                txid: p.evidence.txid.clone(),
                beef: p.evidence.beef.clone(),
                claim: Claim::Output(p.evidence.output_index),
            });
            Effect::Present {
                outpoint: OutpointId { txid: p.evidence.txid, output_index: p.evidence.output_index },
                context,
            }
        }
        "withdraw" => {
            let p: RawWithdrawPayload = payload(&raw)?;
            check_text("reason", &p.reason)?;
            Effect::Absent { outpoint: outpoint_in_scope(p.outpoint, scope)? }
        }
        "spend" => {
            let p: RawSpendPayload = payload(&raw)?;
            let previous = outpoint_in_scope(p.previous, scope)?;
            check_hex32("spendingTxid", &p.spending_txid)?;
            check_base64("beef", &p.beef)?;
            evidence = Some(EvidenceClaim { txid: p.spending_txid.clone(), beef: p.beef.clone(), claim: Claim::Spends(previous) });
            Effect::None
        }
        // Other BRC-192 kinds are kept as receipts; they do not touch membership.
        "assessment-invalidated" | "proposal" | "proposal-state" | "proposal-remove" => Effect::None,
        other => return Err(ClientError::invalid(format!("unknown observation kind {other:?}"))),
    };
    Ok(ParsedObservation { id: raw.id, kind: raw.kind, effect, evidence, digest })
}

fn payload<T: serde::de::DeserializeOwned>(o: &RawObservation) -> Result<T, ClientError> {
    serde_json::from_value(o.payload.clone())
        .map_err(|e| ClientError::invalid(format!("{} payload of {}: {e}", o.kind, o.id)))
}

fn outpoint_in_scope(o: RawOutpoint, scope: &Scope) -> Result<OutpointId, ClientError> {
    check_hex32("txid", &o.txid)?;
    if o.chain != scope.chain {
        return Err(ClientError::invalid("outpoint chain differs from the session scope"));
    }
    Ok(OutpointId { txid: o.txid, output_index: o.output_index })
}

fn check_scope(s: &Scope) -> Result<(), ClientError> {
    check_text("chain.network", &s.chain.network)?;
    check_hex32("chain.genesisHash", &s.chain.genesis_hash)?;
    for (name, v) in [("provider", &s.provider), ("service", &s.service), ("access", &s.access), ("epoch", &s.epoch)] {
        check_text(name, v)?;
    }
    check_hex32("queryDigest", &s.query_digest)?;
    check_hex32("rulesDigest", &s.rules_digest)
}

/// BRC-192 §1: an unknown critical extension is `unsupported`; `critical` names only
/// keys present in `extensions`, without duplicates.
fn check_extensions(ext: &Option<serde_json::Map<String, Value>>, critical: &Option<Vec<String>>) -> Result<(), ClientError> {
    if let Some(c) = critical {
        let mut seen = std::collections::BTreeSet::new();
        for k in c {
            if !seen.insert(k) || !ext.as_ref().is_some_and(|e| e.contains_key(k)) {
                return Err(ClientError::invalid("critical must name distinct keys present in extensions"));
            }
        }
        if !c.is_empty() {
            return Err(ClientError::unsupported(format!("unknown critical extension {}", c[0])));
        }
    }
    Ok(())
}

/// BRC-192 §1 strings: nonempty, at most 1024 UTF-8 bytes.
pub fn check_text(name: &str, s: &str) -> Result<(), ClientError> {
    if s.is_empty() || s.len() > 1024 {
        return Err(ClientError::invalid(format!("{name} must be 1..=1024 bytes")));
    }
    Ok(())
}

pub fn check_hex32(name: &str, s: &str) -> Result<(), ClientError> {
    if s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        Ok(())
    } else {
        Err(ClientError::invalid(format!("{name} is not Hex32")))
    }
}

fn check_base64(name: &str, s: &str) -> Result<(), ClientError> {
    use base64::Engine;
    let e = base64::engine::general_purpose::STANDARD;
    match e.decode(s) {
        Ok(b) if e.encode(&b) == s => Ok(()),
        _ => Err(ClientError::invalid(format!("{name} is not canonical base64"))),
    }
}

/// BRC-192 §1 U64: `0|[1-9][0-9]*`, at most u64::MAX.
pub fn parse_u64(name: &str, s: &str) -> Result<u64, ClientError> {
    let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    if !ok {
        return Err(ClientError::invalid(format!("{name} is not a U64 string")));
    }
    s.parse::<u64>().map_err(|_| ClientError::invalid(format!("{name} exceeds U64")))
}

/// Keys sorted recursively, compact. Stands in for JCS until the `wire` module's
/// canonicalizer is wired in; it is only compared with itself.
pub fn normalized_bytes(v: &Value) -> Vec<u8> {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_vec(&sorted(v)).expect("a Value always serializes")
}

/// A JSON value whose objects, at any depth, have no duplicate member names
/// (BRC-192 §1). serde_json alone keeps the last duplicate silently.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v).map(Value::Number).ok_or_else(|| E::custom("non-finite number"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let StrictValue(v) = map.next_value()?;
            if out.insert(k.clone(), v).is_some() {
                return Err(serde::de::Error::custom(format!("duplicate member {k:?}")));
            }
        }
        Ok(Value::Object(out))
    }
}
