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
//! window), the same code for both modes. `ep_msgrate_shared_rank` (two threads sharing one rank under
//! MPI_THREAD_MULTIPLE) is not measured: earlybird does not provide that level yet.

use super::{Bench, Opts};
use earlybird::{Comm, Info, Result};

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
