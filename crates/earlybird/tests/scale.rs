//! Large jobs on one host: a job's shared memory grows with the pairs of ranks that talk,
//! not with N^2 (doorbells and rings backed on first use, `fabric/job.rs`), and making a
//! communicator talks to about log2(N) other ranks (`comm/agree.rs`).
//!
//! The default run checks 64 ranks (above the size at which doorbells start) as threads and
//! as processes, the latter with the segment's backed bytes measured. The 256- and 1,024-rank
//! jobs are `#[ignore]`d (about a minute on 2 cores); run them with
//! `cargo test --release -p earlybird --test scale -- --ignored`.

mod common;

#[path = "../examples/heat2d.rs"]
#[allow(dead_code)]
mod heat2d;

use common::*;
use earlybird::{Op, Result, Universe};

scenarios! {
    talk_to_few [2, 3];
    child_only barrier_only;
}

/// A token around the ring, a barrier, an allreduce, a split and the 2-D heat stencil on a
/// Cartesian communicator (a few neighbours each); then, in a process job, rank 0 prints how
/// many bytes of the job's segment are backed by memory, and how long the file is.
fn talk_to_few(u: &Universe) -> Result<()> {
    let w = u.world();
    let (me, n) = (w.rank(), w.size());
    let mut token = [0u64];
    if me == 0 {
        w.send(&[1u64], 1 % n, 0)?;
        w.recv(&mut token, n - 1, 0)?;
        assert_eq!(token[0], n as u64, "the token visits every rank once");
    } else {
        w.recv(&mut token, me - 1, 0)?;
        w.send(&[token[0] + 1], (me + 1) % n, 0)?;
    }
    w.barrier()?;
    let mut sum = [0u64];
    w.allreduce(&[me as u64], &mut sum, &Op::SUM)?;
    assert_eq!(sum[0], (n as u64) * (n as u64 - 1) / 2);
    let half = w
        .split((me % 2) as i32, me as i32)?
        .expect("every rank has a colour");
    assert_eq!(half.size(), n / 2 + (n % 2) * (1 - me % 2));
    if let Some(o) = heat2d::run(w, 8, 5)? {
        assert_eq!(o.mismatches, 0, "{}", o.line());
    }
    w.barrier()?;
    if me == 0 {
        if let Some((backed, len)) = segment_backing() {
            println!("eb-segment {backed} {len}");
        }
    }
    Ok(())
}

/// Nothing but a barrier (the 1,024-rank job).
fn barrier_only(u: &Universe) -> Result<()> {
    u.world().barrier()
}

/// The bytes of this process job's segment backed by memory, and its length, read from the
/// descriptor that ebrun holds for the job; `None` in a thread job.
fn segment_backing() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let launcher = std::env::var("EARLYBIRD_LAUNCHER_PID").ok()?;
    let fd = std::env::var("EARLYBIRD_SEGMENT_FD").ok()?;
    let m = std::fs::metadata(format!("/proc/{launcher}/fd/{fd}")).ok()?;
    Some((m.blocks() * 512, m.len()))
}

/// Run `talk_to_few` on `n` ranks under ebrun; the segment's backed bytes and length.
fn job_backing(n: u32) -> (u64, u64) {
    let out = ebrun_scenario_within("talk_to_few", n, &[], 240);
    assert_job_ran("talk_to_few", n, &out);
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("eb-segment "))
        .unwrap_or_else(|| panic!("rank 0 measures the segment\n{}", out.dump()));
    let mut f = line.split(' ').map(|x| x.parse::<u64>().expect("a number"));
    (f.next().unwrap(), f.next().unwrap())
}

#[test]
fn sixty_four_ranks_as_threads() {
    run_threads(64, common::Scn::Borrowed(talk_to_few));
}

/// 64 ranks would reserve 64 x 63 rings (about 380 MiB); ranks that talk to a dozen others
/// (ring, barrier and allreduce partners, communicator creation, stencil neighbours, the
/// gather's root) back a dozen rings each, under a quarter of it.
#[test]
fn sixty_four_ranks_back_only_the_rings_they_use() {
    let (backed, len) = job_backing(64);
    assert!(
        len > 300 << 20,
        "the segment spans every ring ({len} bytes)"
    );
    assert!(
        backed < len / 4,
        "{} MiB of the segment's {} MiB are backed",
        backed >> 20,
        len >> 20
    );
}

/// Issue "Ahead on every core figure", item 5: 256 ranks run within 1 GiB of shared memory.
#[test]
#[ignore = "256 processes, about 20 s in release; run with --ignored"]
fn two_hundred_fifty_six_ranks_within_a_gibibyte() {
    let (backed, len) = job_backing(256);
    assert!(
        backed < 1 << 30,
        "{} MiB of the segment's {} MiB are backed",
        backed >> 20,
        len >> 20
    );
}

/// 1,024 ranks start and pass a barrier.
#[test]
#[ignore = "1,024 processes, about a minute; run with --ignored"]
fn a_thousand_and_twenty_four_ranks_pass_a_barrier() {
    let out = ebrun_scenario_within("barrier_only", 1024, &[], 600);
    assert_job_ran("barrier_only", 1024, &out);
}
