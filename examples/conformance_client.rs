//! Client conformance runner (`npm run conformance:client`): replays every trace of
//! the vendored BRC-192 §10 reconciliation corpus through the durable store and
//! prints `ok <name>` or `FAIL <name>: <first difference>` per trace, then
//! `N passed, M failed`. Exits non-zero on any failure.
//!
//! Optional argument: a directory holding `reconciliation-vectors.json` and
//! `reconciliation-traces.json` (default: tests/fixtures/spec of this crate). Without
//! it, this project's own traces (tests/fixtures/traces) follow the public ones, named
//! `project/<name>`.

#[path = "../tests/client_common/mod.rs"]
mod client_common;
use client_common::conformance;

fn main() {
    let dir = std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(conformance::vendored);
    let corpus = match conformance::load(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cannot load the corpus: {e}");
            std::process::exit(2);
        }
    };
    let tmp = tempfile::tempdir().expect("temporary directory");
    let mut results = conformance::run_all(&corpus, tmp.path());
    if std::env::args().nth(1).is_none() {
        match conformance::load_traces(&dir, &conformance::project_traces()) {
            Ok(own) => {
                let more = conformance::run_all(&own, &tmp.path().join("project"));
                results.extend(more.into_iter().map(|(n, r)| (format!("project/{n}"), r)));
            }
            Err(e) => results.push(("project traces".into(), Err(e))),
        }
    }
    let mut failed = 0;
    for (name, r) in &results {
        match r {
            Ok(()) => println!("ok {name}"),
            Err(e) => {
                failed += 1;
                println!("FAIL {name}: {e}");
            }
        }
    }
    println!("{} passed, {} failed", results.len() - failed, failed);
    if failed > 0 || results.is_empty() {
        std::process::exit(1);
    }
}
