//! The durable reconciler (BRC-192 §10) on the checkpoint store. Every accepted step
//! (a receive, a context change, verification results, a placement, an anchor) is one
//! commit, durable before the call returns, holding the journal entry, the facts
//! it adds and the recomputed result of every component it touches. A restart reopens
//! the same records: nothing is derived from memory or from worker timing.
//!
//! Verification is a port: a receive creates a job per new evidence variant
//! ([`ClientDb::pending_verifications`]); whoever verifies (trace steps in the
//! tests, a BEEF/SPV verifier later) hands back [`VerificationResult`]s for the
//! current context. Results only add verdicts; the selection is a function of the
//! journal and the verdict set, so it does not depend on the order results arrive in.
//!
//! Nothing here signs, broadcasts or performs a wallet action.

use std::collections::{BTreeMap, BTreeSet};

use super::chain::{self, Finality};
use super::evidence::{self, variant_id, Item};
use super::journal::*;
use super::select::{self, ChainFacts};
use super::db::{ClientDb, Tx};
use super::group::GroupRecord;
use super::{ClientError, ErrorCode};
use crate::bitcoin::beef;
use crate::bitcoin::tx::{parse_tx, Hash32, Outpoint, Txid};

/// Fixed configuration of a journal (`{nonFinal}` is the §10 policy parameter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReconcilerConfig {
    pub journal_id: String,
    pub non_final: bool,
    /// The context active at position 0 (defined beforehand).
    pub initial_context: String,
}

/// One received transaction: its raw bytes and the exact evidence bytes that carried
/// it (a BEEF in production; empty means the raw bytes themselves). The variant id is
/// SHA-256 of the evidence bytes.
#[derive(Clone, Debug)]
pub struct Received {
    pub raw: Vec<u8>,
    pub evidence: Vec<u8>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerificationStatus {
    Verified,
    Invalid,
    Unresolved,
    Limited,
    Cancelled,
    ContextChanged,
}

/// A verifier's answer for one evidence variant (BRC-192 §8 VerificationResult).
#[derive(Clone, Debug)]
pub struct VerificationResult {
    pub txid: Txid,
    pub variant: Hash32,
    pub context_id: String,
    pub status: VerificationStatus,
    /// The verified transaction fact: its raw bytes (required for `Verified`).
    pub raw: Option<Vec<u8>>,
    /// A Merkle placement the verifier resolved, if any.
    pub placement: Option<Placement>,
    pub reason: String,
    /// For `limited`: the verification budget it was measured against.
    pub policy: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    pub txid: Txid,
    pub variant: Hash32,
    pub context_id: String,
    pub first: IngressPosition,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    pub revision: u64,
    /// The journal position this step took (receives and context changes).
    pub position: Option<u64>,
    /// Results recorded.
    pub accepted: usize,
    /// Results for another context than the current one: not recorded.
    pub stale: usize,
    /// Results already recorded identically, or not final (unresolved, cancelled).
    pub ignored: usize,
    /// Components recomputed.
    pub components: usize,
}

fn corrupt(m: &str) -> ClientError {
    ClientError::storage(format!("reconciler record missing: {m}"))
}

impl ClientDb {
    fn meta(tx: &Tx) -> Result<Meta, ClientError> {
        tx.get_json(META)?.ok_or_else(|| ClientError::invalid("the reconciler is not configured"))
    }

    /// Creates the journal, or checks that an existing one has this configuration.
    pub fn configure_reconciler(&self, cfg: &ReconcilerConfig) -> Result<(), ClientError> {
        super::parse::check_text("journalId", &cfg.journal_id)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        if let Some(m) = tx.get_json::<Meta>(META)? {
            if m.journal_id != cfg.journal_id || m.non_final != cfg.non_final || m.contexts[0].id != cfg.initial_context {
                return Err(ClientError::conflict("the journal exists with another configuration"));
            }
            if tx.get(JOBS_INDEXED)?.is_none() {
                index_jobs(&mut tx)?;
                tx.finish()?;
            }
            return Ok(());
        }
        let def: ContextDef = tx
            .get_json(&context_key(&cfg.initial_context))?
            .ok_or_else(|| ClientError::invalid(format!("unknown context {}", cfg.initial_context)))?;
        let meta = Meta {
            journal_id: cfg.journal_id.clone(),
            position: 0,
            non_final: cfg.non_final,
            contexts: vec![ContextChange { position: 0, id: def.id, finality: def.finality, tip: def.tip }],
            next_component: 0,
        };
        tx.put_json(META.to_vec(), &meta);
        tx.put(JOBS_INDEXED.to_vec(), vec![]);
        tx.bump_revision()?;
        tx.finish()
    }

