//! Replay of the public reconciliation corpus (`reconciliation-vectors.json`,
//! `reconciliation-traces.json`) through the durable store, shared by
//! `tests/client_traces.rs` and the `conformance_client` example. Not part of the API.
//!
//! Every trace runs in a fresh store directory. `receive` is a journal receive of the
//! named raw transactions (parsed here: txids come from the bytes and must equal the
//! corpus's); `verify` answers the store's pending verification jobs through the
//! verification port, in the named or current context, verified exactly when the
//! corpus marks the transaction's Script valid; `view` makes a view or finality context
//! active; `membership` / `membershipVerified` commit real batch bodies to the
//! checkpoint store; `restart` closes the store and reopens it from disk; `expect`
//! compares every field it names, and a field this runner does not know is a failure.
//!
//! The corpus's chain facts are set up the way a verifier would supply them: headers
//! (proof of work checked), the two views, the finality contexts, anchors and the
//! inclusion proof, whose Merkle placements are computed here from their BUMPs and
//! must land on a known header at the stated height. Script validity is taken from
//! the corpus (the Script interpreter is the next issue).
#![doc(hidden)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use overlay_lookup_live::client::chain::Finality;
use super::fixture;
use overlay_lookup_live::client::journal::{Anchor, Placement};
use overlay_lookup_live::client::parse::Chain;
use overlay_lookup_live::client::reconcile::{Received, ReconcilerConfig, VerificationResult, VerificationStatus};
use overlay_lookup_live::bitcoin::tx::{parse_tx, Hash32, Outpoint, Txid};
use overlay_lookup_live::client::{ClientDb, CommitOptions, SourceKey};

pub struct Corpus {
    pub vectors: Value,
    pub traces: Vec<Value>,
}

pub fn load(dir: &Path) -> Result<Corpus, String> {
    let read = |f: &str| -> Result<Value, String> {
        let p = dir.join(f);
        let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let vectors = read("reconciliation-vectors.json")?;
    let traces = read("reconciliation-traces.json")?.as_array().cloned().ok_or("traces are not an array")?;
    Ok(Corpus { vectors, traces })
}

/// The vendored corpus directory of this crate.
pub fn vendored() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/spec")
}

/// This project's own traces, in the corpus format over the corpus's vectors
/// (tests/fixtures/traces/project-traces.json): served evidence in groups.
pub fn project_traces() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces/project-traces.json")
}

/// The corpus of `dir` with the traces of `file` in place of its own.
pub fn load_traces(dir: &Path, file: &Path) -> Result<Corpus, String> {
    let mut c = load(dir)?;
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    c.traces = v.as_array().cloned().ok_or("traces are not an array")?;
    Ok(c)
}

pub fn chain() -> Chain {
    Chain { network: "reconciliation-corpus".into(), genesis_hash: fixture::GENESIS.into() }
}

fn s<'a>(v: &'a Value, f: &str) -> Result<&'a str, String> {
    v[f].as_str().ok_or_else(|| format!("field {f} missing in {v}"))
}

fn b64(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| e.to_string())
}

/// The subject, BUMP height and Merkle root (wire order) of an Atomic BEEF.
pub fn bump_root(beef: &[u8]) -> Result<(Txid, u64, [u8; 32]), String> {
    let b = overlay_lookup_live::bitcoin::beef::parse(beef).map_err(|e| e.to_string())?;
    let subject = b.subject.ok_or("not an Atomic BEEF")?;
    let (_, bump) = b.raw(&subject).ok_or("subject missing")?;
    let bump = &b.bumps[bump.ok_or("subject has no BUMP")?];
    let root = overlay_lookup_live::bitcoin::beef::merkle_root(bump, &subject).ok_or("BUMP does not cover the subject")?;
    let mut wire = root.0;
    wire.reverse();
    Ok((subject, bump.height, wire))
}

/// Per trace generation of a membership source: what was sent, so a replay resends
/// the same bytes against the same cursor.
#[derive(Default)]
struct GenState {
    cursor: Option<String>,
    sent: BTreeMap<String, (Option<String>, Vec<u8>)>,
}

