//! The evidence a received group carries, from its bytes to the reconciled graph
//! (BRC-192 §2, §8; BRC-193 §9).
//!
//! **Assembly, at receipt** ([`assemble`]). Each `output` and `spend` observation names
//! a target transaction and carries a BEEF (V1, V2 or Atomic). The target is located
//! by the txid computed from its bytes (an Atomic subject must be the target; another
//! transaction of an aggregate bundle never stands in for it), and its claim is
//! checked: the output index exists, or the spend really consumes the named outpoint.
//! The target and its unproven ancestors from the bundle enter the journal as one
//! evidence variant each (variant id = SHA-256 of the bundle bytes). Merkle paths are
//! recorded as claims: the target's own ([`Proof`]: a mined subject needs no parents)
//! and its proven parents' ([`Supplied`]). Txid-only entries and absent parents stay
//! unresolved dependencies. Evidence that fails any of this is refused with a
//! recorded verdict (`invalid`, or `limited` for a bound), never silently dropped.
//!
//! **Publication, as verdicts arrive** ([`settle`]). The variants a group brought are
//! its *candidates*. The group's receipts count as support only once every candidate
//! is verified, and then all together, so a spend and the output that replaces it
//! change currentness in one commit; a candidate `invalid` or `limited` refuses the
//! whole group's receipts (the variants and their verdicts are kept: the same bytes
//! from another group or source still count). While a candidate is unjudged, the
//! group's receipts are possible support, which holds the component's barrier
//! (BRC-192 §10.2). Under the `verified` membership rule the group also enters source
//! membership then (in receipt order, `store::accept`).

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

use super::journal::*;
use super::parse::{Claim, ParsedGroup};
use super::db::Tx;
use super::group::{GroupRecord, Membership};
use super::ClientError;
use crate::bitcoin::beef::{self, Beef, Entry};
use crate::bitcoin::tx::{Hash32, Txid};

/// At most this many transactions of one bundle enter the journal (the packet's array
/// bound, BRC-192 §9); deeper unproven ancestry is `limited`.
pub const MAX_JOURNALED_PER_BUNDLE: usize = 4096;

/// One transaction entering the journal with one evidence variant.
#[derive(Clone, Debug)]
pub struct Item {
    pub raw: Vec<u8>,
    pub variant: Hash32,
    pub proof: Option<Proof>,
    pub supplies: Vec<Supplied>,
    pub group: Option<GroupRef>,
}


/// A claim whose evidence was refused at receipt.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub txid: Txid,
    pub variant: Hash32,
    pub status: VerdictStatus,
    pub reason: String,
}

/// What the evidence of a batch's new groups adds.
#[derive(Default)]
pub struct Assembled {
    pub items: Vec<Item>,
    /// Bundle bytes per variant, stored once.
    pub bundles: BTreeMap<Hash32, Vec<u8>>,
    /// Per group (same order as given): its candidates and its refused claims.
    pub groups: Vec<(BTreeSet<Candidate>, Vec<Refusal>)>,
}

pub fn variant_id(bytes: &[u8]) -> Hash32 {
    Hash32(Sha256::digest(bytes).into())
}

/// The Merkle claims a bundle makes for `txid`: its own path, or the paths of the
/// proven parents it carries. An error is a path that does not cover its transaction.
pub fn bundle_claims(b: &Beef<'_>, txid: &Txid) -> Result<(Option<Proof>, Vec<Supplied>), String> {
    let Some((tx, bump)) = b.raw(txid) else { return Ok((None, vec![])) };
    if let Some(i) = bump {
        return Ok((Some(proof_of(b, i, txid)?), vec![]));
    }
    let mut supplies = Vec::new();
    for input in &tx.inputs {
        let p = input.prev.txid;
        if let Some((ptx, Some(i))) = b.raw(&p) {
            if !supplies.iter().any(|s: &Supplied| s.txid == p) {
                supplies.push(Supplied { txid: p, outputs: ptx.outputs.len() as u32, proof: proof_of(b, i, &p)? });
            }
        }
    }
    Ok((None, supplies))
}