    /// Adds block headers (each linked to a known header or a genesis header with a zero
    /// previous hash, proof of work checked). Returns how many were new.
    pub fn add_headers(&self, raws: &[Vec<u8>]) -> Result<usize, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let mut todo: Vec<chain::Header> = raws.iter().map(|r| chain::parse_header(r)).collect::<Result<_, _>>()?;
        let mut added = 0;
        // Any order: repeat until no header can be linked.
        loop {
            let before = todo.len();
            let mut rest = Vec::new();
            for h in todo {
                if tx.get(&header_key(&h.hash))?.is_some() {
                    continue;
                }
                let height = if h.prev == Hash32::default() {
                    Some(0)
                } else {
                    tx.get_json::<HeaderRecord>(&header_key(&h.prev))?.map(|p| p.height + 1)
                };
                match height {
                    Some(height) => {
                        tx.put_json(header_key(&h.hash), &HeaderRecord { header: h, height });
                        added += 1;
                    }
                    None => rest.push(h),
                }
            }
            todo = rest;
            if todo.is_empty() || todo.len() == before {
                break;
            }
        }
        if !todo.is_empty() {
            return Err(ClientError::invalid(format!("{} headers do not link to the known chain", todo.len())));
        }
        tx.finish()?;
        Ok(added)
    }

    /// Names a header-chain view: height and median time past come from the headers.
    pub fn define_view(&self, id: &str, tip: Hash32) -> Result<(), ClientError> {
        super::parse::check_text("view id", id)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let rec: HeaderRecord = tx.get_json(&header_key(&tip))?.ok_or_else(|| ClientError::invalid("unknown tip header"))?;
        let mut times = vec![rec.header.time];
        let mut at = rec.header.prev;
        while times.len() < 11 && at != Hash32::default() {
            let Some(p) = tx.get_json::<HeaderRecord>(&header_key(&at))? else { break };
            times.push(p.header.time);
            at = p.header.prev;
        }
        let finality = Finality { tip_height: rec.height, mtp: chain::median_time_past(&times) };
        define(&mut tx, ContextDef { id: id.to_string(), finality, tip: Some(tip) })?;
        tx.finish()
    }

    /// Names a finality context without headers (configured height and MTP).
    pub fn define_context(&self, id: &str, finality: Finality) -> Result<(), ClientError> {
        super::parse::check_text("context id", id)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        define(&mut tx, ContextDef { id: id.to_string(), finality, tip: None })?;
        tx.finish()
    }

    /// Records a confirmed transaction outside the journal (a verified chain anchor or a
    /// configured preverified root) and recomputes the components that spend it.
    pub fn add_anchor(&self, raw: &[u8], anchor: Anchor) -> Result<StepOutcome, ClientError> {
        let parsed = parse_tx(raw)?;
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let meta = Self::meta(&tx)?;
        let rec = AnchorRecord { txid: parsed.txid, outputs: parsed.outputs, anchor, at: None };
        if let Some(old) = tx.get_json::<AnchorRecord>(&anchor_key(&parsed.txid))? {
            if old == rec {
                return Ok(StepOutcome { revision: self.revision()?, ignored: 1, ..Default::default() });
            }
        }
        tx.put_json(anchor_key(&parsed.txid), &rec);
        let comps = spender_components(&tx, &parsed.txid)?;
        let n = recompute_all(&mut tx, &meta, &comps)?;
        let revision = tx.bump_revision()?;
        tx.finish()?;
        Ok(StepOutcome { revision, accepted: 1, components: n, ..Default::default() })
    }

    /// One authorized receive: takes the next journal position (with the active context)
    /// and indexes its new transactions by ascending txid; spend edges come from their
    /// actual inputs. Nothing is written if any raw transaction fails to parse.
    pub fn receive_transactions(&self, source: &str, items: &[Received]) -> Result<StepOutcome, ClientError> {
        super::parse::check_text("source", source)?;
        if items.is_empty() {
            return Err(ClientError::invalid("nothing to receive"));
        }
        let mut bundles = BTreeMap::new();
        let mut journal = Vec::with_capacity(items.len());
        for it in items {
            let txid = parse_tx(&it.raw)?.txid;
            let evidence = if it.evidence.is_empty() { &it.raw } else { &it.evidence };
            let variant = variant_id(evidence);
            // A bundle that holds the transaction lends it its Merkle claims.
            let (proof, supplies) = match beef::parse(&it.evidence) {
                Ok(b) if b.raw(&txid).is_some() => evidence::bundle_claims(&b, &txid).unwrap_or_default(),
                _ => (None, vec![]),
            };
            if !it.evidence.is_empty() {
                bundles.insert(variant, it.evidence.clone());
            }
            journal.push(Item { raw: it.raw.clone(), variant, proof, supplies, group: None });
        }
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let (position, touched) = receive_in(&mut tx, source, &journal, &bundles)?;
        let components = recompute_components(&mut tx, &touched)?;
        let revision = tx.bump_revision()?;
        crate::store::crash::crash_point("client-receipt");
        tx.finish()?;
        Ok(StepOutcome { revision, position: Some(position), components, ..Default::default() })
    }

