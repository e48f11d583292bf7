//! earlybird-bench — OSU-style benchmarks, one JSON object per line.
//!
//! ```text
//! ebrun -n 2 earlybird-bench BENCH [--sizes 0,8,1k,64k,1m,4m] [--iters N] [--reps R]
//! earlybird-bench --threads 2 BENCH [...]
//! ```
//!
//! BENCH is one of `floor`, `latency`, `bw`, `msgrate`, `persistent-latency`, `channel`
//! (2 ranks), `coll`, `rma`, `pmem`, `assert` (seed 002's assertions, see `assert.rs`),
//! `endpoints` (seed 003, alone or under `ebrun -n 2`, see `endpoints.rs`) or
//! `halo2d` (any number of ranks; 4 is the reference). The method follows `shared/bench-ref`
//! so figures compare one to one: every size is measured as R timed repeats (default 11)
//! after one untimed warm-up repeat; a repeat's time is rank 0's loop time (ranks start each
//! repeat together); the line reports the median, min and max of the per-repeat figures.
//! `halo2d` follows `bench/halo2d.c` instead (see `Bench::halo2d`). Each rank pins itself
//! to CPU `rank % ncpus`.
#![forbid(unsafe_code)]

use earlybird::{
    bind_slack_channel, dims_create, scope, split_views, start_all, unbind_channel, wait_all,
    wait_all_into, At, Comm, Datatype, Info, Op, Result, ScratchBuffer, Status, SyncCounter, Typed,
    TypedMut, Universe, IN_PLACE, MODE_WIN_PUT,
};
use std::fmt::Write as _;

const WINDOW: usize = 64;

#[derive(Clone, Debug)]
struct Opts {
    bench: String,
    threads: Option<u32>,
    sizes: Option<Vec<usize>>,
    iters: Option<u64>,
    reps: Option<usize>,
    warmup: Option<u64>,
    /// coll: only the lines of these names (`bcast`, `barrier_nb`, ...).
    only: Option<Vec<String>>,
}