fn proof_of(b: &Beef<'_>, bump: usize, txid: &Txid) -> Result<Proof, String> {
    let bp = &b.bumps[bump];
    let root = beef::merkle_root(bp, txid).ok_or_else(|| format!("the BUMP of {txid} does not lead from it to a root"))?;
    Ok(Proof { height: bp.height, root })
}

/// Assembles the evidence of `groups` (the batch's new groups), whose records will be
/// `refs[i]`.
pub fn assemble(groups: &[&ParsedGroup], refs: &[GroupRef]) -> Assembled {
    let mut out = Assembled::default();
    for (g, gref) in groups.iter().zip(refs) {
        let mut candidates = BTreeSet::new();
        let mut refusals = Vec::new();
        for o in &g.observations {
            let Some(ev) = &o.evidence else { continue };
            let bytes = &ev.beef;
            let variant = variant_id(bytes);
            let target = ev.txid;
            match journal_items(bytes, &target, &ev.claim) {
                Ok(found) => {
                    for (raw, proof, supplies) in found {
                        let txid = Hash32::of_double_sha256(&raw);
                        if candidates.insert((txid, variant)) {
                            out.items.push(Item { raw, variant, proof, supplies, group: Some(*gref) });
                        }
                    }
                    out.bundles.entry(variant).or_insert_with(|| bytes.clone());
                }
                // A refused claim is not a candidate: it is judged now, for this group
                // only (the same bytes may be good evidence of another output).
                Err((status, reason)) => refusals.push(Refusal { txid: target, variant, status, reason }),
            }
        }
        out.groups.push((candidates, refusals));
    }
    out
}

type Journaled = (Vec<u8>, Option<Proof>, Vec<Supplied>);

/// The target and its unproven ancestors from one bundle, after the structural checks.
fn journal_items(bytes: &[u8], target: &Txid, claim: &Claim) -> Result<Vec<Journaled>, (VerdictStatus, String)> {
    let invalid = |m: String| (VerdictStatus::Invalid, m);
    let b = beef::parse(bytes).map_err(|e| match e {
        crate::bitcoin::Error::Limited(m) => (VerdictStatus::Limited, format!("evidence: {m}")),
        crate::bitcoin::Error::Invalid(m) => invalid(format!("evidence is not a valid BEEF: {m}")),
    })?;
    if let Some(s) = b.subject.filter(|s| s != target) {
        return Err(invalid(format!("the Atomic BEEF's subject {s} is not the asserted transaction {target}")));
    }
    let Some((tx, _)) = b.raw(target) else {
        return Err(invalid(match b.find(target) {
            Some(Entry::TxidOnly(_)) => format!("the evidence names {target} without its bytes"),
            _ => format!("the evidence does not hold transaction {target}"),
        }));
    };
    match claim {
        Claim::Output(vout) if *vout as usize >= tx.outputs.len() => {
            return Err(invalid(format!("transaction {target} has {} outputs: output {vout} does not exist", tx.outputs.len())));
        }
        Claim::Spends(prev) if !tx.inputs.iter().any(|i| i.prev.txid.to_hex() == prev.txid && i.prev.vout == prev.output_index) => {
            return Err(invalid(format!("transaction {target} does not spend {}.{}", prev.txid, prev.output_index)));
        }
        _ => {}
    }
    let mut out = Vec::new();
    let mut todo = vec![*target];
    let mut seen = BTreeSet::new();
    while let Some(t) = todo.pop() {
        if !seen.insert(t) {
            continue;
        }
        // Absent or txid-only: an unresolved dependency of its child, not an error.
        let Some((view, bump)) = b.raw(&t) else { continue };
        if t != *target && bump.is_some() {
            continue; // a proven ancestor: its path is the child's `Supplied` claim
        }
        if out.len() == MAX_JOURNALED_PER_BUNDLE {
            return Err((VerdictStatus::Limited, format!("the evidence carries more than {MAX_JOURNALED_PER_BUNDLE} unproven transactions")));
        }
        let (proof, supplies) = bundle_claims(&b, &t).map_err(invalid)?;
        if proof.is_none() {
            todo.extend(view.inputs.iter().map(|i| i.prev.txid));
        }
        out.push((view.raw.to_vec(), proof, supplies));
    }
    Ok(out)
}