    /// Makes a defined context active; it takes the next journal position. Components
    /// whose result can depend on the context are reassessed (no arrival position
    /// changes); pending verification is now expected for this context.
    pub fn set_context(&self, id: &str) -> Result<StepOutcome, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let mut meta = Self::meta(&tx)?;
        let def: ContextDef = tx.get_json(&context_key(id))?.ok_or_else(|| ClientError::invalid(format!("unknown context {id}")))?;
        let position = meta.position.checked_add(1).ok_or_else(|| ClientError::new(ErrorCode::Limited, "journal position overflow"))?;
        meta.position = position;
        meta.contexts.push(ContextChange { position, id: def.id.clone(), finality: def.finality, tip: def.tip });
        tx.put_json(META.to_vec(), &meta);
        let sensitive: BTreeSet<u64> = tx.scan(SENSITIVE_PREFIX)?.into_iter().map(|(k, _)| u64::from_be_bytes(k[2..10].try_into().unwrap())).collect();
        let n = recompute_all(&mut tx, &meta, &sensitive)?;
        let revision = tx.bump_revision()?;
        crate::store::crash::crash_point("client-context");
        tx.finish()?;
        Ok(StepOutcome { revision, position: Some(position), components: n, ..Default::default() })
    }


    /// Clears `limited` verdicts measured against another verification budget than
    /// `policy`, so their jobs are pending again (a raised bound may now verify them);
    /// their groups wait again too. Returns how many verdicts were cleared.
    pub fn requeue_limited(&self, policy: &str) -> Result<usize, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let meta = Self::meta(&tx)?;
        let mut cleared = 0;
        let mut comps = BTreeSet::new();
        for (k, _) in tx.scan(LIMITED_PREFIX)? {
            let txid = Hash32::from_key_bytes(&k[2..34]);
            let mut rec: TxRecord = load_tx(&tx, &txid)?.ok_or_else(|| corrupt("limited transaction"))?;
            let mut changed = BTreeSet::new();
            for var in rec.variants.iter_mut() {
                if matches!(&var.verdict, Some(d) if d.status == VerdictStatus::Limited && d.policy.as_deref() != Some(policy)) {
                    var.verdict = None;
                    changed.insert(var.id);
                    tx.put(job_key(var.first(), &txid, &var.id), vec![]);
                }
            }
            if changed.is_empty() {
                continue;
            }
            if !rec.variants.iter().any(|v| matches!(&v.verdict, Some(d) if d.status == VerdictStatus::Limited)) {
                tx.writes.insert(k, None);
            }
            cleared += changed.len();
            comps.insert(rec.component);
            let groups: BTreeSet<GroupRef> = rec
                .variants
                .iter()
                .filter(|v| changed.contains(&v.id))
                .flat_map(|v| v.receipts.iter().filter_map(|r| r.group))
                .collect();
            save_tx(&mut tx, &rec)?;
            for gref in groups {
                let Some(mut g) = GroupRecord::load(&tx, &gref)? else { continue };
                if g.evidence == Some(GroupEvidence::Limited) {
                    g.evidence = Some(GroupEvidence::Pending);
                    g.evidence_reason = None;
                    evidence::set_receipts(&mut tx, &gref, &g.candidates, ReceiptState::Open, &mut comps)?;
                    g.save(&mut tx, &gref);
                }
            }
        }
        if cleared == 0 {
            return Ok(0);
        }
        recompute_all(&mut tx, &meta, &comps)?;
        tx.bump_revision()?;
        tx.finish()?;
        Ok(cleared)
    }

    /// Records a verified Merkle placement of a journal transaction.
    pub fn add_placement(&self, txid: &Txid, placement: Placement) -> Result<StepOutcome, ClientError> {
        let _g = self.guard();
        let mut tx = Tx::new(&self.db);
        let meta = Self::meta(&tx)?;
        let mut rec: TxRecord = load_tx(&tx, txid)?.ok_or_else(|| ClientError::invalid(format!("unknown transaction {txid}")))?;
        if rec.placements.contains(&placement) {
            return Ok(StepOutcome { revision: self.revision()?, ignored: 1, ..Default::default() });
        }
        rec.placements.push(placement);
        rec.placements.sort();
        let comp = rec.component;
        save_tx(&mut tx, &rec)?;
        let n = recompute_all(&mut tx, &meta, &BTreeSet::from([comp]))?;
        let revision = tx.bump_revision()?;
        tx.finish()?;
        Ok(StepOutcome { revision, accepted: 1, components: n, ..Default::default() })
    }

    /// Verification work still to do (of one transaction, or all), for the current context.
    pub fn pending_verifications(&self, txid: Option<&Txid>) -> Result<Vec<Job>, ClientError> {
        match txid {
            Some(_) => self.pending_of(txid),
            None => self.pending_page(None, usize::MAX),
        }
    }

    /// At most `limit` pending jobs, in job order, after `after` (exclusive): a verifier
    /// walks a large backlog in pages instead of holding all of it.
    pub fn pending_page(&self, after: Option<&Job>, limit: usize) -> Result<Vec<Job>, ClientError> {
        let tx = Tx::new(&self.db);
        if tx.get(JOBS_INDEXED)?.is_none() {
            // A store not yet configured since the markers existed: the full scan.
            let all = self.pending_of(None)?;
            let start = after.map_or(0, |a| all.partition_point(|j| (j.first, j.txid, j.variant) <= (a.first, a.txid, a.variant)));
            return Ok(all.into_iter().skip(start).take(limit).collect());
        }
        let context_id = Self::meta(&tx)?.current().id.clone();
        // The markers alone, already in job order: no record is read (journal.rs).
        let from = after.map(|a| {
            let mut from = job_key(a.first, &a.txid, &a.variant);
            from.push(0); // the first key after `a`
            from
        });
        let mut jobs = Vec::new();
        for k in tx.committed_keys(JOB_PREFIX, from.as_deref(), limit)? {
            let (first, txid, variant) = job_of_key(&k).ok_or_else(|| corrupt("job marker"))?;
            jobs.push(Job { txid, variant, context_id: context_id.clone(), first });
        }
        Ok(jobs)
    }

    /// The jobs read from the transaction records (one transaction, or a full scan).
    fn pending_of(&self, txid: Option<&Txid>) -> Result<Vec<Job>, ClientError> {
        let tx = Tx::new(&self.db);
        let meta = Self::meta(&tx)?;
        let recs: Vec<TxRecord> = match txid {
            Some(t) => load_tx(&tx, t)?.into_iter().collect(),
            None => all_txs(&tx)?,
        };
        let mut jobs = Vec::new();
        for r in recs {
            for v in r.variants.iter().filter(|v| v.verdict.is_none()) {
                jobs.push(Job { txid: r.txid, variant: v.id, context_id: meta.current().id.clone(), first: v.first() });
            }
        }
        jobs.sort_by_key(|j| (j.first, j.txid, j.variant));
        Ok(jobs)
    }

    /// The exact evidence bytes of a job's variant: the stored bundle, or the raw
    /// transaction itself when it was received without evidence. `None` for an unknown
    /// transaction or variant.
    pub fn verification_evidence(&self, txid: &Txid, variant: &Hash32) -> Result<Option<Vec<u8>>, ClientError> {
        let tx = Tx::new(&self.db);
        let Some(rec) = load_tx(&tx, txid)? else { return Ok(None) };
        let Some(v) = rec.variants.iter().find(|v| v.id == *variant) else { return Ok(None) };
        if let Some(bytes) = tx.get(&evidence_key(v.first().position, variant))? {
            return Ok(Some(bytes));
        }
        if let Some(bytes) = tx.get(&evidence_key_by_variant(variant))? {
            return Ok(Some(bytes));
        }
        Ok((variant_id(&rec.raw) == *variant).then_some(rec.raw))
    }

    pub fn transaction(&self, txid: &Txid) -> Result<Option<TxRecord>, ClientError> {
        load_tx(&Tx::new(&self.db), txid)
    }

    /// Evidence of `txid` refused at receipt, with its verdicts.
    pub fn rejections(&self, txid: &Txid) -> Result<Vec<Rejection>, ClientError> {
        let tx = Tx::new(&self.db);
        tx.scan(&rejections_of(txid))?.iter().map(|(_, v)| super::db::decode(v)).collect()
    }

    pub fn reconciler_meta(&self) -> Result<Option<Meta>, ClientError> {
        Tx::new(&self.db).get_json(META)
    }
}