pub struct Runner<'a> {
    corpus: &'a Corpus,
    dir: PathBuf,
    store: Option<ClientDb>,
    /// name -> txid, from the parsed raw bytes.
    pub txids: BTreeMap<String, Txid>,
    names: BTreeMap<Txid, String>,
    raws: BTreeMap<String, Vec<u8>>,
    gens: BTreeMap<(String, u64), GenState>,
    /// Transactions the trace's `receive` steps delivered: the ones `states` reports
    /// (a `membership` step's evidence journals its transaction too, which the corpus
    /// does not describe).
    received: std::collections::BTreeSet<Txid>,
}

impl<'a> Runner<'a> {
    /// Opens a store in `dir` and sets up the corpus's chain facts.
    pub fn new(corpus: &'a Corpus, dir: &Path, non_final: bool, journal: &str) -> Result<Runner<'a>, String> {
        let store = ClientDb::open(dir.join("store")).map_err(|e| e.to_string())?;
        let mut r = Runner {
            corpus,
            dir: dir.to_path_buf(),
            store: Some(store),
            txids: BTreeMap::new(),
            names: BTreeMap::new(),
            raws: BTreeMap::new(),
            gens: BTreeMap::new(),
            received: Default::default(),
        };
        r.setup(non_final, journal)?;
        Ok(r)
    }

    pub fn store(&self) -> &ClientDb {
        self.store.as_ref().expect("store is open")
    }

    pub fn restart(&mut self) -> Result<(), String> {
        self.store.take().expect("open").close().map_err(|e| e.to_string())?;
        self.store = Some(ClientDb::open(self.dir.join("store")).map_err(|e| e.to_string())?);
        Ok(())
    }

    /// Closes the store, lets `edit` change its files at rest, and opens it again.
    pub fn reopen_with(&mut self, edit: impl FnOnce(&Path)) -> Result<(), String> {
        self.store.take().expect("open").close().map_err(|e| e.to_string())?;
        edit(&self.dir.join("store"));
        self.store = Some(ClientDb::open(self.dir.join("store")).map_err(|e| e.to_string())?);
        Ok(())
    }

    pub fn close(mut self) -> Result<(), String> {
        self.store.take().expect("open").close().map_err(|e| e.to_string())
    }

    fn setup(&mut self, non_final: bool, journal: &str) -> Result<(), String> {
        let v = &self.corpus.vectors;
        let err = |e: overlay_lookup_live::client::ClientError| e.to_string();
        let ferr = |e: overlay_lookup_live::bitcoin::Error| e.to_string();
        for (name, t) in v["transactions"].as_object().ok_or("transactions")? {
            let raw = hex::decode(s(t, "raw")?).map_err(|e| e.to_string())?;
            let parsed = parse_tx(&raw).map_err(ferr)?;
            if parsed.txid.to_hex() != s(t, "txid")? {
                return Err(format!("transaction {name}: txid of the bytes is {}, the corpus says {}", parsed.txid, s(t, "txid")?));
            }
            self.txids.insert(name.clone(), parsed.txid);
            self.names.insert(parsed.txid, name.clone());
            self.raws.insert(name.clone(), raw);
        }
        let headers: Vec<Vec<u8>> =
            v["headers"].as_array().ok_or("headers")?.iter().map(|h| hex::decode(s(h, "raw")?).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
        let st = self.store();
        st.add_headers(&headers).map_err(err)?;
        for (id, view) in v["views"].as_object().ok_or("views")? {
            st.define_view(id, Hash32::from_hex(s(view, "tipHash")?).map_err(ferr)?).map_err(err)?;
        }
        for (id, c) in v["finalityContexts"].as_object().ok_or("finalityContexts")? {
            let f = Finality { tip_height: c["height"].as_u64().ok_or("height")?, mtp: c["mtp"].as_u64().ok_or("mtp")? };
            st.define_context(id, f).map_err(err)?;
        }
        st.configure_reconciler(&ReconcilerConfig { journal_id: journal.into(), non_final, initial_context: "base".into() }).map_err(err)?;
        for a in v["anchors"].as_array().ok_or("anchors")? {
            let name = s(a, "name")?;
            let placement = self.placement(&b64(s(a, "beef")?)?, a["height"].as_u64().ok_or("height")?, None)?;
            let raw = self.raws.get(name).ok_or_else(|| format!("anchor {name} is not a corpus transaction"))?;
            self.store().add_anchor(raw, Anchor::Placed { placement }).map_err(err)?;
        }
        for name in v["preverifiedRoots"].as_array().ok_or("preverifiedRoots")? {
            let name = name.as_str().ok_or("root name")?;
            let raw = self.raws.get(name).ok_or_else(|| format!("root {name} is not a corpus transaction"))?;
            self.store().add_anchor(raw, Anchor::Preverified).map_err(err)?;
        }
        Ok(())
    }

    /// A Merkle placement from a BUMP: the header at `height` whose merkle root the path
    /// computes (on the named view's chain, when given).
    fn placement(&self, beef: &[u8], height: u64, view: Option<&str>) -> Result<Placement, String> {
        let (_, bump_height, root) = bump_root(beef)?;
        if bump_height != height {
            return Err(format!("BUMP height {bump_height} is not {height}"));
        }
        let v = &self.corpus.vectors;
        let tip = view.map(|id| v["views"][id]["tipHash"].as_str().unwrap_or("").to_string());
        for h in v["headers"].as_array().ok_or("headers")? {
            if h["height"].as_u64() != Some(height) {
                continue;
            }
            let raw = hex::decode(s(h, "raw")?).map_err(|e| e.to_string())?;
            let hdr = overlay_lookup_live::client::chain::parse_header(&raw).map_err(|e| e.to_string())?;
            let mut want = root;
            want.reverse();
            if hdr.merkle_root.0 != want {
                continue;
            }
            if let Some(t) = &tip {
                if s(h, "hash")? != t {
                    continue;
                }
            }
            return Ok(Placement { block: hdr.hash, height });
        }
        Err(format!("no header at height {height} has the BUMP's merkle root"))
    }

    fn txid(&self, name: &str) -> Result<Txid, String> {
        self.txids.get(name).copied().ok_or_else(|| format!("unknown transaction name {name}"))
    }

    fn name(&self, t: &Txid) -> String {
        self.names.get(t).cloned().unwrap_or_else(|| t.to_hex())
    }

    fn outpoint(&self, op: &str) -> Result<Outpoint, String> {
        let (n, i) = op.split_once(':').ok_or_else(|| format!("bad outpoint {op}"))?;
        Ok(Outpoint { txid: self.txid(n)?, vout: i.parse().map_err(|_| format!("bad outpoint {op}"))? })
    }

    fn show(&self, o: &Outpoint) -> String {
        format!("{}:{}", self.name(&o.txid), o.vout)
    }

    pub fn receive(&mut self, names: &[String], source: &str) -> Result<(), String> {
        let items = names
            .iter()
            .map(|n| self.raws.get(n).map(|raw| Received { raw: raw.clone(), evidence: vec![] }).ok_or_else(|| format!("unknown {n}")))
            .collect::<Result<Vec<_>, _>>()?;
        self.store().receive_transactions(source, &items).map_err(|e| e.to_string())?;
        for n in names {
            self.received.insert(self.txid(n)?);
        }
        // Inclusion proofs of these transactions, as a verifier holding them supplies
        // them: placements that count only in views whose chain has that block.
        for inc in self.corpus.vectors["inclusion"].as_object().into_iter() {
            let name = inc["name"].as_str().unwrap_or("");
            if names.iter().any(|n| n == name) {
                let p = self.placement(&b64(s(&Value::Object(inc.clone()), "beef")?)?, inc["height"].as_u64().ok_or("height")?, inc["view"].as_str())?;
                self.store().add_placement(&self.txid(name)?, p).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Answers the pending jobs of `names` (in this order) in `context` (default: current).
    pub fn verify(&mut self, names: &[String], context: Option<&str>) -> Result<(), String> {
        let ctx = match context {
            Some(c) => c.to_string(),
            None => self.current_context()?,
        };
        let mut results = Vec::new();
        for n in names {
            let t = self.txid(n)?;
            let jobs = self.store().pending_verifications(Some(&t)).map_err(|e| e.to_string())?;
            if jobs.is_empty() {
                return Err(format!("verify {n}: no pending verification"));
            }
            let valid = self.corpus.vectors["transactions"][n]["scriptValid"].as_bool().ok_or("scriptValid")?;
            for j in jobs {
                results.push(VerificationResult {
                    txid: j.txid,
                    variant: j.variant,
                    context_id: ctx.clone(),
                    status: if valid { VerificationStatus::Verified } else { VerificationStatus::Invalid },
                    raw: Some(self.raws[n].clone()),
                    placement: None,
                    reason: if valid { "verified".into() } else { "script evaluation failed".into() },
                    policy: None,
                });
            }
        }
        self.store().accept_verifications(&results).map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Answers the given jobs (a verifier finishing them), in the current context.
    pub fn answer(&self, jobs: &[overlay_lookup_live::client::reconcile::Job]) -> Result<(), String> {
        let ctx = self.current_context()?;
        let mut results = Vec::new();
        for j in jobs {
            let n = self.name(&j.txid);
            let valid = self.corpus.vectors["transactions"][&n]["scriptValid"].as_bool().ok_or("scriptValid")?;
            results.push(VerificationResult {
                txid: j.txid,
                variant: j.variant,
                context_id: ctx.clone(),
                status: if valid { VerificationStatus::Verified } else { VerificationStatus::Invalid },
                raw: Some(self.raws[&n].clone()),
                placement: None,
                reason: if valid { "verified".into() } else { "script evaluation failed".into() },
                policy: None,
            });
        }
        self.store().accept_verifications(&results).map_err(|e| e.to_string()).map(|_| ())
    }

    /// The reported `ReconciledState` (JSON).
    pub fn state(&self) -> Result<Value, String> {
        self.store().reconciled_state(&chain()).map_err(|e| e.to_string())?.ok_or_else(|| "not configured".into())
    }

    pub fn set_view(&mut self, id: &str) -> Result<(), String> {
        self.store().set_context(id).map_err(|e| e.to_string()).map(|_| ())
    }

    fn current_context(&self) -> Result<String, String> {
        Ok(self.store().reconciler_meta().map_err(|e| e.to_string())?.ok_or("not configured")?.current().id.clone())
    }

    fn scope(source: &str, generation: u64) -> Value {
        fixture::scope(&format!("host-{source}"), "ls_trace", "trace-query", "public", &format!("epoch-{generation}"))
    }

    fn key(source: &str) -> SourceKey {
        fixture::source_key(&Self::scope(source, 0))
    }

    fn commit(&self, source: &str, generation: u64, expected: Option<String>, body: Vec<u8>, verified: bool) -> Result<overlay_lookup_live::client::CommitOutcome, String> {
        let membership = if verified { overlay_lookup_live::client::Membership::Claims } else { overlay_lookup_live::client::Membership::Manual };
        let opts = CommitOptions { membership, ..CommitOptions::default() };
        self.store().commit_batch(&Self::key(source), generation, expected.as_deref(), &body, &opts).map_err(|e| e.to_string())
    }

    /// A `membership` step: one group as a real batch body (a live group of a new
    /// generation is preceded by the empty completed snapshot an open would deliver).
    pub fn membership(&mut self, step: &Value) -> Result<(), String> {
        let source = s(step, "source")?.to_string();
        let generation = step["generation"].as_u64().ok_or("generation")?;
        let sequence = step["sequence"].as_u64().ok_or("sequence")?;
        let id = s(step, "id")?.to_string();
        let verified = step["verified"].as_bool().unwrap_or(true);
        let complete = step["complete"].as_bool().unwrap_or(false);
        let phase = step["phase"].as_str().unwrap_or(if complete { "snapshot" } else { "live" }).to_string();
        let scope = Self::scope(&source, generation);
        let session = format!("session-{source}-{generation}");
        let gk = (source.clone(), generation);
        if !self.gens.contains_key(&gk) {
            let g = self.store().begin_generation(&Self::key(&source), None).map_err(|e| e.to_string())?;
            if g != generation {
                return Err(format!("store generation {g} for trace generation {generation}"));
            }
            self.gens.insert(gk.clone(), GenState::default());
            if phase == "live" {
                let body = fixture::batch(&session, &scope, "snapshot", vec![], "open", true, 0, 0);
                self.commit(&source, generation, None, body, true)?;
                self.gens.get_mut(&gk).unwrap().cursor = Some("open".into());
            }
        }
        if let Some((expected, body)) = self.gens[&gk].sent.get(&id).cloned() {
            // Replay of a committed group: the same read returns the same bytes.
            let out = self.commit(&source, generation, expected, body, verified)?;
            if out.applied != 0 || out.accepted != 0 {
                return Err(format!("replay of {id} changed the store"));
            }
            return Ok(());
        }
        let mut observations = Vec::new();
        for (i, c) in step["changes"].as_array().ok_or("changes")?.iter().enumerate() {
            let op = self.outpoint(s(c, "outpoint")?)?;
            let oid = format!("{id}#{i}");
            observations.push(if c["present"].as_bool().ok_or("present")? {
                // The trace names the output; its evidence is a bundle of the named
                // corpus transaction (its ancestry stays unresolved, as in the traces).
                let name = self.name(&op.txid);
                let raw = self.raws.get(&name).ok_or_else(|| format!("{name} is not a corpus transaction"))?;
                fixture::output_with(&oid, &scope, &op.txid.to_hex(), op.vout, Some("{\"n\":1}"), &fixture::beef_v1(&[raw]))
            } else {
                fixture::withdraw(&oid, &scope, &op.txid.to_hex(), op.vout)
            });
        }
        let cursor = format!("after-{id}");
        let body = fixture::batch(&session, &scope, &phase, vec![fixture::group(&id, sequence, observations)], &cursor, complete || phase == "live", sequence, sequence);
        let expected = self.gens[&gk].cursor.clone();
        let out = self.commit(&source, generation, expected.clone(), body.clone(), verified)?;
        let st = self.gens.get_mut(&gk).unwrap();
        st.sent.insert(id, (expected, body));
        if !out.ignored {
            st.cursor = Some(cursor);
        }
        Ok(())
    }

    pub fn membership_verified(&mut self, step: &Value) -> Result<(), String> {
        let source = s(step, "source")?;
        let generation = step["generation"].as_u64().ok_or("generation")?;
        self.store().mark_verified(&Self::key(source), generation, s(step, "id")?).map_err(|e| e.to_string()).map(|_| ())
    }

    /// The observed value of one `expect` field.
    pub fn observe(&self, field: &str, want: &Value, watch: &[Outpoint]) -> Result<Value, String> {
        let st = self.store();
        let e = |x: overlay_lookup_live::client::ClientError| x.to_string();
        let view = st.reconciled_view().map_err(e)?.ok_or("not configured")?;
        Ok(match field {
            "states" => {
                let state = st.reconciled_state(&chain()).map_err(e)?.ok_or("not configured")?;
                let pending: std::collections::BTreeSet<&Txid> = view.pending.iter().collect();
                let mut out: Vec<String> = state["transactions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|t| self.received.iter().any(|r| r.to_hex() == t["txid"].as_str().unwrap_or("")))
                    .map(|t| {
                        let txid = Hash32::from_hex(t["txid"].as_str().unwrap()).unwrap();
                        let status = if pending.contains(&txid) { "pending" } else { t["status"].as_str().unwrap() };
                        format!("{}:{status}", self.name(&txid))
                    })
                    .collect();
                out.sort();
                json!(out)
            }
            "current" | "spent" => {
                let states = st.output_states(watch).map_err(e)?;
                let mut out: Vec<String> = states
                    .iter()
                    .filter_map(|o| match (field, o.state, o.spent_by) {
                        ("current", overlay_lookup_live::client::current::OutputState::Current, _) => Some(self.show(&o.outpoint)),
                        ("spent", overlay_lookup_live::client::current::OutputState::Spent, Some(by)) => Some(format!("{}->{}", self.show(&o.outpoint), self.name(&by))),
                        _ => None,
                    })
                    .collect();
                out.sort();
                json!(out)
            }
            "stale" => {
                let mut out: Vec<String> = view.stale.iter().map(|(t, s)| format!("{}:{}", self.name(t), s.as_str())).collect();
                out.sort();
                json!(out)
            }
            "view" => json!(view.context),
            // No code path of the store can sign, broadcast or act on a wallet: it has
            // no action port. The count of actions it requested is therefore zero.
            "walletActions" => json!(0),
            "orders" => {
                let mut out = serde_json::Map::new();
                for name in want.as_object().ok_or("orders is not an object")?.keys() {
                    let rec = st.transaction(&self.txid(name)?).map_err(e)?;
                    let order = rec.as_ref().and_then(|r| r.published.as_ref()).and_then(|p| p.order.as_ref());
                    out.insert(
                        name.clone(),
                        match (rec.as_ref(), order) {
                            (Some(r), Some(o)) => json!({"readyAt": o.ready_at, "depth": o.depth, "firstRaw": r.first_raw.position, "context": o.ready_context}),
                            _ => Value::Null,
                        },
                    );
                }
                Value::Object(out)
            }
            "memberships" => {
                let mut out: Vec<String> = Vec::new();
                for m in st.memberships_json(&chain()).map_err(e)? {
                    let provider = m["scope"]["provider"].as_str().unwrap_or("");
                    let txid = Hash32::from_hex(m["outpoint"]["txid"].as_str().unwrap_or("")).map_err(|x| x.to_string())?;
                    out.push(format!(
                        "{}/{}/{}:{}/{}/{}",
                        provider.strip_prefix("host-").unwrap_or(provider),
                        m["generation"].as_str().unwrap_or(""),
                        self.name(&txid),
                        m["outpoint"]["outputIndex"],
                        if m["present"].as_bool() == Some(true) { "present" } else { "absent" },
                        m["sequence"].as_str().unwrap_or("")
                    ));
                }
                out.sort();
                json!(out)
            }
            other => return Err(format!("unknown expect field {other}")),
        })
    }
}

fn normalized(field: &str, v: &Value) -> Value {
    match (field, v) {
        ("states" | "current" | "spent" | "stale" | "memberships", Value::Array(a)) => {
            let mut a: Vec<String> = a.iter().map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string())).collect();
            a.sort();
            json!(a)
        }
        _ => v.clone(),
    }
}

/// Runs one trace in a fresh store under `dir`; `Err` is the first difference.
pub fn run_trace(corpus: &Corpus, trace: &Value, dir: &Path) -> Result<(), String> {
    let name = s(trace, "name")?;
    let non_final = trace["nonFinal"].as_bool().unwrap_or(true);
    let mut r = Runner::new(corpus, dir, non_final, &format!("trace:{name}"))?;
    let watch: Vec<Outpoint> =
        trace["watch"].as_array().ok_or("watch")?.iter().map(|w| r.outpoint(w.as_str().unwrap_or(""))).collect::<Result<_, _>>()?;
    let names = |step: &Value| -> Result<Vec<String>, String> {
        step["names"].as_array().ok_or("names")?.iter().map(|n| n.as_str().map(str::to_string).ok_or_else(|| "name".to_string())).collect()
    };
    let mut expects = 0;
    for (i, step) in trace["steps"].as_array().ok_or("steps")?.iter().enumerate() {
        let at = |m: String| format!("step {i} ({}): {m}", step["op"].as_str().unwrap_or("?"));
        match s(step, "op")? {
            "receive" => r.receive(&names(step)?, s(step, "source")?).map_err(at)?,
            "verify" => r.verify(&names(step)?, step["context"].as_str()).map_err(at)?,
            "view" => r.set_view(s(step, "id")?).map_err(at)?,
            "restart" => r.restart().map_err(at)?,
            "membership" => r.membership(step).map_err(at)?,
            "membershipVerified" => r.membership_verified(step).map_err(at)?,
            "expect" => {
                for (field, want) in step["value"].as_object().ok_or("expect value")? {
                    let got = r.observe(field, want, &watch).map_err(at)?;
                    let (w, g) = (normalized(field, want), normalized(field, &got));
                    if w != g {
                        return Err(at(format!("{field}: expected {w}, got {g}")));
                    }
                }
                expects += 1;
            }
            other => return Err(at(format!("unknown op {other}"))),
        }
    }
    r.close()?;
    if expects == 0 {
        return Err("the trace checked nothing".into());
    }
    Ok(())
}

/// Runs every trace; returns `(name, result)` in corpus order.
pub fn run_all(corpus: &Corpus, dir: &Path) -> Vec<(String, Result<(), String>)> {
    corpus
        .traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let name = t["name"].as_str().unwrap_or("?").to_string();
            let d = dir.join(format!("t{i}"));
            let res = std::fs::create_dir_all(&d).map_err(|e| e.to_string()).and_then(|_| run_trace(corpus, t, &d));
            (name, res)
        })
        .collect()
}
