//! Native evidence verification: the verdict `@bsv/sdk` reaches with
//! `Beef.fromBinary` + `findAtomicTransaction` + `Transaction.verify` (as js/client/verifier.js
//! uses them), computed without the JS thread.
//!
//! [`verify_beef`] does all the work that needs no chain: it reads the bundle as the SDK
//! reads it, links each input to its source as `findAtomicTransaction` does (a
//! transaction is "mined" when any BUMP of the bundle lists its txid at level 0), checks
//! the bounds (`measure` of js/client/verifier.js), then walks the ancestry in the order
//! `Transaction.verify` does: a mined transaction yields a [`RootClaim`] (its Merkle
//! root at its height, to be confirmed by a ChainTracker); an unmined one has every
//! input's source in the bundle, every script validated ([`script::interp`]) and no more
//! output than input. The walk ends at the first failure, as the SDK's does.
//!
//! [`Verification::settle`] then applies the ChainTracker's answers, in the walk's order:
//! a proof above the tracker's height leaves the job unresolved; a refused root, or a
//! coinbase output spent by an unmined transaction before it is 100 blocks deep (the node's
//! maturity rule), makes it invalid; otherwise the walk's own outcome stands.
//!
//! Where the node and `@bsv/sdk` disagree, this follows the node (docs/native-verify.md
//! "Differences from @bsv/sdk"): a coinbase's proof is valid at any depth (the SDK refuses
//! one more than 100 blocks below the tracker's tip), and a second OP_ELSE in one OP_IF fails
//! ([`script::interp`]).

use std::collections::{HashMap, HashSet, VecDeque};

use sha2::{Digest, Sha256};

use super::beef::Bump;
use super::merkle;
use super::script::interp::{self, Bounds, Fault, Spend, Work};
use super::script::sighash::Cache;
use super::tx::{Hash32, InputView, Outpoint, OutputView, Reader, TxView, Txid};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Verified,
    Invalid,
    Limited,
    Unresolved,
}

impl Status {
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Verified => "verified",
            Status::Invalid => "invalid",
            Status::Limited => "limited",
            Status::Unresolved => "unresolved",
        }
    }
}

/// The bounds of one verification (js/client/verifier.js's limits).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: usize,
    pub max_transactions: usize,
    pub max_depth: usize,
    pub max_script_bytes: usize,
    pub memory_limit: usize,
    /// Opcodes executed plus bytes hashed over the whole bundle (native only).
    pub budget: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_bytes: 1 << 20, max_transactions: 256, max_depth: 64, max_script_bytes: 1 << 20, memory_limit: interp::DEFAULT_MEMORY_LIMIT, budget: 1 << 32 }
    }
}

/// A question for the ChainTracker: is `root` the Merkle root of the block at `height`?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootClaim {
    pub height: u64,
    pub root: Hash32,
    /// The mined transaction the claim proves.
    pub txid: Txid,
    /// The transaction is at offset 0 (a coinbase).
    pub coinbase: bool,
    /// An unmined transaction of the bundle spends one of its outputs (it is not the subject):
    /// for a coinbase, the node then requires the spend to be at least 100 blocks above it.
    pub spent: bool,
}

/// Blocks a coinbase output must be below the block that spends it (the node's maturity rule).
pub const COINBASE_MATURITY: u64 = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verification {
    /// The outcome once every claim is confirmed (or the outcome, when there are none).
    pub status: Status,
    pub reason: String,
    /// In the order `Transaction.verify` asks them; all come before the outcome.
    pub claims: Vec<RootClaim>,
    /// The highest block a proof the verification relies on is in: a tracker below it
    /// cannot judge the job yet.
    pub proof_height: Option<u64>,
    /// The subject's bytes (serialized as the SDK writes them), when it was found.
    pub raw: Option<Vec<u8>>,
    pub work: Work,
}

/// The outcome after the ChainTracker answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settled {
    pub status: Status,
    pub reason: String,
    /// Unresolved because a proof is above the tracker's height: try again at this one.
    pub wait_height: Option<u64>,
}

impl Verification {
    fn early(status: Status, reason: impl Into<String>) -> Verification {
        Verification { status, reason: reason.into(), claims: Vec::new(), proof_height: None, raw: None, work: Work::default() }
    }

