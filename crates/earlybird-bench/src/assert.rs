//! `assert`: each assertion's point, with and without it (seed 002). Every line carries
//! `"assertion":"NAME"` and `"with":true|false`, so a pair reads as a ratio.
//!
//! Communicator assertions are measured in one launch, on duplicates of the world: one
//! with the MPI 4 key `mpi_assert_no_any_tag`, one with `mpi_assert_no_any_source`, one
//! with neither:
//!
//! - `match_tags` (NO_ANY_TAG): rank 0 posts 512 receives from rank 1 with tags 0..511, then
//!   rank 1 sends 8-byte messages with tags 511..0 (each meets the receive furthest down the
//!   queue); time per message.
//! - `match_sources` (NO_ANY_SOURCE, 3 ranks or more; the duplicate asserts only this one):
//!   rank 0 posts 128 receives from each other rank in turn, then the ranks send theirs in
//!   tag order, the last rank first, each once the one after it is done (so every message
//!   meets the receives of the sources before it still posted); time per message.
//! - `latency` 8 B and `bw` 1 MiB (NO_ANY_SOURCE): as the benches of those names.
//!
//! Init-time assertions hold for a whole launch: `"with"` says whether this launch made the
//! assertion (`EARLYBIRD_ASSERTIONS`); `bench/assert.sh` alternates launches with and without.
//!
//! - `eager_burst` (NO_EAGER_THROTTLE): both ranks send 2 MiB to each other in messages of
//!   1 KiB, then of 8 KiB, before posting the receives; time per message.
//! - `msgrate` 8 B (NO_EAGER_THROTTLE), as the bench of that name.
//! - `allreduce` 8 B and 1 MiB (NO_REDUCE_CONSTRAINT), sum of doubles, max over ranks.
//! - `halo_struct` (NO_DATATYPE_XLATE): 1024 structs of 28 bytes with 4 bytes of padding
//!   each, exchanged both ways with `sendrecv`; time per exchange. `halo_struct_gapfree`:
//!   the same with 32-byte structs without a gap.

use super::{stats, Bench, Opts, LINE_TAG};
use earlybird::{scope, wait_all, Assertions, Comm, Equivalence, Info, Op, Request, Result};

