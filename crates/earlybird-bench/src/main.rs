//! earlybird-bench — OSU-style benchmarks, one JSON object per line.
//!
//! ```text
//! ebrun -n 2 earlybird-bench BENCH [--sizes 0,8,1k,64k,1m,4m] [--iters N] [--reps R]
//! earlybird-bench --threads 2 BENCH [...]
//! ```
//!
//! BENCH is one of `floor`, `latency`, `bw`, `msgrate`, `persistent-latency`. The method
//! follows `shared/bench-ref` so figures compare one to one: every size is measured as R timed
//! repeats (default 11) after one untimed warm-up repeat; a repeat's time is rank 0's loop
//! time (ranks start each repeat together); the line reports the median, min and max of the
//! per-repeat figures. Each rank pins itself to CPU `rank % ncpus`.
#![forbid(unsafe_code)]

use earlybird::{scope, wait_all, Comm, Result, ScratchBuffer, Universe};
use std::fmt::Write as _;

const WINDOW: usize = 64;

#[derive(Clone, Debug)]
struct Opts {
    bench: String,
    threads: Option<u32>,
    sizes: Option<Vec<usize>>,
    iters: Option<u64>,
    reps: usize,
}

fn usage() -> ! {
    eprintln!(
        "usage: earlybird-bench [--threads N] BENCH [--sizes LIST] [--iters N] [--reps R]\n\
         BENCH: floor | latency | bw | msgrate | persistent-latency\n\
         LIST: comma separated sizes with k/m suffixes (KiB/MiB), e.g. 0,8,1k,64k,1m,4m\n\
         Run under ebrun (ebrun -n 2 earlybird-bench latency) or as threads (--threads 2)."
    );
    std::process::exit(2)
}

fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim().to_ascii_lowercase();
    let (num, mul) = match s.chars().last()? {
        'k' => (&s[..s.len() - 1], 1024),
        'm' => (&s[..s.len() - 1], 1024 * 1024),
        _ => (&s[..], 1),
    };
    num.parse::<usize>().ok().map(|n| n * mul)
}

fn parse_args() -> Opts {
    let mut o = Opts {
        bench: String::new(),
        threads: None,
        sizes: None,
        iters: None,
        reps: 11,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("earlybird-bench: {name} needs a value");
                usage()
            })
        };
        match a.as_str() {
            "--threads" => o.threads = Some(val("--threads").parse().unwrap_or_else(|_| usage())),
            "--sizes" => {
                let v = val("--sizes");
                o.sizes = Some(
                    v.split(',')
                        .map(|x| parse_size(x).unwrap_or_else(|| usage()))
                        .collect(),
                );
            }
            "--iters" => o.iters = Some(val("--iters").parse().unwrap_or_else(|_| usage())),
            "--reps" => o.reps = val("--reps").parse().unwrap_or_else(|_| usage()),
            "-h" | "--help" => usage(),
            b if !b.starts_with('-') && o.bench.is_empty() => o.bench = b.to_string(),
            _ => usage(),
        }
    }
    if o.bench.is_empty() {
        usage()
    }
    o
}

fn main() {
    let o = parse_args();
    let result = match o.threads {
        Some(n) => earlybird::threads::run(n, |u| run(&o, u, "threads"))
            .and_then(|v| v.into_iter().collect()),
        None => earlybird::init().and_then(|u| run(&o, u, "processes")),
    };
    if let Err(e) = result {
        eprintln!("earlybird-bench: {e}");
        std::process::exit(1);
    }
}

fn run(o: &Opts, u: Universe, mode: &str) -> Result<()> {
    let w = u.world().clone();
    if w.size() < 2 {
        eprintln!("earlybird-bench: needs 2 ranks (ebrun -n 2 or --threads 2)");
        std::process::exit(2);
    }
    earlybird::sys::process::pin_to_cpu(w.rank() as usize % earlybird::sys::process::cpus());
    let b = Bench { w: &w, o, mode };
    match o.bench.as_str() {
        "floor" => b.floor()?,
        "latency" => b.latency(false)?,
        "persistent-latency" => b.latency(true)?,
        "bw" => b.windowed(
            "bw",
            &[0, 8, 64, 1024, 16 << 10, 64 << 10, 1 << 20, 4 << 20],
            200,
            1 << 30,
            10,
        )?,
        "msgrate" => b.windowed("msgrate", &[8], 20_000, u64::MAX, 10)?,
        other => {
            eprintln!("earlybird-bench: unknown benchmark {other:?}");
            usage()
        }
    }
    u.finalize()
}