    /// Applies the tracker's answers: `current` its height (needed when
    /// `proof_height` is set), `valid(claim)` whether it accepts the claim's root.
    pub fn settle(&self, current: Option<u64>, mut valid: impl FnMut(&RootClaim) -> bool) -> Settled {
        if let (Some(p), Some(h)) = (self.proof_height, current) {
            if p > h {
                return Settled { status: Status::Unresolved, reason: format!("a Merkle path is for height {p}, above the chain tracker's {h}"), wait_height: Some(p) };
            }
        }
        for c in &self.claims {
            // An unmined spender can be mined at the next block at the earliest.
            let immature = c.coinbase && c.spent && current.is_some_and(|h| h + 1 < c.height + COINBASE_MATURITY);
            if immature {
                let at = current.unwrap_or(0) + 1;
                return Settled { status: Status::Invalid, reason: format!("coinbase {} at height {} is spent before maturity (height {at} at the earliest)", c.txid, c.height), wait_height: None };
            }
            if !valid(c) {
                return Settled { status: Status::Invalid, reason: format!("Invalid merkle path for transaction {}", c.txid), wait_height: None };
            }
        }
        Settled { status: self.status, reason: self.reason.clone(), wait_height: None }
    }
}

/// A transaction as the SDK holds it: parsed leniently (no count is refused), its txid
/// the double SHA-256 of its canonical serialization.
struct Tx<'a> {
    view: TxView<'a>,
    /// The canonical bytes, when the bundle's were not (a varint written long).
    canonical: Option<Vec<u8>>,
}

impl Tx<'_> {
    fn bytes(&self) -> &[u8] {
        self.canonical.as_deref().unwrap_or(self.view.raw)
    }
}

/// Reads a varint, noting whether it was written in its shortest form.
fn varint(r: &mut Reader<'_>, canonical: &mut bool) -> Result<u64, String> {
    let start = r.at;
    let v = r.varint().map_err(|e| e.to_string())?;
    let used = r.at - start;
    let shortest = match v {
        0..=0xfc => 1,
        0xfd..=0xffff => 3,
        0x10000..=0xffff_ffff => 5,
        _ => 9,
    };
    if used != shortest {
        *canonical = false;
    }
    // The SDK reads counts and lengths as JS numbers: above 2^53 it throws.
    if v > 1 << 53 {
        return Err("number too large to retain precision".into());
    }
    Ok(v)
}

fn count(r: &mut Reader<'_>, canonical: &mut bool, min: usize) -> Result<usize, String> {
    let n = varint(r, canonical)?;
    if n.saturating_mul(min as u64) > r.rest().len() as u64 {
        return Err("truncated: the bytes end before the structure does".into());
    }
    Ok(n as usize)
}

fn take<'a>(r: &mut Reader<'a>, n: usize) -> Result<&'a [u8], String> {
    r.take(n).map_err(|e| e.to_string())
}


fn serialize(v: &TxView<'_>) -> Vec<u8> {
    let mut o = Vec::with_capacity(v.raw.len());
    o.extend_from_slice(&v.version.to_le_bytes());
    super::tx::write_varint(&mut o, v.inputs.len() as u64);
    for i in &v.inputs {
        let mut w = i.prev.txid.0;
        w.reverse();
        o.extend_from_slice(&w);
        o.extend_from_slice(&i.prev.vout.to_le_bytes());
        super::tx::write_varint(&mut o, i.script.len() as u64);
        o.extend_from_slice(i.script);
        o.extend_from_slice(&i.sequence.to_le_bytes());
    }
    super::tx::write_varint(&mut o, v.outputs.len() as u64);
    for out in &v.outputs {
        o.extend_from_slice(&out.satoshis.to_le_bytes());
        super::tx::write_varint(&mut o, out.script.len() as u64);
        o.extend_from_slice(out.script);
    }
    o.extend_from_slice(&v.locktime.to_le_bytes());
    o
}