/// `wait_all` on `reqs` through references: an instantiation of its own, so that the
/// `msgrate` and `bw` loops, which call `wait_all` on requests, keep theirs to themselves
/// (with a second caller LTO inlines it differently there, some 10% slower).
fn wait_each(reqs: &mut [Request<'_>]) -> Result<()> {
    let mut refs: Vec<&mut Request<'_>> = reqs.iter_mut().collect();
    wait_all(&mut refs[..]).map(drop)
}

/// A struct with padding (28 bytes of data in 32), as halo cells of particles often are.
#[derive(Clone, Copy, Debug, Default, Equivalence)]
#[repr(C)]
struct Particle {
    pos: [f64; 3],
    id: i32,
}

/// The same particle without a gap (32 bytes of data): its datatype is one block.
#[derive(Clone, Copy, Debug, Default, Equivalence)]
#[repr(C)]
struct DenseParticle {
    pos: [f64; 3],
    id: i32,
    weight: f32,
}

impl<'a> Bench<'a> {
    /// [`timed`](Bench::timed), per one of the `per` messages each run moves.
    fn timed_per(
        &self,
        iters: u64,
        per: f64,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<Vec<f64>> {
        Ok(self
            .timed(iters, |_| f())?
            .into_iter()
            .map(|t| t / per)
            .collect())
    }

    /// This bench on communicator `w` with options `o`, the lines it prints from now on
    /// tagged with `assertion` and `with`.
    fn tagged(&self, w: &'a Comm, o: &'a Opts, assertion: &str, with: bool) -> Bench<'a> {
        LINE_TAG
            .with(|t| *t.borrow_mut() = format!(",\"assertion\":\"{assertion}\",\"with\":{with}"));
        Bench {
            w,
            o,
            mode: self.mode,
        }
    }

    pub(crate) fn assert(&self) -> Result<()> {
        let w = self.w;
        let init = w.assertions();
        // Each communicator assertion on a duplicate of its own, against one without.
        let with_key = |k: &str| -> Result<Comm> {
            let mut i = Info::new();
            i.set(k, "true")?;
            w.dup_with_info(&i)
        };
        let plain = w.dup_with_info(&Info::new())?;
        let by_tag = with_key("mpi_assert_no_any_tag")?;
        let by_source = with_key("mpi_assert_no_any_source")?;
        let at = |sizes: &[usize]| Opts {
            sizes: Some(sizes.to_vec()),
            ..self.o.clone()
        };
        let (o8, o1m) = (at(&[8]), at(&[1 << 20]));
        for (t, s, with) in [(&plain, &plain, false), (&by_tag, &by_source, true)] {
            self.tagged(t, self.o, "NO_ANY_TAG", with)
                .match_depth("match_tags", 512, true)?;
            if w.size() >= 3 {
                self.tagged(s, self.o, "NO_ANY_SOURCE", with).match_depth(
                    "match_sources",
                    128,
                    false,
                )?;
            }
            self.tagged(s, &o8, "NO_ANY_SOURCE", with).latency(false)?;
            self.tagged(s, &o1m, "NO_ANY_SOURCE", with)
                .windowed("bw", &[], 200, 1 << 30, 10)?;
        }
        let has = |a: Assertions| init.contains(a);
        let t = has(Assertions::NO_EAGER_THROTTLE);
        self.tagged(w, self.o, "NO_EAGER_THROTTLE", t)
            .eager_burst()?;
        self.tagged(w, &o8, "NO_EAGER_THROTTLE", t).windowed(
            "msgrate",
            &[],
            20_000,
            u64::MAX,
            10,
        )?;
        self.tagged(
            w,
            self.o,
            "NO_REDUCE_CONSTRAINT",
            has(Assertions::NO_REDUCE_CONSTRAINT),
        )
        .allreduce_points()?;
        self.tagged(
            w,
            self.o,
            "NO_DATATYPE_XLATE",
            has(Assertions::NO_DATATYPE_XLATE),
        )
        .halo_struct()?;
        plain.free()?;
        by_tag.free()?;
        by_source.free()
    }

    /// `depth` receives per sender posted at rank 0, then the senders' messages (see the
    /// module doc); `reversed`: tags sent last-posted first.
    fn match_depth(&self, name: &str, depth: i32, reversed: bool) -> Result<()> {
        let w = self.w;
        let (me, size) = (w.rank(), w.size());
        let iters = self.o.iters.unwrap_or(20);
        let msgs = (depth * (size - 1)) as f64;
        // One buffer per receive (`irecv`, not `irecv_scratch`: a second caller of that one
        // changes how the `bw` and `msgrate` loops compile, by some 10%).
        let mut bufs = vec![[0u64; 1]; msgs as usize];
        let per = self.timed_per(iters, msgs, || {
            if me == 0 {
                scope(|s| -> Result<()> {
                    let mut reqs = Vec::with_capacity(msgs as usize);
                    let mut free = bufs.iter_mut();
                    for src in 1..size {
                        for t in 0..depth {
                            let b = free.next().expect("one per receive");
                            reqs.push(w.irecv(s, b, src, t)?);
                        }
                    }
                    // The last source first, each once the one after it is done: every message
                    // meets the receives of all the sources before its own still posted.
                    for src in (1..size).rev() {
                        w.send(&[0u8; 0], src, depth)?;
                        let mine = (src - 1) as usize * depth as usize;
                        wait_each(&mut reqs[mine..mine + depth as usize])?;
                    }
                    Ok(())
                })
            } else {
                w.recv(&mut [0u8; 0], 0, depth)?;
                for k in 0..depth {
                    let t = if reversed { depth - 1 - k } else { k };
                    w.send(&[t as u64], 0, t)?;
                }
                Ok(())
            }
        })?;
        self.emit(name, 8, iters, stats(per), &format!(",\"depth\":{depth}"));
        Ok(())
    }

    /// Ranks 0 and 1 send 2 MiB to each other in messages of each size (default 1 KiB and
    /// 8 KiB), then receive them (see the module doc).
    fn eager_burst(&self) -> Result<()> {
        let w = self.w;
        let me = w.rank();
        for len in self.sizes(&[1 << 10, 8 << 10]) {
            let n = (2 << 20) / len.max(1);
            let sbuf = vec![3u8; len];
            // One buffer per receive (see `match_depth`).
            let mut rbufs = vec![vec![0u8; len]; n];
            let iters = self.o.iters.unwrap_or(100);
            let per = self.timed_per(iters, n as f64, || {
                if me > 1 {
                    return Ok(());
                }
                let peer = 1 - me;
                scope(|s| -> Result<()> {
                    let mut reqs = Vec::with_capacity(2 * n);
                    for i in 0..n {
                        reqs.push(w.isend(s, &sbuf[..], peer, i as i32)?);
                    }
                    for (i, b) in rbufs.iter_mut().enumerate() {
                        reqs.push(w.irecv(s, &mut b[..], peer, i as i32)?);
                    }
                    wait_each(&mut reqs)?;
                    Ok(())
                })
            })?;
            self.emit(
                "eager_burst",
                len,
                iters,
                stats(per),
                &format!(",\"messages\":{n}"),
            );
        }
        Ok(())
    }

    /// Allreduce (sum of doubles) of 8 B and 1 MiB.
    fn allreduce_points(&self) -> Result<()> {
        let w = self.w;
        for bytes in [8usize, 1 << 20] {
            let n = bytes / 8;
            let sbuf = vec![1.5f64; n];
            let mut rbuf = vec![0.0f64; n];
            let iters = self
                .o
                .iters
                .unwrap_or(if bytes == 8 { 10_000 } else { 200 });
            let per = self.timed_per(iters, 1.0, || {
                w.allreduce(&sbuf[..], &mut rbuf[..], &Op::SUM)
            })?;
            self.emit("allreduce", bytes, iters, stats(per), "");
        }
        Ok(())
    }

    /// 1024 structs each way between ranks 0 and 1 (`sendrecv`): padded ones
    /// (`halo_struct`) and gap-free ones (`halo_struct_gapfree`).
    fn halo_struct(&self) -> Result<()> {
        const N: usize = 1024;
        let padded: Vec<Particle> = (0..N)
            .map(|i| Particle {
                pos: [i as f64; 3],
                id: i as i32,
            })
            .collect();
        let dense: Vec<DenseParticle> = (0..N)
            .map(|i| DenseParticle {
                pos: [i as f64; 3],
                id: i as i32,
                weight: 0.5,
            })
            .collect();
        self.exchange("halo_struct", &padded, N * 28)?;
        self.exchange("halo_struct_gapfree", &dense, N * 32)
    }

    /// `sendrecv` of `out` both ways between ranks 0 and 1; time per exchange.
    fn exchange<T: Equivalence + Default + Clone>(
        &self,
        name: &str,
        out: &[T],
        bytes: usize,
    ) -> Result<()> {
        let w = self.w;
        let mut inb = vec![T::default(); out.len()];
        let iters = self.o.iters.unwrap_or(2000);
        let me = w.rank();
        let per = self.timed_per(iters, 1.0, || {
            if me > 1 {
                return Ok(());
            }
            let peer = 1 - me;
            w.sendrecv(out, peer, 3, &mut inb[..], peer, 3).map(|_| ())
        })?;
        self.emit(name, bytes, iters, stats(per), "");
        Ok(())
    }
}
