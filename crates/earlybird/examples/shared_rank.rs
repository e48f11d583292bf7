//! MPI_THREAD_MULTIPLE: four threads share each process's one rank. Each thread has its own
//! communicator (a dup of the world, for its collectives), sends its number to the next rank
//! and receives from the previous one, on a tag that says which thread it is, then joins an
//! allreduce of what it received on its communicator.
//!
//! ```text
//! ebrun -n 2 target/release/examples/shared_rank
//! ```
//!
//! Every thread checks its message and its sum (the threads' numbers over all ranks);
//! rank 0 prints one line when all are right.

use earlybird::{Op, Result, ThreadLevel};
use std::process::ExitCode;

const THREADS: usize = 4;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shared_rank: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let shared = earlybird::init_thread(ThreadLevel::Multiple)?.share()?;
    assert_eq!(shared.query_thread(), ThreadLevel::Multiple);
    // dup is collective: the main thread makes every thread's communicator, in one order.
    let comms = (0..THREADS)
        .map(|_| shared.world().dup())
        .collect::<Result<Vec<_>>>()?;
    let (me, n) = (shared.world().rank(), shared.world().size());
    std::thread::scope(|s| -> Result<()> {
        let threads: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(t, c)| {
                s.spawn(move || -> Result<()> {
                    let value = (me as u64) * 100 + t as u64;
                    c.send(&[value], (me + 1) % n, t as i32)?; // any thread, any time
                    let mut got = [0u64];
                    let from = (me + n - 1) % n;
                    c.recv(&mut got, from, t as i32)?;
                    assert_eq!(
                        got[0],
                        from as u64 * 100 + t as u64,
                        "thread {t}: wrong message"
                    );
                    let mut sum = [0u64];
                    c.allreduce(&got[..], &mut sum[..], &Op::SUM)?;
                    let want: u64 = (0..n as u64).map(|r| r * 100 + t as u64).sum();
                    assert_eq!(sum[0], want, "thread {t}: wrong sum");
                    c.free()
                })
            })
            .collect();
        for h in threads {
            h.join().expect("thread")?;
        }
        Ok(())
    })?;
    if me == 0 {
        println!("shared_rank: OK: {n} ranks x {THREADS} threads sharing each");
    }
    shared.finalize()
}