/// One transaction at the reader's position, as the SDK's `Transaction.fromReader`.
fn read_tx<'a>(r: &mut Reader<'a>) -> Result<Tx<'a>, String> {
    let start = r.at;
    let mut canonical = true;
    let version = r.u32().map_err(|e| e.to_string())?;
    let n_in = count(r, &mut canonical, 41)?;
    let mut inputs = Vec::with_capacity(n_in);
    for _ in 0..n_in {
        let txid = Hash32::from_wire(take(r, 32)?);
        let vout = r.u32().map_err(|e| e.to_string())?;
        let len = count(r, &mut canonical, 1)?;
        let script = take(r, len)?;
        let sequence = r.u32().map_err(|e| e.to_string())?;
        inputs.push(InputView { prev: Outpoint { txid, vout }, script, sequence });
    }
    let n_out = count(r, &mut canonical, 9)?;
    let mut outputs = Vec::with_capacity(n_out);
    for _ in 0..n_out {
        let satoshis = u64::from_le_bytes(take(r, 8)?.try_into().unwrap());
        // `readUInt64LEBn().toNumber()` throws above 2^53 - 1.
        if satoshis > (1 << 53) - 1 {
            return Err("an output amount exceeds 2^53 - 1 satoshis".into());
        }
        let len = count(r, &mut canonical, 1)?;
        outputs.push(OutputView { satoshis, script: take(r, len)? });
    }
    let locktime = r.u32().map_err(|e| e.to_string())?;
    let raw = &r.bytes()[start..r.at];
    let mut view = TxView { txid: Hash32::default(), version, inputs, outputs, locktime, raw };
    let canonical = if canonical { None } else { Some(serialize(&view)) };
    view.txid = Hash32::of_double_sha256(canonical.as_deref().unwrap_or(raw));
    Ok(Tx { view, canonical })
}

fn read_bump(r: &mut Reader<'_>) -> Result<Bump, String> {
    let mut canonical = true;
    let height = varint(r, &mut canonical)?;
    let tree = take(r, 1)?[0] as usize;
    let mut levels = Vec::with_capacity(tree);
    for _ in 0..tree {
        let mut level = std::collections::BTreeMap::new();
        for _ in 0..count(r, &mut canonical, 2)? {
            let offset = varint(r, &mut canonical)?;
            let flags = take(r, 1)?[0];
            let hash = if flags & 1 == 1 { None } else { Some(<[u8; 32]>::try_from(take(r, 32)?).unwrap()) };
            if level.insert(offset, hash).is_some() {
                return Err(format!("Duplicate offset: {offset}"));
            }
        }
        levels.push(level);
    }
    let bump = Bump { height, levels };
    merkle::check(&bump)?;
    Ok(bump)
}

enum Entry<'a> {
    Raw(Tx<'a>),
    TxidOnly(Txid),
}

struct Bundle<'a> {
    bumps: Vec<Bump>,
    entries: Vec<Entry<'a>>,
}

/// Reads a bundle as the SDK's `Beef.fromBinary` does (bytes after it are ignored; a
/// V1 BUMP flag other than 0 means "an index follows"; a V2 format other than 2 is a
/// raw transaction) but refuses truncation, which the SDK's reader does not detect.
fn read_bundle(bytes: &[u8]) -> Result<Bundle<'_>, String> {
    let mut r = Reader::new(bytes);
    let mut version = r.u32().map_err(|e| e.to_string())?;
    if version == 0x0101_0101 {
        take(&mut r, 32)?;
        version = r.u32().map_err(|e| e.to_string())?;
    }
    let v2 = match version {
        0xefbe_0001 => false,
        0xefbe_0002 => true,
        v => return Err(format!("Serialized BEEF must start with 4022206465 or 4022206466 but starts with {v}")),
    };
    let mut canonical = true;
    let mut bumps = Vec::new();
    for _ in 0..count(&mut r, &mut canonical, 2)? {
        bumps.push(read_bump(&mut r)?);
    }
    let mut entries = Vec::new();
    for _ in 0..count(&mut r, &mut canonical, 1)? {
        if v2 {
            let format = take(&mut r, 1)?[0];
            if format == 2 {
                entries.push(Entry::TxidOnly(Hash32::from_wire(take(&mut r, 32)?)));
                continue;
            }
            if format == 1 {
                varint(&mut r, &mut canonical)?;
            }
            entries.push(Entry::Raw(read_tx(&mut r)?));
        } else {
            let tx = read_tx(&mut r)?;
            if take(&mut r, 1)?[0] != 0 {
                varint(&mut r, &mut canonical)?;
            }
            entries.push(Entry::Raw(tx));
        }
    }
    Ok(Bundle { bumps, entries })
}

