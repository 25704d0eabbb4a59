//! Helpers shared by the native benchmarks (included with `#[path]`, not a bench itself).

/// `OLL_BENCH_QUICK`: tiny sizes that check the harness; the numbers mean nothing.
pub fn quick() -> bool {
    std::env::var("OLL_BENCH_QUICK").is_ok()
}

/// A temporary directory, under `OLL_BENCH_DIR` when set (stores can be large).
pub fn tempdir() -> tempfile::TempDir {
    match std::env::var("OLL_BENCH_DIR") {
        Ok(d) => tempfile::tempdir_in(d).unwrap(),
        Err(_) => tempfile::tempdir().unwrap(),
    }
}