/// The verdict of one candidate's variant.
fn candidate_verdict(tx: &Tx, c: &Candidate) -> Result<Option<Verdict>, ClientError> {
    let rec = load_tx(tx, &c.0)?.ok_or_else(|| ClientError::storage("candidate transaction missing"))?;
    Ok(rec.variants.iter().find(|v| v.id == c.1).and_then(|v| v.verdict.clone()))
}

fn judge(tx: &Tx, candidates: &[Candidate]) -> Result<(GroupEvidence, Option<String>), ClientError> {
    let mut state = GroupEvidence::Verified;
    let mut reason = None;
    for c in candidates {
        match candidate_verdict(tx, c)? {
            Some(v) if v.status == VerdictStatus::Invalid => {
                return Ok((GroupEvidence::Invalid, Some(format!("evidence for {} is invalid: {}", c.0, v.reason))));
            }
            None => state = GroupEvidence::Pending,
            Some(v) if v.status == VerdictStatus::Limited && state == GroupEvidence::Verified => {
                state = GroupEvidence::Limited;
                reason = Some(format!("evidence for {} was limited: {}", c.0, v.reason));
            }
            Some(_) => {}
        }
    }
    if state == GroupEvidence::Pending {
        reason = None;
    }
    Ok((state, reason))
}

/// What settling changed.
#[derive(Default, Debug)]
pub struct Settled {
    /// Components whose support changed.
    pub components: BTreeSet<u64>,
    /// Groups whose evidence is now verified (their source generation may advance).
    pub verified: BTreeSet<GroupRef>,
    /// Groups quarantined for invalid evidence, with the reason.
    pub invalid: Vec<(GroupRef, String)>,
}

/// Judges these groups again; a group whose candidates all have verdicts is settled:
/// its receipts become `Accepted` (all verified: proven parents it supplies become
/// anchors from its position) or `Refused`.
pub(crate) fn settle(tx: &mut Tx, groups: &BTreeSet<GroupRef>) -> Result<Settled, ClientError> {
    let mut out = Settled::default();
    for gref in groups {
        let Some(mut rec) = GroupRecord::load(tx, gref)? else { continue };
        if rec.evidence != Some(GroupEvidence::Pending) {
            continue;
        }
        let (state, reason) = judge(tx, &rec.candidates)?;
        if state == GroupEvidence::Pending {
            continue;
        }
        let receipt_state = if state == GroupEvidence::Verified { ReceiptState::Accepted } else { ReceiptState::Refused };
        set_receipts(tx, gref, &rec.candidates, receipt_state, &mut out.components)?;
        rec.evidence = Some(state);
        rec.evidence_reason = reason.clone();
        match state {
            GroupEvidence::Verified => {
                if rec.gate == Membership::Verified {
                    rec.verified = true;
                }
                out.verified.insert(*gref);
            }
            GroupEvidence::Invalid => out.invalid.push((*gref, reason.unwrap_or_default())),
            _ => {}
        }
        rec.save(tx, gref);
    }
    Ok(out)
}