/// The linked ancestry of the subject: node `i` is a raw entry, with the source node
/// of each input (if the bundle carries it) and its proof (if a BUMP lists it).
struct Graph<'a, 'b> {
    txs: Vec<&'b Tx<'a>>,
    sources: Vec<Vec<Option<usize>>>,
    proof: Vec<Option<&'b Bump>>,
}

fn link<'a, 'b>(bundle: &'b Bundle<'a>, subject: usize) -> (Graph<'a, 'b>, usize) {
    // `findTxid`: the last entry of a txid stands for it.
    let mut by_txid: HashMap<Txid, usize> = HashMap::new();
    for (i, e) in bundle.entries.iter().enumerate() {
        let t = match e {
            Entry::Raw(t) => t.view.txid,
            Entry::TxidOnly(t) => *t,
        };
        by_txid.insert(t, i);
    }
    let find_bump = |t: &Txid| {
        let mut w = t.0;
        w.reverse();
        bundle.bumps.iter().find(|b| merkle::index_of(b, &w).is_some())
    };
    let mut g = Graph { txs: Vec::new(), sources: Vec::new(), proof: Vec::new() };
    let mut node_of: HashMap<usize, usize> = HashMap::new();
    let mut stack = vec![subject];
    let root = 0;
    while let Some(e) = stack.pop() {
        if node_of.contains_key(&e) {
            continue;
        }
        let Entry::Raw(tx) = &bundle.entries[e] else { continue };
        let n = g.txs.len();
        node_of.insert(e, n);
        g.txs.push(tx);
        g.proof.push(find_bump(&tx.view.txid));
        g.sources.push(Vec::new());
        if g.proof[n].is_none() {
            for i in &tx.view.inputs {
                if let Some(&src) = by_txid.get(&i.prev.txid) {
                    if matches!(bundle.entries[src], Entry::Raw(_)) {
                        stack.push(src);
                    }
                }
            }
        }
    }
    // Second pass: input -> node.
    for n in 0..g.txs.len() {
        if g.proof[n].is_some() {
            g.sources[n] = vec![None; g.txs[n].view.inputs.len()];
            continue;
        }
        g.sources[n] = g.txs[n]
            .view
            .inputs
            .iter()
            .map(|i| by_txid.get(&i.prev.txid).and_then(|e| node_of.get(e).copied()))
            .collect();
    }
    (g, root)
}

enum Measured {
    Ok,
    Limited(String),
}

/// js/client/verifier.js's `measure`: ancestry depth and script bytes, walked as it walks them.
fn measure(g: &Graph<'_, '_>, limits: &Limits) -> Measured {
    struct W<'g, 'a, 'b> {
        g: &'g Graph<'a, 'b>,
        depth_of: HashMap<usize, usize>,
        script_bytes: usize,
        limits: Limits,
        steps: u64,
    }
    fn walk(w: &mut W<'_, '_, '_>, n: usize, depth: usize) -> Result<(), String> {
        if w.depth_of.get(&n).is_some_and(|d| *d >= depth) {
            return Ok(());
        }
        if depth > w.limits.max_depth {
            return Err(format!("ancestry deeper than {}", w.limits.max_depth));
        }
        w.steps += 1;
        if w.steps > 1 << 20 {
            return Err("ancestry walk over 1048576 steps".into());
        }
        w.depth_of.insert(n, depth);
        if w.g.proof[n].is_some() {
            return Ok(());
        }
        let tx = w.g.txs[n];
        for (k, input) in tx.view.inputs.iter().enumerate() {
            let Some(src) = w.g.sources[n][k] else { continue };
            let lock = w.g.txs[src].view.outputs.get(input.prev.vout as usize).map_or(0, |o| o.script.len());
            w.script_bytes += input.script.len() + lock;
            if w.script_bytes > w.limits.max_script_bytes {
                return Err(format!("script work over {} bytes", w.limits.max_script_bytes));
            }
            walk(w, src, depth + 1)?;
        }
        Ok(())
    }
    let mut w = W { g, depth_of: HashMap::new(), script_bytes: 0, limits: *limits, steps: 0 };
    match walk(&mut w, 0, 0) {
        Ok(()) => Measured::Ok,
        Err(m) => Measured::Limited(m),
    }
}

