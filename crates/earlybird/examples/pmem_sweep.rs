//! A job that checkpoints forever, for crash tests of persistent windows (seed 004): every
//! rank's window memory is a function of the iteration; each iteration every rank rewrites
//! its even elements and puts its right neighbour's odd ones, then `fence_persist`; rank 0
//! prints `ack K` once the fence of iteration K has returned (every rank has committed it).
//!
//! Started again over the same root, it loads the newest version every rank holds
//! (`pmem_global_checkpoint`), checks that every element of every rank is iteration K's for
//! one K, prints `loaded K` and goes on from K + 1.
//!
//!     ebrun -n 4 pmem_sweep ROOT [ITERATIONS]
//!
//! If no version is held by every rank (the first commit was cut), it prints `none` and
//! starts over. Exit status 3 if a loaded window is not one iteration's.

use earlybird::{pmem, ErrHandler, ErrorClass, Info, Op, Result};

const N: usize = 4096; // u64 per rank: 32 KiB, 8 blocks

fn value(k: u64, r: i32, i: usize) -> u64 {
    (k << 32) | ((r as u64) << 24) | i as u64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 || args.len() > 3 {
        eprintln!("usage: pmem_sweep ROOT [ITERATIONS]");
        std::process::exit(2);
    }
    let iterations: u64 = args.get(2).map_or(u64::MAX, |a| a.parse().unwrap_or(0));
    if let Err(e) = run(&args[1], iterations) {
        eprintln!("pmem_sweep: {e}");
        std::process::exit(1);
    }
}

fn run(root: &str, iterations: u64) -> Result<()> {
    let u = earlybird::init()?;
    let w = u.world();
    let (r, n) = (w.rank(), w.size());
    pmem::set_root_path(root)?;
    let exists = pmem::list()?.parts().iter().any(|p| p.name == "sweep");
    let mut all = [u8::from(exists)];
    w.allreduce(&[u8::from(exists)][..], &mut all[..], &Op::MIN)?;
    let info = |mode: &str| -> Result<Info> {
        let mut i = Info::new();
        i.set("pmem_is_pmem", "true")?;
        i.set("pmem_name", "sweep")?;
        i.set("pmem_mode", mode)?;
        i.set("pmem_global_checkpoint", "true")?;
        Ok(i)
    };
    // A job killed before its first commit finished on every rank leaves no version all
    // ranks hold (and acknowledged none): start over then.
    w.set_errhandler(ErrHandler::Return);
    let mut restored = all[0] == 1;
    let win = match restored {
        true => match w.win_allocate(8 * N, 8, &info("checkpoint")?) {
            Ok(win) => win,
            Err(e) if e.class() == ErrorClass::PmemCkptVer => {
                if r == 0 {
                    println!("none");
                }
                restored = false;
                w.win_allocate(8 * N, 8, &info("expand")?)?
            }
            Err(e) => return Err(e),
        },
        false => w.win_allocate(8 * N, 8, &info("expand")?)?,
    };
    let local = win.local::<u64>()?;
    let mut first = 0;
    if restored {
        let got = local.to_vec()?;
        let k = got[0] >> 32;
        let ok = got.iter().enumerate().all(|(i, &v)| v == value(k, r, i));
        let (mut lo, mut hi, mut good) = ([0u64], [0u64], [0u8]);
        w.allreduce(&[k][..], &mut lo[..], &Op::MIN)?;
        w.allreduce(&[k][..], &mut hi[..], &Op::MAX)?;
        w.allreduce(&[u8::from(ok)][..], &mut good[..], &Op::MIN)?;
        if r == 0 {
            if good[0] == 0 || lo[0] != hi[0] {
                println!(
                    "BAD loaded iterations {}..{} whole {}",
                    lo[0], hi[0], good[0]
                );
                std::process::exit(3);
            }
            println!("loaded {k}");
        }
        first = k + 1;
    }
    win.fence(0)?;
    let right = (r + 1) % n;
    let mut odd = vec![0u64; N / 2];
    let mut k = first;
    while k < first.saturating_add(iterations) {
        for i in (0..N).step_by(2) {
            local.set(i, value(k, r, i))?;
        }
        for (j, v) in odd.iter_mut().enumerate() {
            *v = value(k, right, 2 * j + 1);
        }
        for (j, v) in odd.iter().enumerate() {
            win.put(&[*v][..], right, (2 * j + 1) as isize)?;
        }
        win.fence_persist(0)?;
        if r == 0 {
            use std::io::Write;
            println!("ack {k}");
            std::io::stdout().flush().ok();
        }
        k += 1;
    }
    win.free()?;
    u.finalize()
}