struct Bench<'a> {
    w: &'a Comm,
    o: &'a Opts,
    mode: &'a str,
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    Stats {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

impl Bench<'_> {
    /// Ranks 0 and 1 meet (zero-byte exchange) so each repeat starts together.
    fn sync(&self) -> Result<()> {
        let peer = 1 - self.w.rank();
        if self.w.rank() > 1 {
            return Ok(());
        }
        let mut z = [0u8; 0];
        self.w.sendrecv(&[0u8; 0], peer, 9999, &mut z, peer, 9999)?;
        Ok(())
    }

    fn sizes(&self, default: &[usize]) -> Vec<usize> {
        self.o.sizes.clone().unwrap_or_else(|| default.to_vec())
    }

    fn iters_for(&self, base: u64, budget: u64, bytes_per_iter: u64, min: u64) -> u64 {
        if let Some(i) = self.o.iters {
            return i;
        }
        let cut = budget
            .checked_div(bytes_per_iter)
            .map_or(base, |c| c.min(base));
        cut.max(min)
    }

    fn emit(&self, bench: &str, bytes: usize, iters: u64, unit_us: Stats, extra: &str) {
        if self.w.rank() != 0 {
            return;
        }
        let mut line = String::new();
        write!(
            line,
            "{{\"bench\":\"{bench}\",\"impl\":\"earlybird\",\"mode\":\"{}\",\"ranks\":{},\"bytes\":{bytes},\"iters\":{iters},\"median_us\":{:.4},\"min_us\":{:.4},\"max_us\":{:.4}{extra}}}",
            self.mode,
            self.w.size(),
            unit_us.median,
            unit_us.min,
            unit_us.max
        )
        .unwrap();
        println!("{line}");
    }

    fn floor(&self) -> Result<()> {
        let iters = self.o.iters.unwrap_or(1_000_000);
        let mut per = vec![];
        for rep in 0..=self.o.reps {
            self.sync()?;
            if self.w.rank() > 1 {
                continue;
            }
            let t = self.w.floor_pingpong(rep as u64, iters);
            if rep > 0 {
                per.push(t / (2.0 * iters as f64) * 1e6);
            }
        }
        if self.w.rank() == 0 {
            self.emit("floor", 8, iters, stats(per), "");
        }
        Ok(())
    }

    fn latency(&self, persistent: bool) -> Result<()> {
        let w = self.w;
        let me = w.rank();
        let name = if persistent {
            "persistent-latency"
        } else {
            "latency"
        };
        for n in self.sizes(&[0, 8, 64, 1024, 16 << 10, 64 << 10, 1 << 20, 4 << 20]) {
            let iters = self.iters_for(10_000, 512 << 20, 2 * n as u64, 50);
            let sbuf = vec![1u8; n];
            let mut rbuf = vec![0u8; n];
            let mut per = vec![];
            if me > 1 {
                for _ in 0..=self.o.reps {
                    self.sync()?;
                }
                continue;
            }
            let peer = 1 - me;
            if persistent {
                scope(|s| -> Result<()> {
                    let mut sreq = w.send_init(s, &sbuf, peer, 1)?;
                    let mut rreq = w.recv_init(s, &mut rbuf, peer, 1)?;
                    for rep in 0..=self.o.reps {
                        self.sync()?;
                        let t0 = std::time::Instant::now();
                        for _ in 0..iters {
                            if me == 0 {
                                rreq.start()?;
                                sreq.start()?;
                                sreq.wait()?;
                                rreq.wait()?;
                            } else {
                                rreq.start()?;
                                rreq.wait()?;
                                sreq.start()?;
                                sreq.wait()?;
                            }
                        }
                        if rep > 0 {
                            per.push(t0.elapsed().as_secs_f64() / (2.0 * iters as f64) * 1e6);
                        }
                    }
                    Ok(())
                })?;
            } else {
                for rep in 0..=self.o.reps {
                    self.sync()?;
                    let t0 = std::time::Instant::now();
                    for _ in 0..iters {
                        if me == 0 {
                            w.send(&sbuf, peer, 1)?;
                            w.recv(&mut rbuf, peer, 1)?;
                        } else {
                            w.recv(&mut rbuf, peer, 1)?;
                            w.send(&sbuf, peer, 1)?;
                        }
                    }
                    if rep > 0 {
                        per.push(t0.elapsed().as_secs_f64() / (2.0 * iters as f64) * 1e6);
                    }
                }
            }
            self.emit(name, n, iters, stats(per), "");
        }
        Ok(())
    }

    /// bw and msgrate: rank 0 posts a window of 64 isends from one buffer, rank 1 a window of
    /// 64 irecvs into one buffer; both wait for all; rank 1 answers with a 4-byte ack.
    fn windowed(
        &self,
        name: &str,
        default_sizes: &[usize],
        base_iters: u64,
        budget: u64,
        min_iters: u64,
    ) -> Result<()> {
        let w = self.w;
        let me = w.rank();
        for n in self.sizes(default_sizes) {
            let iters = self.iters_for(base_iters, budget, (n * WINDOW) as u64, min_iters);
            let sbuf = vec![1u8; n];
            let mut rbuf = ScratchBuffer::new(n);
            let mut per = vec![];
            for rep in 0..=self.o.reps {
                self.sync()?;
                if me > 1 {
                    continue;
                }
                let t0 = std::time::Instant::now();
                for _ in 0..iters {
                    scope(|s| -> Result<()> {
                        let mut reqs = Vec::with_capacity(WINDOW);
                        if me == 0 {
                            for _ in 0..WINDOW {
                                reqs.push(w.isend(s, &sbuf, 1, 100)?);
                            }
                            wait_all(&mut reqs)?;
                            let mut ack = [0u8; 4];
                            w.recv(&mut ack, 1, 101)?;
                        } else {
                            for _ in 0..WINDOW {
                                reqs.push(w.irecv_scratch(s, &rbuf, 0, 100)?);
                            }
                            wait_all(&mut reqs)?;
                            w.send(&[0u8; 4], 0, 101)?;
                        }
                        Ok(())
                    })?;
                }
                if rep > 0 {
                    per.push(t0.elapsed().as_secs_f64() / iters as f64 * 1e6);
                }
            }
            if me == 0 {
                let st = stats(per);
                let msgs = WINDOW as f64;
                let extra = if name == "msgrate" {
                    format!(",\"mmsg_per_s\":{:.3}", msgs / st.median)
                } else {
                    format!(
                        ",\"mb_per_s\":{:.1},\"mmsg_per_s\":{:.3}",
                        (n as f64 * msgs) / st.median,
                        msgs / st.median
                    )
                };
                // Per-message figures: the line's times are per window.
                self.emit(name, n, iters, st, &extra);
            }
            let _ = rbuf.get_mut();
        }
        Ok(())
    }
}