/// js/client/verifier.js's `proofHeights`, reduced to their maximum.
fn proof_height(g: &Graph<'_, '_>) -> Option<u64> {
    let mut seen = HashSet::new();
    let mut stack = vec![0usize];
    let mut max = None;
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        if let Some(b) = g.proof[n] {
            max = max.max(Some(b.height));
            continue;
        }
        stack.extend(g.sources[n].iter().flatten().copied());
    }
    max
}

/// Verifies the transaction `txid` of a bundle (see the module's documentation).
pub fn verify_beef(bytes: &[u8], txid: &Txid, limits: &Limits) -> Verification {
    if bytes.len() > limits.max_bytes {
        return Verification::early(Status::Limited, format!("evidence is {} bytes, over {}", bytes.len(), limits.max_bytes));
    }
    let bundle = match read_bundle(bytes) {
        Ok(b) => b,
        Err(m) => return Verification::early(Status::Unresolved, format!("evidence is not a BEEF: {m}")),
    };
    if bundle.entries.len() > limits.max_transactions {
        return Verification::early(Status::Limited, format!("{} transactions, over {}", bundle.entries.len(), limits.max_transactions));
    }
    let subject = bundle.entries.iter().rposition(|e| match e {
        Entry::Raw(t) => t.view.txid == *txid,
        Entry::TxidOnly(t) => t == txid,
    });
    let subject = match subject {
        Some(s) if matches!(bundle.entries[s], Entry::Raw(_)) => s,
        _ => return Verification::early(Status::Invalid, format!("evidence does not hold transaction {txid}")),
    };
    let (g, root) = link(&bundle, subject);
    if let Measured::Limited(m) = measure(&g, limits) {
        return Verification::early(Status::Limited, m);
    }
    let mut v = Verification {
        status: Status::Verified,
        reason: String::new(),
        claims: Vec::new(),
        proof_height: proof_height(&g),
        raw: Some(g.txs[root].bytes().to_vec()),
        work: Work::default(),
    };
    v.reason = if g.proof[root].is_some() { "its merkle path verifies".into() } else { "merkle paths and scripts verify".into() };
    if let Err((status, reason)) = walk(&g, limits, &mut v) {
        v.status = status;
        v.reason = reason;
    }
    v
}