/// Settles the groups with open receipts on the variants just judged.
fn settle_judged(tx: &mut Tx, judged: &BTreeMap<Txid, BTreeSet<Hash32>>) -> Result<evidence::Settled, ClientError> {
    let mut groups = BTreeSet::new();
    for (txid, variants) in judged {
        let rec: TxRecord = load_tx(tx, txid)?.ok_or_else(|| corrupt("judged transaction"))?;
        groups.extend(evidence::open_groups(&rec, variants));
    }
    evidence::settle(tx, &groups)
}

/// The journal part of a receive, inside the caller's commit: the next position, the
/// new transactions indexed by ascending txid (then the already known ones), each
/// item a receipt of its variant; spend edges and components. Returns the position
/// and the components to recompute (the caller recomputes them once, with whatever
/// else its commit changes).
pub(crate) fn receive_in(tx: &mut Tx, source: &str, items: &[Item], bundles: &BTreeMap<Hash32, Vec<u8>>) -> Result<(u64, BTreeSet<u64>), ClientError> {
    let mut by_tx: BTreeMap<Txid, (crate::bitcoin::tx::RawTx, Vec<&Item>)> = BTreeMap::new();
    for it in items {
        let p = parse_tx(&it.raw)?;
        by_tx.entry(p.txid).or_insert_with(|| (p, Vec::new())).1.push(it);
    }
    let mut meta: Meta = tx.get_json(META)?.ok_or_else(|| ClientError::invalid("the reconciler is not configured"))?;
    let position = meta.position.checked_add(1).ok_or_else(|| ClientError::new(ErrorCode::Limited, "journal position overflow"))?;
    meta.position = position;
    let mut touched: BTreeSet<u64> = BTreeSet::new();
    // A new transaction (the common case) is looked up once; a known one is read again
    // below, from the commit's memo, because linking an earlier one may have rewritten it.
    let mut known = BTreeSet::new();
    for t in by_tx.keys() {
        if load_tx(tx, t)?.is_some() {
            known.insert(*t);
        }
    }
    // New transactions take the first indexes in ascending txid order; a duplicate or
    // alternative proof of a known one keeps its first raw position.
    let mut new_index = 0u32;
    let mut old_index = (by_tx.len() - known.len()) as u32;
    for (txid, (p, its)) in &by_tx {
        let mut rec = match if known.contains(txid) { load_tx(tx, txid)? } else { None } {
            Some(rec) => {
                let at = IngressPosition { position, index: old_index };
                old_index += 1;
                let mut rec = rec;
                for it in its {
                    add_receipt(&mut rec, it, at, source);
                }
                rec
            }
            None => {
                let at = IngressPosition { position, index: new_index };
                new_index += 1;
                let comp = link(tx, &mut meta, txid, &p.inputs)?;
                let mut rec = TxRecord {
                    txid: *txid,
                    raw: its[0].raw.clone(),
                    inputs: p.inputs.clone(),
                    outputs: p.outputs,
                    locktime: p.locktime,
                    first_raw: at,
                    variants: vec![],
                    placements: vec![],
                    component: comp,
                    published: None,
                };
                for it in its {
                    add_receipt(&mut rec, it, at, source);
                }
                for i in &p.inputs {
                    tx.put(edge_key(&i.prev, txid), vec![]);
                }
                rec
            }
        };
        touched.insert(rec.component);
        // The verifier reads the evidence after this commit (and after a restart), so the
        // bytes are kept in the same commit as the jobs they create: once per variant that
        // first arrives in this receive, under this position (`evidence_key`).
        for v in rec.variants.iter().filter(|v| v.first().position == position) {
            if let Some(bytes) = bundles.get(&v.id) {
                tx.put(evidence_key(position, &v.id), bytes.clone());
            }
        }
        rec.variants.sort_by_key(|v| v.first());
        for v in rec.variants.iter().filter(|v| v.verdict.is_none()) {
            tx.put(job_key(v.first(), txid, &v.id), vec![]);
        }
        save_tx(tx, &rec)?;
    }
    tx.put_json(META.to_vec(), &meta);
    // Components may have merged while linking: the survivors.
    let touched = touched.into_iter().filter(|c| tx.get(&component_key(*c)).ok().flatten().is_some()).collect();
    Ok((position, touched))
}

