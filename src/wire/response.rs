//! Strict parsing of responses, for clients and for tests that check what the
//! provider serializes: `Batch` (BRC-193 §2) with its groups and observations
//! (BRC-192 §1–§2), and the error body (BRC-193 §6, §8).
//!
//! Structural only: shapes, closed objects and encodings. Cross-field rules a
//! client enforces (every observation's scope equals the batch scope, sequence
//! and watermark order) are left to the caller. Extensions on a batch or an
//! observation are validated and, as we support none, a critical one is
//! `unsupported`; non-critical ones are not retained.

use serde_json::Value;

use super::encoding::{check_absolute_iri, Bytes, U64};
use super::error::{ErrorCode, Limit, LimitKind, WireError, MAX_ERROR_BODY_BYTES};
use super::jcs::canonicalize;
use super::json::{parse_strict, NumberMode};
use super::limits::{Limits, PROFILE_MAX_BYTES};
use super::types::{
    at, critical, excerpt, extensions, hex32, Batch, Chain, Evidence, Group, Obj, Observation, Outpoint, OutputContext,
    Payload, Phase, Scope, V1,
};

/// Parses a Batch response body (at most the 4 MiB profile maximum).
pub fn parse_batch(body: &[u8]) -> Result<Batch, WireError> {
    let v = batch_value(body)?;
    batch(&v)
}

/// A received Batch with, per group and observation, the SHA-256 of the observation's
/// RFC 8785 bytes as received (extensions included): the normalized identity a client
/// compares for deduplication and equivocation (BRC-192 §2, §9).
pub struct ReceivedBatch {
    pub batch: Batch,
    pub observation_digests: Vec<Vec<[u8; 32]>>,
}

/// [`parse_batch`], keeping each observation's normalized digest.
pub fn parse_received_batch(body: &[u8]) -> Result<ReceivedBatch, WireError> {
    use sha2::{Digest, Sha256};
    let v = batch_value(body)?;
    let batch = batch(&v)?;
    let groups = v["groups"].as_array().expect("a parsed batch has groups");
    let mut observation_digests = Vec::with_capacity(groups.len());
    for g in groups {
        let obs = g["observations"].as_array().expect("a parsed group has observations");
        let digests = obs
            .iter()
            .map(|o| canonicalize(o).map(|c| <[u8; 32]>::from(Sha256::digest(c.as_bytes()))))
            .collect::<Result<Vec<_>, _>>()?;
        observation_digests.push(digests);
    }
    Ok(ReceivedBatch { batch, observation_digests })
}

fn batch_value(body: &[u8]) -> Result<Value, WireError> {
    if body.len() > PROFILE_MAX_BYTES as usize {
        return Err(WireError::limited(format!("response body larger than {PROFILE_MAX_BYTES} bytes")));
    }
    versioned(body)
}

fn batch(v: &Value) -> Result<Batch, WireError> {
    let o = Obj::closed(
        v,
        "",
        &[
            "version", "session", "scope", "phase", "groups", "cursor", "snapshotComplete", "through", "highWater",
            "expiresAt", "replayUntil", "limits", "extensions", "critical",
        ],
    )?;
    no_critical(&o)?;
    let phase = match o.req_str("phase")? {
        "snapshot" => Phase::Snapshot,
        "live" => Phase::Live,
        _ => return Err(WireError::invalid("phase: expected \"snapshot\" or \"live\"")),
    };
    // Every observation repeats the batch scope (BRC-193 §8): parsed once here, and an
    // observation whose scope is the same JSON value takes it as parsed.
    let scope_value = o.req("scope")?;
    let batch_scope = scope(scope_value, "scope")?;
    let known = (scope_value, &batch_scope);
    let groups = match o.req("groups")? {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, g)| group(g, &format!("groups[{i}]"), known))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(WireError::invalid("groups: expected an array")),
    };
    Ok(Batch {
        version: V1,
        session: o.text("session")?,
        scope: batch_scope,
        phase,
        groups,
        cursor: o.text("cursor")?,
        snapshot_complete: boolean(o.req("snapshotComplete")?, "snapshotComplete")?,
        through: u64(o.req("through")?, "through")?,
        high_water: u64(o.req("highWater")?, "highWater")?,
        expires_at: u64(o.req("expiresAt")?, "expiresAt")?,
        replay_until: u64(o.req("replayUntil")?, "replayUntil")?,
        limits: batch_limits(o.req("limits")?)?,
    })
}

