//! `endpoints` (seed 003): the same 8-byte ping-pong and message rate between two
//! endpoints of one process, each driven by its own thread on its own core, and between two
//! processes, so a pair of lines reads as a ratio.
//!
//! - Started alone (`earlybird-bench endpoints`, one process): the world makes two endpoints;
//!   the main thread drives endpoint 0 on CPU 0, a second thread endpoint 1 on CPU 1. Lines
//!   `ep_pingpong_endpoints` (`median_us`, half round trip) and `ep_msgrate_endpoints`
//!   (`mmsg_per_s`), mode `endpoints`.
//! - Under `ebrun -n 2`: the two processes run the same loops on the world. Lines
//!   `ep_pingpong_processes` and `ep_msgrate_processes`, mode `processes`.
//!
//! The ping-pong is `latency`'s loop and the message rate `msgrate`'s (a window of 64
//! nonblocking 8-byte sends, the receiver's 64 receives posted first, one 4-byte ack per
//! window), the same code for both modes.
//! - Started alone, after the endpoint lines: the process's one rank is shared by two
//!   threads under MPI_THREAD_MULTIPLE ([`Universe::share`]), each pinned to its own CPU,
//!   talking through a dup of MPI_COMM_SELF, the tag saying which way a message goes (as
//!   `bench/threads_shared_rank.c` does on MPICH and Open MPI). Lines
//!   `ep_pingpong_shared_rank` and `ep_msgrate_shared_rank`, mode `shared_rank`. A shared
//!   rank has blocking calls only, so each window is 64 blocking 8-byte sends (eager: each
//!   returns at its first test) against 64 blocking receives, where the other lines post
//!   nonblocking ones.

use super::{emit_line, stats, Bench, Opts, WINDOW};
use earlybird::{Comm, Info, Result, SharedComm, Universe};
use std::sync::Barrier;
use std::time::Instant;

/// Run both points on `b`'s communicator (two ranks), naming the lines `ep_*_{suffix}`.
fn points(b: &Bench<'_>, suffix: &str) -> Result<()> {
    b.latency_named(&format!("ep_pingpong_{suffix}"), false, &[8])?;
    b.windowed(&format!("ep_msgrate_{suffix}"), &[8], 20_000, u64::MAX, 10)
}

/// Run one endpoint's side, on CPU `cpu`.
fn endpoint_side(ep: earlybird::Endpoint, o: &Opts, cpu: usize) -> Result<()> {
    earlybird::launch::pin_to_cpu(cpu % earlybird::launch::cpus());
    let c = ep.attach()?;
    let b = Bench {
        w: c.comm(),
        o,
        mode: "endpoints",
    };
    points(&b, "endpoints")?;
    c.free()
}

impl Bench<'_> {
    /// See the module doc. `world` is MPI_COMM_WORLD of one process (endpoints) or of two
    /// (processes).
    pub(super) fn endpoints(&self, world: &Comm) -> Result<()> {
        match (world.size(), self.mode) {
            (1, _) => {
                let eps = world.create_endpoints(2, &Info::new())?;
                let mut it = eps.into_iter();
                let (e0, e1) = (it.next().expect("two"), it.next().expect("two"));
                let o = self.o;
                std::thread::scope(|s| -> Result<()> {
                    let h = s.spawn(move || endpoint_side(e1, o, 1));
                    let r = endpoint_side(e0, o, 0);
                    h.join().expect("endpoint thread")?;
                    r
                })
            }
            (2, "processes") => {
                earlybird::launch::pin_to_cpu(world.rank() as usize % earlybird::launch::cpus());
                points(self, "processes")
            }
            (n, mode) => {
                eprintln!("earlybird-bench endpoints: run it alone (two endpoints of one process) or under ebrun -n 2 (two processes), not as {n} ranks of {mode}");
                std::process::exit(2);
            }
        }
    }
}

/// One thread's side of the shared-rank lines: `me` 0 sends first and times; returns its
/// per-repeat figures (half round trip, then per window), in microseconds.
fn shared_side(
    c: &SharedComm,
    me: usize,
    bar: &Barrier,
    (reps, pp_iters, mr_iters): (usize, u64, u64),
) -> Result<(Vec<f64>, Vec<f64>)> {
    earlybird::launch::pin_to_cpu(me % earlybird::launch::cpus());
    let (s, mut r, mut ack) = ([1u8; 8], [0u8; 8], [0u8; 4]);
    let mut pp = vec![];
    for rep in 0..=reps {
        bar.wait();
        let t0 = Instant::now();
        for _ in 0..pp_iters {
            if me == 0 {
                c.send(&s, 0, 1)?;
                c.recv(&mut r, 0, 2)?;
            } else {
                c.recv(&mut r, 0, 1)?;
                c.send(&s, 0, 2)?;
            }
        }
        if rep > 0 {
            pp.push(t0.elapsed().as_secs_f64() / (2 * pp_iters) as f64 * 1e6);
        }
    }
    let mut mr = vec![];
    for rep in 0..=reps {
        bar.wait();
        let t0 = Instant::now();
        for _ in 0..mr_iters {
            if me == 0 {
                for _ in 0..WINDOW {
                    c.send(&s, 0, 100)?;
                }
                c.recv(&mut ack, 0, 101)?;
            } else {
                for _ in 0..WINDOW {
                    c.recv(&mut r, 0, 100)?;
                }
                c.send(&ack, 0, 101)?;
            }
        }
        if rep > 0 {
            mr.push(t0.elapsed().as_secs_f64() / mr_iters as f64 * 1e6);
        }
    }
    Ok((pp, mr))
}

/// The shared-rank lines (module doc), then finalize. A side that fails ends the process:
/// its partner would otherwise wait for it forever.
pub(super) fn shared_rank(o: &Opts, u: Universe) -> Result<()> {
    let sh = u.share()?;
    let c = sh.comm_self().dup()?;
    let shape = (
        o.reps.unwrap_or(11),
        o.iters.unwrap_or(10_000),
        o.iters.unwrap_or(2_000),
    );
    let bar = Barrier::new(2);
    let side = |me: usize| {
        shared_side(&c, me, &bar, shape).unwrap_or_else(|e| {
            eprintln!("earlybird-bench endpoints (shared rank, thread {me}): {e}");
            std::process::exit(1)
        })
    };
    let (pp, mr) = std::thread::scope(|s| {
        let h = s.spawn(|| side(1));
        let mine = side(0);
        h.join().expect("shared-rank thread");
        mine
    });
    emit_line(
        "shared_rank",
        1,
        "ep_pingpong_shared_rank",
        8,
        shape.1,
        stats(pp),
        "",
    );
    let per_window = stats(mr);
    let rate = format!(",\"mmsg_per_s\":{:.3}", WINDOW as f64 / per_window.median);
    emit_line(
        "shared_rank",
        1,
        "ep_msgrate_shared_rank",
        8,
        shape.2,
        per_window,
        &rate,
    );
    c.free()?;
    sh.finalize()
}