/// Writes the `Xq` marker of every variant without a verdict (a store written before
/// the markers existed), once.
fn index_jobs(tx: &mut Tx) -> Result<(), ClientError> {
    for rec in all_txs(tx)? {
        for var in rec.variants.iter().filter(|v| v.verdict.is_none()) {
            tx.put(job_key(var.first(), &rec.txid, &var.id), vec![]);
        }
    }
    tx.put(JOBS_INDEXED.to_vec(), vec![]);
    Ok(())
}

fn define(tx: &mut Tx, def: ContextDef) -> Result<(), ClientError> {
    match tx.get_json::<ContextDef>(&context_key(&def.id))? {
        Some(old) if old != def => Err(ClientError::conflict(format!("context {} is already defined otherwise", def.id))),
        _ => {
            tx.put_json(context_key(&def.id), &def);
            Ok(())
        }
    }
}

/// One receipt of an item's variant (a group's receipt waits for its group).
fn add_receipt(rec: &mut TxRecord, it: &Item, at: IngressPosition, source: &str) {
    let state = if it.group.is_some() { ReceiptState::Open } else { ReceiptState::Accepted };
    let receipt = Receipt { at, source: source.to_string(), group: it.group, state };
    match rec.variants.iter_mut().find(|v| v.id == it.variant) {
        Some(v) => {
            if !v.receipts.iter().any(|r| r.at.position == at.position && r.group == it.group) {
                v.receipts.push(receipt);
            }
        }
        None => rec.variants.push(Variant {
            id: it.variant,
            receipts: vec![receipt],
            verdict: None,
            proof: it.proof,
            supplies: it.supplies.clone(),
        }),
    }
}