/// Parses an error response body into a [`WireError`] (bounded to 4096 bytes).
pub fn parse_error_body(body: &[u8]) -> Result<WireError, WireError> {
    if body.len() > MAX_ERROR_BODY_BYTES {
        return Err(WireError::invalid(format!("error body larger than {MAX_ERROR_BODY_BYTES} bytes")));
    }
    let v = versioned(body)?;
    let top = Obj::closed(&v, "", &["version", "error"])?;
    let e = Obj::closed(
        top.req("error")?,
        "error",
        &["code", "message", "retryable", "retryAfterMs", "limit"],
    )?;
    let code = ErrorCode::parse(e.req_str("code")?).ok_or_else(|| WireError::invalid("error.code: unknown code"))?;
    let mut err = WireError::new(code, e.text("message")?);
    err.retryable = boolean(e.req("retryable")?, "error.retryable")?;
    if e.opt("retryAfterMs")?.is_some() {
        err.retry_after_ms = Some(e.u32("retryAfterMs")?);
    }
    if let Some(l) = e.opt("limit")? {
        let l = Obj::closed(l, "error.limit", &["kind", "minimumBytes", "minimumObservations"])?;
        let kind = match l.req_str("kind")? {
            "envelope" => LimitKind::Envelope,
            "group" => LimitKind::Group,
            "permanent-group" => LimitKind::PermanentGroup,
            _ => return Err(WireError::invalid("error.limit.kind: unknown kind")),
        };
        let min = |k: &str| -> Result<Option<u32>, WireError> {
            match l.opt(k)? {
                Some(_) => l.u32(k).map(Some),
                None => Ok(None),
            }
        };
        err.limit = Some(Limit { kind, minimum_bytes: min("minimumBytes")?, minimum_observations: min("minimumObservations")? });
    }
    Ok(err)
}

/// Strict JSON with the same version gate as requests.
fn versioned(body: &[u8]) -> Result<Value, WireError> {
    let v = parse_strict(body, NumberMode::SafeInteger)?;
    match v.get("version") {
        Some(Value::Number(n)) if n.as_i64() == Some(1) => Ok(v),
        Some(Value::Number(n)) if n.as_i64().is_some() => Err(WireError::unsupported("unsupported version")),
        _ if !v.is_object() => Err(WireError::invalid("body must be a JSON object")),
        _ => Err(WireError::invalid("version: expected the integer 1")),
    }
}

fn no_critical(o: &Obj<'_>) -> Result<(), WireError> {
    if let Some(e) = o.opt("extensions")? {
        extensions(e)?;
    }
    if let Some(c) = o.opt("critical")? {
        if let Some(first) = critical(c, o.opt("extensions")?)?.first() {
            return Err(WireError::unsupported(format!("critical extension {} is not supported", excerpt(first))));
        }
    }
    Ok(())
}

fn boolean(v: &Value, path: &str) -> Result<bool, WireError> {
    v.as_bool().ok_or_else(|| WireError::invalid(format!("{path}: expected a boolean")))
}

fn u64(v: &Value, path: &str) -> Result<U64, WireError> {
    let s = v.as_str().ok_or_else(|| WireError::invalid(format!("{path}: expected a U64 string")))?;
    U64::parse(s).map_err(|e| at(path, e))
}

fn bytes(v: &Value, path: &str) -> Result<Bytes, WireError> {
    let s = v.as_str().ok_or_else(|| WireError::invalid(format!("{path}: expected a base64 string")))?;
    Bytes::parse(s).map_err(|e| at(path, e))
}

fn batch_limits(v: &Value) -> Result<Limits, WireError> {
    let o = Obj::closed(v, "limits", &["maxBytes", "maxObservations", "waitMs"])?;
    let l = Limits { max_bytes: o.u32("maxBytes")?, max_observations: o.u32("maxObservations")?, wait_ms: o.u32("waitMs")? };
    if l.max_bytes == 0 || l.max_observations == 0 || l.clamped() != l {
        return Err(WireError::invalid("limits: outside the profile range"));
    }
    Ok(l)
}

fn chain(v: &Value, path: &str) -> Result<Chain, WireError> {
    let o = Obj::closed(v, path, &["network", "genesisHash"])?;
    Ok(Chain { network: o.text("network")?, genesis_hash: hex32(o.req("genesisHash")?, &o.name("genesisHash"))? })
}

