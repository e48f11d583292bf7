//! Seed 003's hybrid example: every process starts a pool of threads, each thread gets an
//! endpoint (a rank of its own in one communicator), works on its part of the problem and
//! joins an allreduce, as MPI processes would.
//!
//! ```text
//! ebrun -n 2 target/release/examples/hybrid_endpoints 2    (2 processes x 2 endpoints)
//! target/release/examples/hybrid_endpoints 4               (1 process x 4 endpoints)
//! ```
//!
//! The problem: the sum of k^2 for k in 0..N (N = 1,000,000), split into equal slices by
//! endpoint rank; each endpoint sums its slice, the allreduce adds the slices, and every
//! endpoint checks the total against n(n-1)(2n-1)/6. The main thread drives endpoint 0 of
//! its process (so it can also check the seed's rule that this endpoint is its parent rank).

use earlybird::{Comm, Info, Op, Result};
use std::process::ExitCode;

const N: u64 = 1_000_000;

/// One endpoint's work: its slice, the allreduce, the check. Returns the total.
fn work(ep: &Comm) -> Result<u64> {
    let (n, r) = (ep.size() as u64, ep.rank() as u64);
    let (lo, hi) = (N * r / n, N * (r + 1) / n);
    let mine: u64 = (lo..hi).map(|k| k * k).sum();
    let mut total = [0u64];
    ep.allreduce(&[mine][..], &mut total[..], &Op::SUM)?;
    let want = (N - 1) * N * (2 * N - 1) / 6;
    assert_eq!(total[0], want, "endpoint {r}: wrong total");
    Ok(total[0])
}

fn main() -> ExitCode {
    let threads: i32 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 2,
        Some(Ok(t)) if (1..=64).contains(&t) => t,
        _ => {
            eprintln!("usage: hybrid_endpoints [THREADS (1..64)]");
            return ExitCode::from(2);
        }
    };
    match run(threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hybrid_endpoints: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(threads: i32) -> Result<()> {
    let universe = earlybird::init()?;
    let world = universe.world();
    let eps = world.create_endpoints(threads, &Info::new())?;
    let total = std::thread::scope(|s| -> Result<u64> {
        let mut eps = eps.into_iter();
        let first = eps.next().expect("at least one endpoint");
        let pool: Vec<_> = eps
            .map(|ep| {
                s.spawn(move || -> Result<u64> {
                    let c = ep.attach()?;
                    let t = work(&c)?;
                    c.free()?;
                    Ok(t)
                })
            })
            .collect();
        let c = first.attach()?;
        let t = work(&c)?;
        // Endpoint 0 is this process's world rank (the seed's group rule).
        let r = c.group().translate_ranks(&[c.rank()], &world.group())?;
        assert_eq!(r, vec![world.rank()]);
        let size = c.size();
        c.free()?;
        for h in pool {
            assert_eq!(h.join().expect("pool thread")?, t);
        }
        if world.rank() == 0 {
            println!(
                "hybrid_endpoints: OK: {} processes x {threads} endpoints = {size} ranks, sum of k^2 below {N} = {t}",
                world.size()
            );
        }
        Ok(t)
    })?;
    let _ = total;
    universe.finalize()
}
