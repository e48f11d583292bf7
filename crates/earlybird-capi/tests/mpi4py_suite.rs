//! mpi4py's own tests of point-to-point (partitioned communication included), collectives
//! and datatypes (mpi4py 4.1.2's test suite, from its PyPI source) at 2 ranks under ebrun,
//! through PyPI's prebuilt mpi4py wheel, which was built against MPICH elsewhere and loads this build's `libmpi.so.12` by
//! `MPI4PY_LIBMPI` (`suites/mpi4py-wheel.sh`). Every test of those modules must pass but the
//! ones left out below, each for a feature earlybird lacks:
//!
//! - `testContiguousBigMPI`: datatypes of more than 2^31 - 1 bytes (the large-count datatype
//!   constructors and queries are narrowed to `int`);
//! - `F90` and `testCodeCharStr`: `MPI_Type_create_f90_integer`, `_real` and `_complex`.
//!
//! The whole suite at 1, 2 and 3 ranks, built from source with earlybird's `mpicc`, is
//! `suites/mpi4py.sh`'s to run (see the README). It needs the network once, for the wheel and
//! the source (as CI has), and python3 with venv.

mod support;

use std::process::Command;
use support::{install, repo};

#[test]
fn mpi4py_point_to_point_collective_and_datatype_tests_pass_at_two_ranks() {
    let root = repo();
    let prefix = install(&root.join("target/suites/capi-test"));
    let run = Command::new("bash")
        .arg(root.join("suites/mpi4py-wheel.sh"))
        .args(["2", "--"])
        .args([
            "-i",
            "test_p2p_buf",
            "-i",
            "test_p2p_obj",
            "-i",
            "test_cco_buf",
        ])
        .args([
            "-i",
            "test_cco_obj",
            "-i",
            "test_datatype",
            "-i",
            "test_p2p_buf_part",
        ])
        .args([
            "-x",
            "testContiguousBigMPI",
            "-x",
            "F90",
            "-x",
            "testCodeCharStr",
        ])
        .env("EARLYBIRD_PREFIX", &prefix)
        .env("TIMEOUT", "300")
        .output()
        .expect("suites/mpi4py-wheel.sh runs");
    let log = std::fs::read_to_string(root.join("target/suites/results/wheel/mpi4py-np2.txt"))
        .unwrap_or_default();
    // Each rank's "Ran N tests"; the two ranks' lines may interleave on one line.
    let ran: Vec<usize> = log
        .split("Ran ")
        .skip(1)
        .filter_map(|t| t.split(" tests").next()?.parse().ok())
        .collect();
    assert!(
        run.status.success()
            && ran.len() == 2
            && ran.iter().all(|&n| n > 300)
            && !log.contains("FAILED"),
        "mpi4py's tests at 2 ranks: {}\n{}\n(log: target/suites/results/wheel/mpi4py-np2.txt)\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
        log.lines()
            .filter(|l| l.starts_with("ERROR:") || l.starts_with("FAIL:"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