/// The component of a new transaction: its journal parents', its input competitors'
/// and its children's components merged into one (the smallest id survives).
fn link(tx: &mut Tx, meta: &mut Meta, txid: &Txid, inputs: &[crate::bitcoin::tx::Input]) -> Result<u64, ClientError> {
    let mut comps = spender_components(tx, txid)?;
    for i in inputs {
        if let Some(p) = load_tx(tx, &i.prev.txid)? {
            comps.insert(p.component);
        }
        for (k, _) in tx.scan(&edges_of_outpoint(&i.prev))? {
            let (_, other) = edge_of_key(&k);
            let rec: TxRecord = load_tx(tx, &other)?.ok_or_else(|| corrupt("edge spender"))?;
            comps.insert(rec.component);
        }
    }
    let Some(target) = comps.iter().next().copied() else {
        let id = meta.next_component;
        meta.next_component += 1;
        tx.put_json(component_key(id), &Component::new(id, *txid));
        return Ok(id);
    };
    let mut survivor: Component = tx.get_json(&component_key(target))?.ok_or_else(|| corrupt("component"))?;
    for c in comps.iter().skip(1) {
        let other: Component = tx.get_json(&component_key(*c))?.ok_or_else(|| corrupt("component"))?;
        let moved = other.members_of(tx)?;
        for m in &moved {
            let mut rec: TxRecord = load_tx(tx, m)?.ok_or_else(|| corrupt("member"))?;
            rec.component = target;
            save_tx(tx, &rec)?;
        }
        other.drop_members(tx)?;
        survivor.add(tx, &moved);
        tx.writes.insert(component_key(*c), None);
        tx.writes.insert(sensitive_key(*c), None);
        tx.writes.insert(pending_key(*c), None);
    }
    survivor.add(tx, &[*txid]);
    tx.put_json(component_key(target), &survivor);
    Ok(target)
}

/// Recomputes these components in the current context (inside the caller's commit).
pub(crate) fn recompute_components(tx: &mut Tx, comps: &BTreeSet<u64>) -> Result<usize, ClientError> {
    if comps.is_empty() {
        return Ok(0);
    }
    let meta: Meta = tx.get_json(META)?.ok_or_else(|| ClientError::invalid("the reconciler is not configured"))?;
    recompute_all(tx, &meta, comps)
}

fn recompute_all(tx: &mut Tx, meta: &Meta, comps: &BTreeSet<u64>) -> Result<usize, ClientError> {
    // What the commit changed, read once (when a first component may take a leaf step).
    let mut changes = None;
    for c in comps {
        recompute(tx, meta, *c, &mut changes)?;
    }
    Ok(comps.len())
}

/// An anchor counts as a confirmed parent when it is preverified or its placement is
/// on the current view's chain (a proof on another branch is not an anchor).
pub(crate) fn anchor_confirmed(tx: &Tx, tip: Option<Hash32>, a: &AnchorRecord) -> Result<bool, ClientError> {
    match &a.anchor {
        Anchor::Preverified => Ok(true),
        Anchor::Placed { placement } => on_chain(tx, tip, placement),
        Anchor::Proven { proof } => proof_on_view(tx, tip, proof),
    }
}

/// The header at `height` on the chain of the context's tip, if the headers reach it.
fn header_at(tx: &Tx, tip: Hash32, height: u64) -> Result<Option<HeaderRecord>, ClientError> {
    let mut at = tip;
    loop {
        let Some(h) = tx.get_json::<HeaderRecord>(&header_key(&at))? else { return Ok(None) };
        if h.height <= height {
            return Ok((h.height == height).then_some(h));
        }
        at = h.header.prev;
    }
}

/// Whether `p` is on the chain of the context's tip.
fn on_chain(tx: &Tx, tip: Option<Hash32>, p: &Placement) -> Result<bool, ClientError> {
    let Some(tip) = tip else { return Ok(false) };
    Ok(header_at(tx, tip, p.height)?.is_some_and(|h| h.header.hash == p.block))
}

/// Whether a verified Merkle claim holds in the current view: with headers, the block
/// at its height on the view's chain has its root (a proof on another branch is no
/// anchor, BRC-192 §10.4); without headers, the ChainTracker that verified it is the
/// application's chain view, and its answer stands.
pub(crate) fn proof_on_view(tx: &Tx, tip: Option<Hash32>, p: &Proof) -> Result<bool, ClientError> {
    let Some(tip) = tip else { return Ok(true) };
    Ok(header_at(tx, tip, p.height)?.is_some_and(|h| h.header.merkle_root == p.root))
}

/// What a component's members rely on in the current view, gathered member by member.
#[derive(Default)]
pub(crate) struct ViewFacts {
    /// Confirmed transactions the members rely on (parents outside the journal, and
    /// members an anchor names), each from the position its proof was received.
    pub anchors: BTreeMap<Txid, Option<u64>>,
    pub proven: BTreeSet<(Txid, Hash32)>,
    pub included: BTreeSet<Txid>,
    /// Some fact depends on the chain (the result can change with the view).
    pub chain: bool,
}