/// `Transaction.verify`'s breadth-first walk.
fn walk(g: &Graph<'_, '_>, limits: &Limits, v: &mut Verification) -> Result<(), (Status, String)> {
    let mut verified: HashSet<usize> = HashSet::new();
    let mut queue = VecDeque::from([0usize]);
    let mut steps = 0u64;
    while let Some(n) = queue.pop_front() {
        if verified.contains(&n) {
            continue;
        }
        steps += 1;
        if steps > 1 << 20 {
            return Err((Status::Limited, "verification walk over 1048576 steps".into()));
        }
        let tx = g.txs[n];
        let txid = tx.view.txid;
        if let Some(bump) = g.proof[n] {
            let root = merkle::compute_root(bump, &txid).map_err(|e| (Status::Invalid, format!("{e} (transaction {txid})")))?;
            let mut w = txid.0;
            w.reverse();
            let coinbase = merkle::index_of(bump, &w) == Some(0);
            // The walk reaches a transaction other than the subject only as the source of an
            // unmined transaction's input.
            v.claims.push(RootClaim { height: bump.height, root, txid, coinbase, spent: n != 0 });
            verified.insert(n);
            continue;
        }
        let mut input_total = 0f64;
        let mut cache = Cache::default();
        for (i, input) in tx.view.inputs.iter().enumerate() {
            let Some(src) = g.sources[n][i] else {
                return Err((Status::Unresolved, format!("Verification failed because the input at index {i} of transaction {txid} is missing an associated source transaction.")));
            };
            let Some(out) = g.txs[src].view.outputs.get(input.prev.vout as usize) else {
                return Err((Status::Invalid, format!("the input at index {i} of transaction {txid} spends output {} its source does not have", input.prev.vout)));
            };
            input_total += out.satoshis as f64;
            if !verified.contains(&src) {
                queue.push_back(src);
            }
            let spend = Spend { tx: &tx.view, input: i, locking: out.script, satoshis: out.satoshis };
            let used = v.work.ops + v.work.hashed_bytes;
            let bounds = Bounds { memory_limit: limits.memory_limit, budget: limits.budget.saturating_sub(used) };
            let mut work = Work::default();
            let r = interp::validate(&spend, bounds, &mut cache, &mut work);
            v.work.ops += work.ops;
            v.work.hashed_bytes += work.hashed_bytes;
            v.work.signatures += work.signatures;
            match r {
                Ok(()) => {}
                Err(Fault::Script(m)) => return Err((Status::Invalid, format!("script evaluation error in input {i} of transaction {txid}: {m}"))),
                Err(Fault::Memory(m)) => return Err((Status::Limited, format!("script work: {m}"))),
                Err(Fault::Budget(m)) => return Err((Status::Limited, format!("script work: {m}"))),
            }
        }
        let output_total: f64 = tx.view.outputs.iter().fold(0f64, |a, o| a + o.satoshis as f64);
        if output_total > input_total {
            return Err((Status::Invalid, "a script or the amounts of the unconfirmed ancestry do not verify".into()));
        }
        verified.insert(n);
    }
    Ok(())
}

/// The double SHA-256 (for tests and callers that name transactions).
pub fn txid_of(raw: &[u8]) -> Txid {
    let d: [u8; 32] = Sha256::digest(Sha256::digest(raw)).into();
    let mut d = d;
    d.reverse();
    Hash32(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(coinbase: bool, spent: bool) -> Verification {
        Verification {
            status: Status::Verified,
            reason: "ok".into(),
            claims: vec![RootClaim { height: 100, root: Hash32([1; 32]), txid: Hash32([2; 32]), coinbase, spent }],
            proof_height: Some(100),
            raw: None,
            work: Work::default(),
        }
    }

    #[test]
    fn settle_applies_height_then_claims_in_order() {
        let v = claimed(false, false);
        let s = v.settle(Some(99), |_| true);
        assert_eq!((s.status, s.wait_height), (Status::Unresolved, Some(100)));
        assert_eq!(v.settle(Some(100), |_| true).status, Status::Verified);
        assert_eq!(v.settle(Some(100), |_| false).status, Status::Invalid);
        // A coinbase is proven at any depth (the node's rule; the SDK refuses one more than
        // 100 blocks below the tip).
        let c = claimed(true, false);
        assert_eq!(c.settle(Some(100), |_| true).status, Status::Verified);
        assert_eq!(c.settle(Some(5000), |_| true).status, Status::Verified);
        // Spent by an unmined transaction: only once that can be mined 100 blocks above it.
        let spent = claimed(true, true);
        assert_eq!(spent.settle(Some(198), |_| true).status, Status::Invalid);
        assert_eq!(spent.settle(Some(199), |_| true).status, Status::Verified);
        // Maturity concerns coinbases only.
        assert_eq!(claimed(false, true).settle(Some(100), |_| true).status, Status::Verified);
    }

    #[test]
    fn junk_and_truncation_are_verdicts_not_panics() {
        let l = Limits::default();
        let t = Hash32([3; 32]);
        assert_eq!(verify_beef(&[], &t, &l).status, Status::Unresolved);
        assert_eq!(verify_beef(&[1, 0, 0xbe, 0xef, 0, 0], &t, &l).status, Status::Invalid);
        let mut big = vec![1, 0, 0xbe, 0xef];
        big.extend_from_slice(&[0xff; 64]);
        for cut in 0..big.len() {
            let _ = verify_beef(&big[..cut], &t, &l);
        }
        assert_eq!(verify_beef(&vec![0; (1 << 20) + 1], &t, &l).status, Status::Limited);
    }
}