fn scope(v: &Value, path: &str) -> Result<Scope, WireError> {
    let o = Obj::closed(v, path, &["chain", "provider", "service", "queryDigest", "rulesDigest", "access", "epoch"])?;
    Ok(Scope {
        chain: chain(o.req("chain")?, &o.name("chain"))?,
        provider: o.text("provider")?,
        service: o.text("service")?,
        query_digest: hex32(o.req("queryDigest")?, &o.name("queryDigest"))?,
        rules_digest: hex32(o.req("rulesDigest")?, &o.name("rulesDigest"))?,
        access: o.text("access")?,
        epoch: o.text("epoch")?,
    })
}

fn outpoint(v: &Value, path: &str) -> Result<Outpoint, WireError> {
    let o = Obj::closed(v, path, &["chain", "txid", "outputIndex"])?;
    Ok(Outpoint {
        chain: chain(o.req("chain")?, &o.name("chain"))?,
        txid: hex32(o.req("txid")?, &o.name("txid"))?,
        output_index: o.u32("outputIndex")?,
    })
}

/// The batch's scope: its JSON value and that value parsed.
type KnownScope<'a> = (&'a Value, &'a Scope);

fn group(v: &Value, path: &str, known: KnownScope<'_>) -> Result<Group, WireError> {
    let o = Obj::closed(v, path, &["id", "sequence", "observations"])?;
    let observations = match o.req("observations")? {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, ob)| observation(ob, &format!("{path}.observations[{i}]"), known))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(WireError::invalid(format!("{path}.observations: expected an array"))),
    };
    Ok(Group { id: o.text("id")?, sequence: u64(o.req("sequence")?, &o.name("sequence"))?, observations })
}

fn observation(v: &Value, path: &str, known: KnownScope<'_>) -> Result<Observation, WireError> {
    let o = Obj::closed(v, path, &["id", "scope", "kind", "payload", "extensions", "critical"])?;
    no_critical(&o)?;
    let pp = o.name("payload");
    let p = o.req("payload")?;
    let payload = match o.req_str("kind")? {
        "output" => {
            let q = Obj::closed(p, &pp, &["evidence", "context"])?;
            let ev = Obj::closed(q.req("evidence")?, "evidence", &["txid", "outputIndex", "beef"])?;
            let evidence = Evidence {
                txid: hex32(ev.req("txid")?, &format!("{pp}.evidence.txid"))?,
                output_index: ev.u32("outputIndex")?,
                beef: bytes(ev.req("beef")?, &format!("{pp}.evidence.beef"))?,
            };
            let context = match q.opt("context")? {
                Some(c) => {
                    let c = Obj::closed(c, "context", &["schema", "bytes"])?;
                    let schema = c.req_str("schema")?;
                    check_absolute_iri(schema).map_err(|e| at(&format!("{pp}.context.schema"), e))?;
                    Some(OutputContext { schema: schema.to_string(), bytes: bytes(c.req("bytes")?, &format!("{pp}.context.bytes"))? })
                }
                None => None,
            };
            Payload::Output { evidence, context }
        }
        "spend" => {
            let q = Obj::closed(p, &pp, &["previous", "spendingTxid", "beef"])?;
            Payload::Spend {
                previous: outpoint(q.req("previous")?, &q.name("previous"))?,
                spending_txid: hex32(q.req("spendingTxid")?, &q.name("spendingTxid"))?,
                beef: bytes(q.req("beef")?, &q.name("beef"))?,
            }
        }
        "withdraw" => {
            let q = Obj::closed(p, &pp, &["outpoint", "reason"])?;
            Payload::Withdraw { outpoint: outpoint(q.req("outpoint")?, &q.name("outpoint"))?, reason: q.text("reason")? }
        }
        "assessment-invalidated" => {
            let q = Obj::closed(p, &pp, &["contextId", "reason"])?;
            Payload::AssessmentInvalidated { context_id: q.text("contextId")?, reason: q.text("reason")? }
        }
        "proposal" | "proposal-state" | "proposal-remove" => {
            return Err(WireError::unsupported(format!("{path}.kind: not part of lookup-live-v1")))
        }
        _ => return Err(WireError::invalid(format!("{path}.kind: unknown kind"))),
    };
    let sv = o.req("scope")?;
    let scope = match sv == known.0 {
        true => known.1.clone(),
        false => scope(sv, &o.name("scope"))?,
    };
    Ok(Observation { id: o.text("id")?, scope, payload })
}