fn usage() -> ! {
    eprintln!(
        "usage: earlybird-bench [--threads N] BENCH [--sizes LIST] [--iters N] [--reps R] [--warmup W] [--only NAMES]\n\
         BENCH: floor | latency | bw | msgrate | persistent-latency | channel | halo2d | coll | rma | pmem | assert | endpoints\n\
         LIST: comma separated sizes with k/m suffixes (KiB/MiB), e.g. 0,8,1k,64k,1m,4m\n\
         coll: sizes pick among 0 (barrier), 8 and 1m; --only names the lines to run, e.g.\n\
         bcast,barrier_nb,allreduce_persist.\n\
         halo2d: sizes are bytes per halo message (8 x cells per side, default 8k), --iters the\n\
         timed exchanges (default 2000) in R batches (default 10), after W warm-up ones (200).\n\
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
        reps: None,
        warmup: None,
        only: None,
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
            "--reps" => o.reps = Some(val("--reps").parse().unwrap_or_else(|_| usage())),
            "--warmup" => o.warmup = Some(val("--warmup").parse().unwrap_or_else(|_| usage())),
            "--only" => o.only = Some(val("--only").split(',').map(str::to_string).collect()),
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

mod assert;
mod endpoints;
mod pmem;
mod rma;

fn main() {
    let o = parse_args();
    let result = match o.threads {
        // A thread job reads no environment; the bench passes EARLYBIRD_ASSERTIONS on.
        Some(n) => earlybird::Assertions::from_env()
            .and_then(|a| {
                earlybird::threads::Job::new(n)
                    .assertions(a)
                    .run(|u| run(&o, u, "threads"))
            })
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
    if w.size() < 2 && !matches!(o.bench.as_str(), "halo2d" | "coll" | "pmem" | "endpoints") {
        eprintln!("earlybird-bench: needs 2 ranks (ebrun -n 2 or --threads 2)");
        std::process::exit(2);
    }
    if o.bench == "endpoints" {
        Bench { w: &w, o, mode }.endpoints(&w)?;
        if w.size() == 1 {
            drop(w);
            return endpoints::shared_rank(o, u);
        }
        return u.finalize();
    }
    earlybird::launch::pin_to_cpu(w.rank() as usize % earlybird::launch::cpus());
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
        "halo2d" => b.halo2d()?,
        "coll" => b.coll()?,
        "channel" => b.channel()?,
        "rma" => b.rma()?,
        "pmem" => b.pmem()?,
        "assert" => b.assert()?,
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

thread_local! {
    /// Fields every line carries for now (`assert` tags its lines with them). Kept out of
    /// `Bench` so that the measuring loops compile as they did before it.
    static LINE_TAG: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

/// Median (of the two middle values for an even count), min and max.
fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let mid = v.len() / 2;
    Stats {
        median: if v.len() % 2 == 1 {
            v[mid]
        } else {
            0.5 * (v[mid - 1] + v[mid])
        },
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// Print one JSON line: `unit_us` is the time per unit the bench names (round trip half,
/// window, operation), `extra` more `,"key":value` fields.
fn emit_line(
    mode: &str,
    ranks: i32,
    bench: &str,
    bytes: usize,
    iters: u64,
    unit_us: Stats,
    extra: &str,
) {
    let mut line = String::new();
    write!(
        line,
        "{{\"bench\":\"{bench}\",\"impl\":\"earlybird\",\"mode\":\"{mode}\",\"ranks\":{ranks},\"bytes\":{bytes},\"iters\":{iters},\"median_us\":{:.4},\"min_us\":{:.4},\"max_us\":{:.4}{extra}{}}}",
        unit_us.median,
        unit_us.min,
        unit_us.max,
        LINE_TAG.with(|t| t.borrow().clone())
    )
    .unwrap();
    println!("{line}");
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

    /// Time `iters` runs of `f` per repeat (after one warm-up repeat), max over ranks, in
    /// microseconds per run.
    fn timed(&self, iters: u64, mut f: impl FnMut(u64) -> Result<()>) -> Result<Vec<f64>> {
        let mut per = Vec::new();
        for rep in 0..=self.reps() {
            self.w.barrier()?;
            let t0 = std::time::Instant::now();
            for i in 0..iters {
                f(i)?;
            }
            let mine = [t0.elapsed().as_secs_f64() / iters as f64 * 1e6];
            let mut max = [0.0f64];
            self.w.allreduce(&mine[..], &mut max[..], &Op::MAX)?;
            if rep > 0 {
                per.push(max[0]);
            }
        }
        Ok(per)
    }

    /// Timed repeats (default 11).
    fn reps(&self) -> usize {
        self.o.reps.unwrap_or(11)
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
        emit_line(
            self.mode,
            self.w.size(),
            bench,
            bytes,
            iters,
            unit_us,
            extra,
        );
    }

    /// `coll`, as bench-ref's `coll.c`: allreduce of 1 double and of 1 MiB of doubles (sum),
    /// bcast of 8 B and 1 MiB from rank 0, barrier; each blocking, nonblocking (start, then
    /// wait at once) and persistent (one request made outside the timing, then start and
    /// wait). A repeat is a back-to-back loop; its time is the maximum over ranks, per
    /// operation. Names: `allreduce`, `allreduce_nb`, `allreduce_persist`, ...
    fn coll(&self) -> Result<()> {
        let w = self.w;
        let big = 1 << 20;
        let sbuf = vec![1.0f64; big / 8];
        let mut rbuf = vec![0.0f64; big / 8];
        let mut bbuf = vec![0u8; big];
        for mode in ["", "_nb", "_persist"] {
            for (op, bytes) in [
                ("allreduce", 8),
                ("allreduce", big),
                ("bcast", 8),
                ("bcast", big),
                ("barrier", 0),
            ] {
                if self.o.sizes.as_ref().is_some_and(|v| !v.contains(&bytes)) {
                    continue;
                }
                let name = format!("{op}{mode}");
                if self.o.only.as_ref().is_some_and(|v| !v.contains(&name)) {
                    continue;
                }
                let iters = self.iters_for(10_000, 256 << 20, bytes.max(1) as u64, 50);
                let warm = self.o.warmup.unwrap_or(200).min(iters);
                let n = bytes / 8;
                let mut per = vec![];
                let mut alg = "";
                let mut timed = |f: &mut dyn FnMut(u64) -> Result<()>| -> Result<()> {
                    for rep in 0..=self.reps() {
                        w.barrier()?;
                        let t0 = std::time::Instant::now();
                        f(if rep == 0 { warm } else { iters })?;
                        alg = earlybird::coll::last_algorithm();
                        let mut t = [t0.elapsed().as_secs_f64()];
                        w.allreduce(IN_PLACE, &mut t, &Op::MAX)?;
                        if rep > 0 {
                            per.push(t[0] / iters as f64 * 1e6);
                        }
                    }
                    Ok(())
                };
                let (s_, r_, b_) = (&sbuf[..n], &mut rbuf[..n], &mut bbuf[..bytes]);
                match mode {
                    "" => timed(&mut |k| {
                        for _ in 0..k {
                            match op {
                                "allreduce" => w.allreduce(s_, &mut *r_, &Op::SUM)?,
                                "bcast" => w.bcast(&mut *b_, 0)?,
                                _ => w.barrier()?,
                            }
                        }
                        Ok(())
                    })?,
                    "_nb" => timed(&mut |k| {
                        for _ in 0..k {
                            scope(|s| -> Result<()> {
                                let mut q = match op {
                                    "allreduce" => w.iallreduce(s, s_, &mut *r_, &Op::SUM)?,
                                    "bcast" => w.ibcast(s, &mut *b_, 0)?,
                                    _ => w.ibarrier(s)?,
                                };
                                q.wait()?;
                                Ok(())
                            })?;
                        }
                        Ok(())
                    })?,
                    _ => scope(|s| -> Result<()> {
                        let mut q = match op {
                            "allreduce" => w.allreduce_init(s, s_, r_, &Op::SUM)?,
                            "bcast" => w.bcast_init(s, b_, 0)?,
                            _ => w.barrier_init(s)?,
                        };
                        timed(&mut |k| {
                            for _ in 0..k {
                                q.start()?;
                                q.wait()?;
                            }
                            Ok(())
                        })
                    })?,
                }
                self.emit(
                    &name,
                    bytes,
                    iters,
                    stats(per),
                    &format!(",\"algorithm\":\"{alg}\""),
                );
            }
        }
        Ok(())
    }

    fn floor(&self) -> Result<()> {
        let iters = self.o.iters.unwrap_or(1_000_000);
        let mut per = vec![];
        for rep in 0..=self.reps() {
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
        let name = if persistent {
            "persistent-latency"
        } else {
            "latency"
        };
        let sizes = [0, 8, 64, 1024, 16 << 10, 64 << 10, 1 << 20, 4 << 20];
        self.latency_named(name, persistent, &sizes)
    }

    /// The ping-pong of `latency`, its lines named `name`, over `default_sizes` unless
    /// `--sizes` says otherwise.
    fn latency_named(&self, name: &str, persistent: bool, default_sizes: &[usize]) -> Result<()> {
        let w = self.w;
        let me = w.rank();
        for n in self.sizes(default_sizes) {
            let iters = self.iters_for(10_000, 512 << 20, 2 * n as u64, 50);
            let sbuf = vec![1u8; n];
            let mut rbuf = vec![0u8; n];
            let mut per = vec![];
            if me > 1 {
                for _ in 0..=self.reps() {
                    self.sync()?;
                }
                continue;
            }
            let peer = 1 - me;
            if persistent {
                scope(|s| -> Result<()> {
                    let mut sreq = w.send_init(s, &sbuf, peer, 1)?;
                    let mut rreq = w.recv_init(s, &mut rbuf, peer, 1)?;
                    for rep in 0..=self.reps() {
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
                for rep in 0..=self.reps() {
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

    /// `channel` (seed 000's bound channels), on ranks 0 and 1:
    ///
    /// - `channel_pingpong`: two slack-1 channels (0 -> 1 and 1 -> 0) bound from
    ///   `send_init`/`recv_init`; each side keeps its receive posted ahead of the partner's
    ///   send (ready mode), then start/wait of the send and wait of the receive. Half round
    ///   trip per message, as `persistent-latency`.
    /// - `channel_bw`: a K = 8 channel bound from `ssend_init` (synchronous mode: a send
    ///   whose receive is not re-posted yet waits for it) streams `iters` messages; the sender
    ///   copies its buffer into the slot at each start, and the receiver copies each message
    ///   out into its buffer at its wait (two copies). `channel_bw_inplace`: the receiver reads
    ///   each message in its slot (`wait_in_place`, then one word of every cache line, so the
    ///   data does reach its core), so one copy moves the data, as one single-copy transfer
    ///   does in `bw`. Per-message time; `mb_per_s` as `bw`.
    fn channel(&self) -> Result<()> {
        let w = self.w;
        let me = w.rank();
        if me > 1 {
            for _ in self.sizes(&[8]) {
                for _ in 0..=self.reps() {
                    self.sync()?;
                }
            }
            for _ in 0..2 {
                for _ in 0..=self.reps() {
                    self.sync()?;
                }
            }
            return Ok(());
        }
        let peer = 1 - me;
        let info = Info::new();
        for n in self.sizes(&[8]) {
            let iters = self.iters_for(200_000, 512 << 20, 2 * n as u64, 50);
            let sbuf = vec![1u8; n];
            let mut rbuf = vec![0u8; n];
            let mut per = vec![];
            scope(|s| -> Result<()> {
                let sreq = w.send_init(s, &sbuf, peer, 21)?;
                let rreq = w.recv_init(s, &mut rbuf, peer, 21)?;
                // Bind the send and the receive together: each side lists them in its own
                // order, and neither waits for the other's second bind.
                let mut pair = [sreq, rreq];
                let mut chans = earlybird::bind_channels(&mut pair, &[])?;
                let rin = chans.pop().expect("receive channel");
                let sout = chans.pop().expect("send channel");
                let (mut sout, mut rin) = (sout, rin);
                for rep in 0..=self.reps() {
                    rin.start()?;
                    self.sync()?;
                    let t0 = std::time::Instant::now();
                    for i in 0..iters {
                        let more = i + 1 < iters;
                        if me == 0 {
                            sout.start()?;
                            sout.wait()?;
                            rin.wait()?;
                            if more {
                                rin.start()?;
                            }
                        } else {
                            rin.wait()?;
                            if more {
                                rin.start()?;
                            }
                            sout.start()?;
                            sout.wait()?;
                        }
                    }
                    if rep > 0 {
                        per.push(t0.elapsed().as_secs_f64() / (2.0 * iters as f64) * 1e6);
                    }
                }
                unbind_channel(&mut sout)?;
                unbind_channel(&mut rin)?;
                Ok(())
            })?;
            self.emit("channel_pingpong", n, iters, stats(per), "");
        }
        const K: u32 = 8;
        let n = 64usize << 10;
        for in_place in [false, true] {
            let iters = self.iters_for(20_000, 4 << 30, n as u64, 100);
            let sbuf = vec![1u8; n];
            let mut rbuf = vec![0u8; n];
            let mut per = vec![];
            scope(|s| -> Result<()> {
                let mut ch = if me == 0 {
                    let mut req = w.ssend_init(s, &sbuf, peer, 22)?;
                    bind_slack_channel(&mut req, K, 0, &info)?
                } else {
                    let mut req = w.recv_init(s, &mut rbuf, peer, 22)?;
                    bind_slack_channel(&mut req, K, 0, &info)?
                };
                for rep in 0..=self.reps() {
                    if me == 1 {
                        for _ in 0..K {
                            ch.start()?;
                        }
                    }
                    self.sync()?;
                    let t0 = std::time::Instant::now();
                    for i in 0..iters {
                        if me == 0 {
                            if i >= K as u64 {
                                ch.wait()?;
                            }
                            ch.start()?;
                        } else {
                            if in_place {
                                ch.wait_in_place()?;
                                // Read one word of every cache line: the data reaches this
                                // core, as a receiving copy would bring it.
                                let got = ch.arrived::<u64>()?;
                                let mut acc = 0u64;
                                for line in got.chunks(8) {
                                    acc ^= line[0];
                                }
                                std::hint::black_box(acc);
                            } else {
                                ch.wait()?;
                            }
                            if i + (K as u64) < iters {
                                ch.start()?;
                            }
                        }
                    }
                    while ch.is_active() {
                        ch.wait()?;
                    }
                    if rep > 0 {
                        per.push(t0.elapsed().as_secs_f64() / iters as f64 * 1e6);
                    }
                }
                unbind_channel(&mut ch)?;
                Ok(())
            })?;
            if me == 0 {
                let st = stats(per);
                let extra = format!(",\"mb_per_s\":{:.1},\"slack\":{K}", n as f64 / st.median);
                let name = if in_place {
                    "channel_bw_inplace"
                } else {
                    "channel_bw"
                };
                self.emit(name, n, iters, st, &extra);
            }
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
            for rep in 0..=self.reps() {
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
                let extra = if name.contains("msgrate") {
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

// ---- halo2d ---------------------------------------------------------------------------------

/// halo2d tags: the direction a message travels, so that on a 2 x 2 torus, where both
/// neighbours along a dimension are the same rank, each message lands in the right halo.
const TO_UP: i32 = 1;
const TO_DOWN: i32 = 2;
const TO_LEFT: i32 = 3;
const TO_RIGHT: i32 = 4;
/// The value rank `r` keeps in its owned cell `(i, j)`, `1 <= i, j <= n`: exact in a double
/// (the same as `bench/halo2d.c`, so the checksums agree).
fn cell(r: i32, i: usize, j: usize) -> f64 {
    (f64::from(r) * 1100.0 + i as f64) * 1100.0 + j as f64
}

/// Print a halo2d error line to stderr in one write, so that the lines of several ranks do not
/// interleave.
fn complain(line: String) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(format!("halo2d: {line}\n").as_bytes());
}

/// Element-wise `op` of every rank's `v`, on rank 0 of `c` (MPI_Reduce; the others get
/// their own `v` back).
fn reduce_to_root(c: &Comm, v: &[f64], op: &Op) -> Result<Vec<f64>> {
    let mut acc = v.to_vec();
    if c.rank() == 0 {
        c.reduce(IN_PLACE, &mut acc, op, 0)?;
    } else {
        c.reduce(v, &mut [0.0f64; 0], op, 0)?;
    }
    Ok(acc)
}

/// One rank's side of the halo2d exchange: `n x n` owned cells in an `(n+2) x (n+2)` array,
/// row-major, whose outer ring is the halo.
struct Halo {
    n: usize,
    /// A halo row: `n` contiguous doubles (MPI_Type_contiguous).
    row: Datatype,
    /// A halo column: `n` doubles one array row apart (MPI_Type_vector(n, 1, n+2)).
    col: Datatype,
    /// Neighbours up, down, left, right.
    peers: [i32; 4],
}

impl Halo {
    /// Views of `g`: the boundary rows and columns to send and the halo rows and columns to
    /// receive into (up, down, left, right each), which interleave in memory.
    fn views<'b>(&self, g: &'b mut [f64]) -> Result<(Vec<Typed<'b>>, Vec<TypedMut<'b>>)> {
        let (n, ld, r, c) = (self.n, self.n + 2, &self.row, &self.col);
        split_views(
            g,
            &[
                (ld + 1, 1, r),
                (n * ld + 1, 1, r),
                (ld + 1, 1, c),
                (ld + n, 1, c),
            ],
            &[
                (1, 1, r),
                ((n + 1) * ld + 1, 1, r),
                (ld, 1, c),
                (ld + n + 1, 1, c),
            ],
        )
    }

    /// One exchange in all four directions, as `bench/halo2d.c` does it: four irecv into the
    /// halo, four isend of the boundary, one wait_all (no allocation per exchange).
    fn exchange(&self, cart: &Comm, out: &[Typed<'_>], into: &mut [TypedMut<'_>]) -> Result<()> {
        let [up, down, left, right] = self.peers;
        let ([iu, id, il, ir], [ou, od, ol, or]) = (into, out) else {
            unreachable!("views() makes four of each")
        };
        scope(|s| -> Result<()> {
            let mut reqs = [
                cart.irecv(s, iu, up, TO_DOWN)?,
                cart.irecv(s, id, down, TO_UP)?,
                cart.irecv(s, il, left, TO_RIGHT)?,
                cart.irecv(s, ir, right, TO_LEFT)?,
                cart.isend(s, ou, up, TO_UP)?,
                cart.isend(s, od, down, TO_DOWN)?,
                cart.isend(s, ol, left, TO_LEFT)?,
                cart.isend(s, or, right, TO_RIGHT)?,
            ];
            let mut st = [Status::default(); 8];
            wait_all_into(&mut reqs, &mut st)
        })
    }

    /// Check every halo cell of rank `me`'s array against its neighbour's boundary value, and
    /// that the corners are untouched: `[halo sum, expected sum, wrong cells]`, the first few
    /// wrong cells printed.
    fn check(&self, g: &[f64], me: i32, when: &str) -> [f64; 3] {
        let (n, ld) = (self.n, self.n + 2);
        let [up, down, left, right] = self.peers;
        let (mut sum, mut want, mut bad) = (0.0, 0.0, 0usize);
        for k in 1..=n {
            for (i, j, expect) in [
                (0, k, cell(up, n, k)),
                (n + 1, k, cell(down, 1, k)),
                (k, 0, cell(left, k, n)),
                (k, n + 1, cell(right, k, 1)),
            ] {
                let got = g[i * ld + j];
                sum += got;
                want += expect;
                if got != expect {
                    if bad < 5 {
                        complain(format!("rank {me} ({when}): halo cell ({i},{j}) is {got:.1}, expected {expect:.1}"));
                    }
                    bad += 1;
                }
            }
        }
        for (i, j) in [(0, 0), (0, n + 1), (n + 1, 0), (n + 1, n + 1)] {
            if g[i * ld + j] != -1.0 {
                if bad < 5 {
                    complain(format!(
                        "rank {me} ({when}): corner ({i},{j}) was overwritten"
                    ));
                }
                bad += 1;
            }
        }
        [sum, want, bad as f64]
    }

    /// Check the halos on every rank; rank 0 ends the job (status 3) if any is wrong. Returns
    /// the sum of all halo cells over all ranks (on rank 0).
    fn verify(&self, cart: &Comm, g: &[f64], when: &str) -> Result<f64> {
        let total = reduce_to_root(cart, &self.check(g, cart.rank(), when), &Op::SUM)?;
        if cart.rank() == 0 && (total[2] != 0.0 || total[0] != total[1]) {
            complain(format!(
                "{when}: {} wrong halo cells; checksum {:.1}, expected {:.1}",
                total[2], total[0], total[1]
            ));
            std::process::exit(3);
        }
        Ok(total[0])
    }
}

/// How a halo2d exchange synchronises when its halos travel by RMA.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RmaSync {
    /// One fence after the four puts.
    Fence,
    /// Double-buffered halos and sync counters (seed 001): the four puts of exchange `i` go
    /// to buffer `i % 2`, each signalled by a restarting sync ops request to its neighbour,
    /// and an exchange ends when the four neighbours' signals have arrived. A neighbour's
    /// signal of exchange `i` also says it is done with buffer `(i - 1) % 2`, the next one
    /// written, so no other signal is needed.
    Counter,
}

impl Halo {
    /// Where what travels in direction `d` (up, down, left, right) lands in the receiver's
    /// array, and its type there.
    fn landing(&self, d: usize) -> (usize, &Datatype) {
        let (n, ld) = (self.n, self.n + 2);
        match d {
            0 => ((n + 1) * ld + 1, &self.row),
            1 => (1, &self.row),
            2 => (ld + n + 1, &self.col),
            _ => (ld, &self.col),
        }
    }
}

impl Bench<'_> {
    /// halo2d through RMA (`halo2d_fence`, `halo2d_counter`): the exchange of [`halo2d`]
    /// with each boundary put into the neighbour's halo in a window (rows contiguous, columns
    /// through the vector type at the target), timed the same way; the halos are checked
    /// after the batches. Returns the checksum.
    fn halo2d_rma(
        &self,
        cart: &Comm,
        h: &Halo,
        g: &mut [f64],
        how: RmaSync,
        us: &mut Vec<f64>,
    ) -> Result<f64> {
        let (ld, batches) = (h.n + 2, self.o.reps.unwrap_or(10) as u64);
        let per = self.o.iters.unwrap_or(2000) / batches;
        let warmup = self.o.warmup.unwrap_or(200);
        let whole = ld * ld;
        let win = cart.win_allocate(2 * whole * 8, 8, &Info::new())?;
        // Both buffers start as the array with its halos zeroed (corners kept), so that the
        // check afterwards sees only what the puts wrote.
        {
            let mut blank = g.to_vec();
            for k in 1..=h.n {
                for c in [k, (h.n + 1) * ld + k, k * ld, k * ld + h.n + 1] {
                    blank[c] = 0.0;
                }
            }
            let l = win.local::<f64>()?;
            l.write(0, &blank)?;
            l.write(whole, &blank)?;
        }
        cart.barrier()?;
        let mut restart = Info::new();
        restart.set("restart", "true")?;
        let mut counters = Vec::new();
        let (mut puts, mut filled) = (Vec::new(), Vec::new());
        if how == RmaSync::Counter {
            // One counter per direction, signalled only by the neighbour that sends in it (a
            // counter several neighbours signal counts a fast one's signals for a slow one's).
            counters = win.alloc_sync_objects(4, &Info::new())?;
            let mut theirs = [SyncCounter::NULL; 4];
            for d in 0..4 {
                // counters[d] is the one peers[d] signals; what arrives here is the counter
                // peers[d ^ 1] keeps for me.
                let mut got = [SyncCounter::NULL];
                cart.sendrecv(
                    &counters[d..=d],
                    h.peers[d],
                    d as i32,
                    &mut got[..],
                    h.peers[d ^ 1],
                    d as i32,
                )?;
                theirs[d ^ 1] = got[0];
            }
            for d in 0..4 {
                puts.push(win.sync_ops_init(h.peers[d], MODE_WIN_PUT, theirs[d], &restart)?);
                filled.push(win.sync_object_init(counters[d], 1, &restart)?);
            }
            start_all(&mut puts)?;
            start_all(&mut filled)?;
        } else {
            win.fence(0)?;
        }
        let mut parity = 0;
        {
            let (out, _) = h.views(g)?;
            let mut exchange = || -> Result<()> {
                let base = if how == RmaSync::Counter {
                    parity * whole
                } else {
                    0
                };
                for (d, o) in out.iter().enumerate() {
                    let (at, t) = h.landing(d);
                    win.put_to(o, h.peers[d], (base + at) as isize, At::new(1, t))?;
                }
                if how == RmaSync::Counter {
                    wait_all(&mut puts)?;
                    wait_all(&mut filled)?;
                } else {
                    win.fence(0)?;
                }
                parity ^= 1;
                Ok(())
            };
            for _ in 0..warmup {
                exchange()?;
            }
            for _ in 0..batches {
                cart.barrier()?;
                let t0 = std::time::Instant::now();
                for _ in 0..per {
                    exchange()?;
                }
                let t = reduce_to_root(cart, &[t0.elapsed().as_secs_f64()], &Op::MAX)?;
                us.push(t[0] / per as f64 * 1e6);
            }
        }
        // The halos of the buffer written last.
        let last = if how == RmaSync::Counter {
            (parity ^ 1) * whole
        } else {
            0
        };
        win.local::<f64>()?.read(last, g)?;
        let checksum = h.verify(cart, g, "after the timed RMA batches")?;
        drop((puts, filled));
        if how == RmaSync::Fence {
            win.fence(earlybird::MODE_NOSUCCEED)?;
        }
        cart.barrier()?;
        win.free_sync_objects(&mut counters)?;
        win.free()?;
        Ok(checksum)
    }

    /// halo2d: the 2-D halo exchange of `bench/halo2d.c`, measured as it measures it.
    ///
    /// `dims_create` and a periodic `cart_create` shape the ranks (2 x 2 for 4); each owns
    /// N x N doubles (N = 1024 by default: `--sizes` gives the halo message size, 8 N bytes)
    /// in an (N+2) x (N+2) array. One exchange: halo rows as a contiguous type, halo columns
    /// as `vector(N, 1, N+2)`, four irecv and four isend, one wait_all. One exchange, a check
    /// of every halo cell, W warm-up exchanges (`--warmup`, 200), then R batches (`--reps`,
    /// 10) of ITERS / R exchanges (`--iters`, 2000), each batch started by a barrier and timed
    /// as the slowest rank's span; the line reports the median, min and max per-exchange time
    /// over the batches, and the halos are checked again after them (`checksum`: the sum of
    /// all halo cells, as the C program prints it). No stencil is computed.
    fn halo2d(&self) -> Result<()> {
        let w = self.w;
        let mut dims = [0i32; 2];
        dims_create(w.size(), &mut dims)?;
        let cart = w
            .cart_create(&dims, &[true, true], false)?
            .expect("a grid of all the ranks holds every rank");
        let me = cart.rank();
        let (up, down) = cart.cart_shift(0, 1)?;
        let (left, right) = cart.cart_shift(1, 1)?;
        let iters = self.o.iters.unwrap_or(2000);
        let batches = self.o.reps.unwrap_or(10) as u64;
        let warmup = self.o.warmup.unwrap_or(200);
        if batches == 0 || iters < batches {
            eprintln!("earlybird-bench: halo2d needs --iters >= --reps >= 1");
            usage()
        }
        let per = iters / batches;
        let f = Datatype::of::<f64>();
        for bytes in self.sizes(&[8192]) {
            if bytes == 0 || bytes % 8 != 0 {
                eprintln!("earlybird-bench: a halo2d message is 8 bytes per cell; {bytes} is not");
                usage()
            }
            let (n, ld) = (bytes / 8, bytes / 8 + 2);
            let h = Halo {
                n,
                row: Datatype::contiguous(n, &f)?,
                col: Datatype::vector(n, 1, ld as isize, &f)?,
                peers: [up, down, left, right],
            };
            h.row.commit()?;
            h.col.commit()?;
            let edge = |i: usize| i == 0 || i == ld - 1;
            let mut g: Vec<f64> = (0..ld * ld)
                .map(|x| {
                    let (i, j) = (x / ld, x % ld);
                    if edge(i) || edge(j) {
                        -1.0
                    } else {
                        cell(me, i, j)
                    }
                })
                .collect();
            {
                let (out, mut into) = h.views(&mut g)?;
                h.exchange(&cart, &out, &mut into)?;
            }
            h.verify(&cart, &g, "first exchange")?;
            let mut us = Vec::with_capacity(batches as usize);
            {
                let (out, mut into) = h.views(&mut g)?;
                for _ in 0..warmup {
                    h.exchange(&cart, &out, &mut into)?;
                }
                for _ in 0..batches {
                    cart.barrier()?;
                    let t0 = std::time::Instant::now();
                    for _ in 0..per {
                        h.exchange(&cart, &out, &mut into)?;
                    }
                    let t = reduce_to_root(&cart, &[t0.elapsed().as_secs_f64()], &Op::MAX)?;
                    us.push(t[0] / per as f64 * 1e6);
                }
            }
            let checksum = h.verify(&cart, &g, "after the timed batches")?;
            self.emit(
                "halo2d",
                bytes,
                per * batches,
                stats(us),
                &format!(",\"checksum\":{checksum:.1}"),
            );
            for (name, how) in [
                ("halo2d_fence", RmaSync::Fence),
                ("halo2d_counter", RmaSync::Counter),
            ] {
                let mut us = Vec::with_capacity(batches as usize);
                let checksum = self.halo2d_rma(&cart, &h, &mut g, how, &mut us)?;
                self.emit(
                    name,
                    bytes,
                    per * batches,
                    stats(us),
                    &format!(",\"checksum\":{checksum:.1}"),
                );
            }
        }
        Ok(())
    }
}