impl ViewFacts {
    /// Adds what `rec` relies on; `is_member` says which transactions are in the
    /// component (their support is their own readiness, not a fact).
    pub(crate) fn gather(&mut self, tx: &Tx, tip: Option<Hash32>, rec: &TxRecord, is_member: impl Fn(&Txid) -> bool) -> Result<(), ClientError> {
        let names = rec.inputs.iter().map(|i| i.prev.txid).filter(|p| !is_member(p)).chain([rec.txid]);
        for p in names {
            if self.anchors.contains_key(&p) {
                continue;
            }
            if let Some(a) = tx.get_json::<AnchorRecord>(&anchor_key(&p))? {
                self.chain |= !matches!(a.anchor, Anchor::Preverified);
                if anchor_confirmed(tx, tip, &a)? {
                    self.anchors.insert(p, a.at);
                }
            }
        }
        for v in &rec.variants {
            if let Some(pr) = &v.proof {
                self.chain = true;
                if proof_on_view(tx, tip, pr)? {
                    self.proven.insert((rec.txid, v.id));
                    if v.support().is_some() {
                        self.included.insert(rec.txid);
                    }
                }
            }
            for s in &v.supplies {
                self.chain = true;
                if proof_on_view(tx, tip, &s.proof)? {
                    self.proven.insert((s.txid, v.id));
                }
            }
        }
        if self.anchors.contains_key(&rec.txid) {
            self.included.insert(rec.txid);
        }
        for pl in &rec.placements {
            if on_chain(tx, tip, pl)? {
                self.included.insert(rec.txid);
            }
        }
        Ok(())
    }
}

/// A whole recompute of a component: its members and what selection gives them.
pub(crate) struct Computed {
    pub members: BTreeMap<Txid, TxRecord>,
    pub outcome: select::Outcome,
    /// The component's result can depend on the chain context (its `Xs` marker).
    pub sensitive: bool,
}

/// Recomputes component `comp` whole in the current context, writing nothing.
pub(crate) fn compute(tx: &Tx, meta: &Meta, comp: &Component) -> Result<Computed, ClientError> {
    let mut members = BTreeMap::new();
    for m in &comp.members_of(tx)? {
        let rec: TxRecord = load_tx(tx, m)?.ok_or_else(|| corrupt("member"))?;
        members.insert(*m, rec);
    }
    let tip = meta.current().tip;
    let mut facts = ViewFacts::default();
    for rec in members.values() {
        facts.gather(tx, tip, rec, |p| members.contains_key(p))?;
    }
    let chain = ChainFacts { support: super::order::Facts { anchors: &facts.anchors, proven: &facts.proven }, included: &facts.included };
    let outcome = select::reconcile(&members, meta, &chain);
    let sensitive = facts.chain || select::context_sensitive(&members);
    Ok(Computed { members, outcome, sensitive })
}

/// Recomputes one component in the current context and writes its result: from the one
/// leaf the step changed when that is enough (`incremental.rs`), else whole.
fn recompute(tx: &mut Tx, meta: &Meta, id: u64, changes: &mut Option<super::incremental::Changes>) -> Result<(), ClientError> {
    let mut comp: Component = tx.get_json(&component_key(id))?.ok_or_else(|| corrupt("component"))?;
    if super::incremental::leaf_step(tx, meta, &mut comp, changes)? {
        super::incremental::count(true);
        return super::incremental::check(tx, meta, &comp);
    }
    super::incremental::count(false);
    let Computed { mut members, outcome, sensitive } = compute(tx, meta, &comp)?;
    // Only what changed is written: a step that extends a long component rewrites the few
    // records whose result moved, not every member's (the conflict marker follows the
    // published status, so it changes exactly when that status does).
    let before = comp.clone();
    match outcome.published {
        Some(published) => {
            comp.exact = published.values().all(settled_for_leaves);
            for (t, p) in published {
                let rec = members.get_mut(&t).expect("member");
                publish(tx, rec, p)?;
            }
            comp.pending = None;
            comp.replacements = outcome.replacements;
        }
        // Pending: the previous accepted results stay as they were (shown stale).
        None => {
            comp.pending = outcome.pending;
            comp.exact = false;
        }
    }
    comp.pending_leaf = None;
    write_component(tx, &before, &comp, sensitive)
}

/// A member a later step cannot move by adding a frontier to the replay: a candidate
/// that has been eligible, or no candidate at all.
fn settled_for_leaves(p: &Published) -> bool {
    p.order.is_none() || p.eligible.is_some() || matches!(p.status, Status::Included | Status::Invalid | Status::Limited)
}

