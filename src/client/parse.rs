//! A received batch as the client keeps it, from the exact response bytes (BRC-193 §2,
//! BRC-192 §1–§2). The bytes are parsed by the package's one strict parser
//! ([`crate::wire::parse_received_batch`]: closed objects, duplicate keys refused,
//! BRC-192 encodings); this module reduces the result to what the checks, the store
//! and the reconciler need: each observation's effect on membership, the evidence it
//! carries, and its normalized identity (SHA-256 of its RFC 8785 bytes as received,
//! so deduplication and equivocation compare content, never key order, BRC-192 §2, §9).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::ClientError;
use crate::bitcoin::tx::Hash32;
use crate::wire;

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
    /// The asserted target txid.
    pub txid: Hash32,
    /// The bundle's bytes.
    pub beef: Vec<u8>,
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

/// Parses and shape-checks one batch body. Every failure is the wire parser's code
/// (`invalid`, `limited` for an oversized body, `unsupported` for an unknown critical
/// extension or a kind outside lookup-live-v1).
pub fn parse_batch(bytes: &[u8]) -> Result<ParsedBatch, ClientError> {
    let received = wire::parse_received_batch(bytes)?;
    let b = received.batch;
    let scope = scope_of(&b.scope);
    let mut groups = Vec::with_capacity(b.groups.len());
    for (g, digests) in b.groups.into_iter().zip(received.observation_digests) {
        let mut observations = Vec::with_capacity(g.observations.len());
        let mut h = Sha256::new();
        h.update((g.id.len() as u64).to_be_bytes());
        h.update(g.id.as_bytes());
        h.update(g.sequence.0.to_be_bytes());
        for (o, digest) in g.observations.into_iter().zip(digests) {
            // BRC-193 §8: every observation's scope equals the batch scope.
            if o.scope != b.scope {
                return Err(ClientError::invalid(format!("observation {} has a scope other than the batch scope", o.id)));
            }
            // An outpoint names its chain; within one scope it is the scope's (BRC-192 §1).
            if let wire::Payload::Withdraw { outpoint: op, .. } | wire::Payload::Spend { previous: op, .. } = &o.payload {
                if op.chain != b.scope.chain {
                    return Err(ClientError::invalid(format!("observation {}: outpoint chain differs from the session scope", o.id)));
                }
            }
            h.update(digest);
            observations.push(observation(o, digest));
        }
        groups.push(ParsedGroup { id: g.id, sequence: g.sequence.0, observations, digest: h.finalize().into() });
    }
    Ok(ParsedBatch {
        session: b.session,
        scope,
        phase: match b.phase {
            wire::Phase::Snapshot => Phase::Snapshot,
            wire::Phase::Live => Phase::Live,
        },
        groups,
        cursor: b.cursor,
        snapshot_complete: b.snapshot_complete,
        through: b.through.0,
        high_water: b.high_water.0,
        expires_at: b.expires_at.0,
        replay_until: b.replay_until.0,
    })
}

fn scope_of(s: &wire::Scope) -> Scope {
    Scope {
        chain: Chain { network: s.chain.network.clone(), genesis_hash: s.chain.genesis_hash.to_hex() },
        provider: s.provider.clone(),
        service: s.service.clone(),
        query_digest: s.query_digest.to_hex(),
        rules_digest: s.rules_digest.to_hex(),
        access: s.access.clone(),
        epoch: s.epoch.clone(),
    }
}

fn outpoint_of(o: &wire::Outpoint) -> OutpointId {
    OutpointId { txid: o.txid.to_hex(), output_index: o.output_index }
}

fn observation(o: wire::Observation, digest: [u8; 32]) -> ParsedObservation {
    use base64::Engine;
    let kind = o.payload.kind().to_string();
    let (effect, evidence) = match o.payload {
        wire::Payload::Output { evidence, context } => {
            let context = context.map(|c| {
                serde_json::json!({"schema": c.schema, "bytes": base64::engine::general_purpose::STANDARD.encode(&c.bytes.0)})
            });
            let outpoint = OutpointId { txid: evidence.txid.to_hex(), output_index: evidence.output_index };
            let claim = EvidenceClaim { txid: Hash32(evidence.txid.0), beef: evidence.beef.0, claim: Claim::Output(evidence.output_index) };
            (Effect::Present { outpoint, context }, Some(claim))
        }
        wire::Payload::Spend { previous, spending_txid, beef } => {
            let claim = EvidenceClaim { txid: Hash32(spending_txid.0), beef: beef.0, claim: Claim::Spends(outpoint_of(&previous)) };
            (Effect::None, Some(claim))
        }
        wire::Payload::Withdraw { outpoint, .. } => (Effect::Absent { outpoint: outpoint_of(&outpoint) }, None),
        // Kept as a receipt; it does not touch membership.
        wire::Payload::AssessmentInvalidated { .. } => (Effect::None, None),
    };
    ParsedObservation { id: o.id, kind, effect, evidence, digest }
}

/// BRC-192 §1 strings: nonempty, at most 1024 UTF-8 bytes.
pub fn check_text(name: &str, s: &str) -> Result<(), ClientError> {
    if s.is_empty() || s.len() > 1024 {
        return Err(ClientError::invalid(format!("{name} must be 1..=1024 bytes")));
    }
    Ok(())
}

pub fn check_hex32(name: &str, s: &str) -> Result<(), ClientError> {
    wire::Hex32::parse(s).map(|_| ()).map_err(|_| ClientError::invalid(format!("{name} is not Hex32")))
}

/// BRC-192 §1 U64: `0|[1-9][0-9]*`, at most u64::MAX.
pub fn parse_u64(name: &str, s: &str) -> Result<u64, ClientError> {
    wire::U64::parse(s).map(|u| u.0).map_err(|_| ClientError::invalid(format!("{name} is not a U64 string")))
}
