//! MPICH's own point-to-point, partitioned and collective tests (test/mpi/pt2pt, test/mpi/part
//! and test/mpi/coll of MPICH 4.0.2, Debian's source package) on this build of earlybird, by
//! MPICH's runner with ebrun as mpiexec, through `suites/mpich-testsuite.sh`. Every test
//! `suites/expected/DIR.txt` lists (those that pass on earlybird; the notes of the C ABI issue
//! triage the others) must pass. The other directories, and the same on Debian's MPICH, are
//! the script's to run (see the README).
//!
//! It needs the network once, to fetch the source package (as CI does), and a C toolchain.

mod support;

use std::process::Command;
use support::{install, repo};

#[test]
fn mpich_point_to_point_tests_pass() {
    run_dir("pt2pt");
}

#[test]
fn mpich_collective_tests_pass() {
    run_dir("coll");
}

#[test]
fn mpich_partitioned_communication_tests_pass() {
    run_dir("part");
}

/// The suite's directories share one configured build: one runs at a time.
static SUITE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Run MPICH's directory `dir` on this build; every run its expected list names must pass.
fn run_dir(dir: &str) {
    let _one = SUITE.lock().unwrap_or_else(|e| e.into_inner());
    let root = repo();
    // earlybird as this build made it, in a prefix of its own (kept between runs so that the
    // suite is configured once).
    let prefix = install(&root.join("target/suites/capi-test"));
    let run = Command::new("bash")
        .arg(root.join("suites/mpich-testsuite.sh"))
        .arg(dir)
        .env("EARLYBIRD_PREFIX", &prefix)
        .output()
        .expect("suites/mpich-testsuite.sh runs");
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && said.contains(&format!("{dir}:")),
        "the suite did not run:\n{said}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let tap =
        std::fs::read_to_string(root.join(format!("target/suites/results/capi-test/{dir}.tap")))
            .expect("the TAP results");
    // "ok  - ./sendrecv1 2 # time=..." -> "sendrecv1 2"
    let key = |l: &str| -> Option<String> {
        let rest = l.split("./").nth(1)?;
        Some(rest.split(" #").next()?.trim().to_string())
    };
    let passed: Vec<String> = tap
        .lines()
        .filter(|l| l.starts_with("ok "))
        .filter_map(key)
        .collect();
    let expected = std::fs::read_to_string(root.join(format!("suites/expected/{dir}.txt")))
        .expect("expected list");
    let missing: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| !passed.iter().any(|p| p == l))
        .collect();
    assert!(
        missing.is_empty(),
        "MPICH {dir} tests that passed before and fail now: {missing:?}\n(log: target/suites/results/capi-test/{dir}.txt)"
    );
}