/// Writes `p` as `rec`'s published result if it moved, with its conflict marker.
pub(crate) fn publish(tx: &mut Tx, rec: &mut TxRecord, p: Published) -> Result<(), ClientError> {
    if rec.published.as_ref() == Some(&p) {
        return Ok(());
    }
    let conflict = |p: Option<&Published>| p.is_some_and(|p| matches!(p.status, Status::Conflicting | Status::DependentConflict));
    match (conflict(rec.published.as_ref()), conflict(Some(&p))) {
        (false, true) => tx.put(conflict_key(&rec.txid), vec![]),
        (true, false) => {
            tx.writes.insert(conflict_key(&rec.txid), None);
        }
        _ => {}
    }
    rec.published = Some(p);
    save_tx(tx, rec)
}

/// Writes the component record and its pending and context markers, each only if it
/// changed (a verification that settles a component otherwise rewrote both markers of
/// every component it touched).
pub(crate) fn write_component(tx: &mut Tx, before: &Component, comp: &Component, sensitive: bool) -> Result<(), ClientError> {
    set_marker(tx, pending_key(comp.id), comp.pending.is_some())?;
    if comp != before {
        tx.put_json(component_key(comp.id), comp);
    }
    set_marker(tx, sensitive_key(comp.id), sensitive)
}

/// Makes the empty marker `k` present or absent, writing only when that changes it.
fn set_marker(tx: &mut Tx, k: Vec<u8>, present: bool) -> Result<(), ClientError> {
    if tx.get(&k)?.is_some() != present {
        tx.writes.insert(k, present.then(Vec::new));
    }
    Ok(())
}

/// For modules reading the records.
pub(crate) fn outpoint_edges(tx: &Tx, op: &Outpoint) -> Result<Vec<Txid>, ClientError> {
    Ok(tx.scan(&edges_of_outpoint(op))?.into_iter().map(|(k, _)| edge_of_key(&k).1).collect())
}

/// Accepts verification results, all in one commit. A result for another context
/// than the current one is stale and not recorded; unresolved, cancelled and
/// context-changed results leave the job pending. Groups whose candidates now all
/// have verdicts are settled in the same commit (`evidence::settle`).
/// The verdicts are written into `tx`; settles the groups they complete (the caller then
/// advances the generations those groups unblock: `store.rs`). `None`: nothing accepted.
pub(crate) fn apply_verifications(tx: &mut Tx, results: &[VerificationResult], out: &mut StepOutcome) -> Result<Option<evidence::Settled>, ClientError> {
    let meta = ClientDb::meta(tx)?;
    let mut touched = BTreeSet::new();
    let mut judged: BTreeMap<Txid, BTreeSet<Hash32>> = BTreeMap::new();
    for r in results {
        if r.context_id != meta.current().id {
            out.stale += 1;
            continue;
        }
        let status = match r.status {
            VerificationStatus::Verified => VerdictStatus::Verified,
            VerificationStatus::Invalid => VerdictStatus::Invalid,
            VerificationStatus::Limited => VerdictStatus::Limited,
            _ => {
                out.ignored += 1;
                continue;
            }
        };
        let mut rec: TxRecord = load_tx(tx, &r.txid)?.ok_or_else(|| ClientError::invalid(format!("unknown transaction {}", r.txid)))?;
        if status == VerdictStatus::Verified {
            // The fact must be the exact bytes of this txid (§8 integrity).
            let raw = r.raw.as_deref().ok_or_else(|| ClientError::invalid("a verified result carries the transaction bytes"))?;
            if Hash32::of_double_sha256(raw) != r.txid || raw != rec.raw.as_slice() {
                return Err(ClientError::invalid(format!("verified fact for {} is not its raw transaction", r.txid)));
            }
        }
        let policy = if status == VerdictStatus::Limited { r.policy.clone() } else { None };
        let verdict = Verdict { status, context_id: r.context_id.clone(), reason: r.reason.clone(), policy };
        let v = rec.variants.iter_mut().find(|v| v.id == r.variant).ok_or_else(|| ClientError::invalid("unknown evidence variant"))?;
        match &v.verdict {
            Some(old) if old.status == verdict.status => {
                out.ignored += 1;
                continue;
            }
            Some(_) => return Err(ClientError::conflict(format!("variant of {} already has another verdict", r.txid))),
            None => v.verdict = Some(verdict),
        }
        tx.writes.insert(job_key(v.first(), &r.txid, &v.id), None);
        if let Some(p) = r.placement {
            if !rec.placements.contains(&p) {
                rec.placements.push(p);
                rec.placements.sort();
            }
        }
        touched.insert(rec.component);
        judged.entry(r.txid).or_default().insert(r.variant);
        if status == VerdictStatus::Limited {
            tx.put(limited_key(&r.txid), vec![]);
        }
        save_tx(tx, &rec)?;
        out.accepted += 1;
    }
    if out.accepted == 0 {
        return Ok(None);
    }
    let settled = settle_judged(tx, &judged)?;
    touched.extend(&settled.components);
    out.components = recompute_all(tx, &meta, &touched)?;
    Ok(Some(settled))
}
