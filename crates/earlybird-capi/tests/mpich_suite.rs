//! MPICH's own point-to-point tests (test/mpi/pt2pt of MPICH 4.0.2, Debian's source package)
//! on this build of earlybird, by MPICH's runner with ebrun as mpiexec, through
//! `suites/mpich-testsuite.sh`. Every test `suites/expected/pt2pt.txt` lists (those that pass
//! on earlybird; the note of the C ABI issue triages the others) must pass. The other
//! directories, and the same on Debian's MPICH, are the script's to run (see the README).
//!
//! It needs the network once, to fetch the source package (as CI does), and a C toolchain.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn mpich_point_to_point_tests_pass() {
    let root = repo();
    // earlybird as this build made it, in a prefix of its own (kept between runs so that the
    // suite is configured once).
    let prefix = root.join("target/suites/capi-test");
    let out = Command::new(env!("CARGO_BIN_EXE_earlybird-install"))
        .arg(&prefix)
        .output()
        .expect("earlybird-install runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new("bash")
        .arg(root.join("suites/mpich-testsuite.sh"))
        .arg("pt2pt")
        .env("EARLYBIRD_PREFIX", &prefix)
        .output()
        .expect("suites/mpich-testsuite.sh runs");
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success() && said.contains("pt2pt:"),
        "the suite did not run:\n{said}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let tap = std::fs::read_to_string(root.join("target/suites/results/capi-test/pt2pt.tap"))
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
    let expected =
        std::fs::read_to_string(root.join("suites/expected/pt2pt.txt")).expect("expected list");
    let missing: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| !passed.iter().any(|p| p == l))
        .collect();
    assert!(
        missing.is_empty(),
        "MPICH pt2pt tests that passed before and fail now: {missing:?}\n(log: target/suites/results/capi-test/pt2pt.txt)"
    );
}
