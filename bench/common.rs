//! Helpers shared by the native benchmarks (included with `#[path]`, not a bench itself).
#![allow(dead_code)] // each bench uses some of these helpers

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

/// Process CPU time (user + system) in seconds, from /proc (Linux); 0 elsewhere. The machine
/// these numbers come from is shared, so CPU per group is reported next to wall-clock rates.
pub fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0.0 };
    let Some(after) = stat.rsplit_once(')').map(|(_, a)| a) else { return 0.0 };
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0 // utime, stime (fields 14, 15); USER_HZ = 100 on Linux
}

/// On-CPU seconds of this process's live threads (Linux schedstat, nanosecond resolution; 0
/// elsewhere), of every thread or only of those named `name`. Threads that exit in between
/// are not counted.
pub fn threads_cpu_seconds(name: Option<&str>) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let p = t.path();
        if let Some(name) = name {
            if !std::fs::read_to_string(p.join("comm")).map(|c| c.trim() == name).unwrap_or(false) {
                continue;
            }
        }
        ns += std::fs::read_to_string(p.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or(0);
    }
    ns as f64 / 1e9
}