/// Settles a group whose claims were refused at receipt: `invalid` if any refusal is
/// (else `limited`); its receipts never count.
pub(crate) fn refuse(tx: &mut Tx, gref: &GroupRef, refusals: &[Refusal], out: &mut Settled) -> Result<(), ClientError> {
    let Some(mut rec) = GroupRecord::load(tx, gref)? else { return Ok(()) };
    let first = refusals.iter().find(|r| r.status == VerdictStatus::Invalid).or(refusals.first()).expect("some refusal");
    let state = if first.status == VerdictStatus::Invalid { GroupEvidence::Invalid } else { GroupEvidence::Limited };
    let reason = format!("evidence for {} refused: {}", first.txid, first.reason);
    set_receipts(tx, gref, &rec.candidates, ReceiptState::Refused, &mut out.components)?;
    rec.evidence = Some(state);
    rec.evidence_reason = Some(reason.clone());
    rec.save(tx, gref);
    if state == GroupEvidence::Invalid {
        out.invalid.push((*gref, reason));
    }
    Ok(())
}

/// Sets the receipts this group made (of its candidates' variants) to `state`; when
/// they become `Accepted`, proven parents the variants supply become anchors.
pub(crate) fn set_receipts(tx: &mut Tx, gref: &GroupRef, candidates: &[Candidate], state: ReceiptState, comps: &mut BTreeSet<u64>) -> Result<(), ClientError> {
    for (txid, variant) in candidates {
        let Some(mut rec) = load_tx(tx, txid)? else { continue };
        let Some(v) = rec.variants.iter_mut().find(|v| v.id == *variant) else { continue };
        let mut changed = false;
        let mut first = None;
        for r in v.receipts.iter_mut().filter(|r| r.group.as_ref() == Some(gref)) {
            if r.state != state {
                r.state = state;
                changed = true;
            }
            first = Some(first.map_or(r.at.position, |f: u64| f.min(r.at.position)));
        }
        if !changed {
            continue;
        }
        if state == ReceiptState::Accepted {
            let supplies = v.supplies.clone();
            for s in supplies {
                add_proven_anchor(tx, &s, first.expect("a changed receipt"), comps)?;
            }
        }
        comps.insert(rec.component);
        save_tx(tx, &rec)?;
    }
    Ok(())
}

/// Records a proven parent as an anchor from `at`, keeping an earlier or configured one.
fn add_proven_anchor(tx: &mut Tx, s: &Supplied, at: u64, comps: &mut BTreeSet<u64>) -> Result<(), ClientError> {
    if let Some(old) = tx.get_json::<AnchorRecord>(&anchor_key(&s.txid))? {
        if old.at.is_none_or(|a| a <= at) {
            return Ok(());
        }
    }
    let rec = AnchorRecord { txid: s.txid, outputs: s.outputs, anchor: Anchor::Proven { proof: s.proof }, at: Some(at) };
    tx.put_json(anchor_key(&s.txid), &rec);
    comps.extend(spender_components(tx, &s.txid)?);
    if let Some(member) = load_tx(tx, &s.txid)? {
        comps.insert(member.component);
    }
    Ok(())
}

/// Records refusals made at receipt (each with its verdict, reported by `verdicts`).
pub(crate) fn record_refusals(tx: &mut Tx, refusals: &[Refusal], at: IngressPosition, source: &str, gref: &GroupRef) -> Result<(), ClientError> {
    for r in refusals {
        let key = rejection_key(&r.txid, &r.variant);
        let receipt = Receipt { at, source: source.to_string(), group: Some(*gref), state: ReceiptState::Refused };
        let rec = match tx.get_json::<Rejection>(&key)? {
            Some(mut old) => {
                old.receipts.push(receipt);
                old
            }
            None => Rejection {
                txid: r.txid,
                variant: r.variant,
                verdict: Verdict { status: r.status, context_id: String::new(), reason: r.reason.clone(), policy: None },
                receipts: vec![receipt],
            },
        };
        tx.put_json(key, &rec);
    }
    Ok(())
}

/// The groups with an open receipt on these variants.
pub fn open_groups(rec: &TxRecord, variants: &BTreeSet<Hash32>) -> BTreeSet<GroupRef> {
    rec.variants
        .iter()
        .filter(|v| variants.contains(&v.id))
        .flat_map(|v| v.receipts.iter())
        .filter(|r| r.state == ReceiptState::Open)
        .filter_map(|r| r.group)
        .collect()
}
