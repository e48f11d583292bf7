//! `rma`: one-sided communication, as `bench/rma.c` measures it on MPICH and Open MPI (2
//! ranks): the 1-D ring halo of bench-ref's `rma_halo.c` with fence, PSCW and lock_all +
//! flush + accumulate notification, and (earlybird only, seed 001) with sync counters
//! (`rma_halo_counter`: double-buffered halos, each read once its neighbour signalled that it
//! filled it, one counter per neighbour); put + flush latency; fetch_and_op latency; the rate of
//! 8-byte accumulates from one origin; and the memcpy of 64 KiB the fence halo is judged
//! against. A repeat's time is the maximum over ranks.

use super::{stats, Bench};
use earlybird::{
    start_all, Info, Op, Result, SyncCounter, MODE_NOCHECK, MODE_NOSUCCEED, MODE_WIN_PUT,
};

const HALO_OFF: usize = 64;

impl Bench<'_> {
    pub(crate) fn rma(&self) -> Result<()> {
        let w = self.w;
        let (r, n) = (w.rank(), w.size());
        let (left, right) = ((r + n - 1) % n, (r + 1) % n);
        let sizes = self.sizes(&[8, 64 << 10]);
        let maxs = sizes.iter().copied().max().unwrap_or(8).max(8);
        // Two halo slots per side (the counter variant double-buffers).
        let win = w.win_allocate(HALO_OFF + 4 * maxs, 1, &Info::new())?;
        let g = w.group();
        let nbrs = if left == right {
            g.incl(&[left])?
        } else {
            g.incl(&[left, right])?
        };
        let mut sbuf = vec![0u8; maxs];
        let mut stamp = 0i64;
        // Sync counters (seed 001), every request restarting by itself: one counter per
        // neighbour, which only that neighbour signals (a counter several neighbours signal
        // counts a fast one's signals for a slow one's). The halos are double-buffered, so a
        // neighbour's signal that it filled my slot of iteration i also says it has done with
        // its slot of iteration i - 1 (it read it before its puts of iteration i), which is
        // the slot I fill next; no other signal is needed.
        let mut restart = Info::new();
        restart.set("restart", "true")?;
        let peers: Vec<i32> = if left == right {
            vec![left]
        } else {
            vec![left, right]
        };
        let k = peers.len();
        let mut mine = win.alloc_sync_objects(k, &Info::new())?;
        let mut theirs = vec![SyncCounter::NULL; k];
        for (d, &p) in peers.iter().enumerate() {
            // mine[d] goes to peers[d]; what arrives is the counter the neighbour on the
            // other side keeps for me.
            let mut got = [SyncCounter::NULL];
            let other = k - 1 - d;
            w.sendrecv(
                &mine[d..=d],
                p,
                7 + d as i32,
                &mut got[..],
                peers[other],
                7 + d as i32,
            )?;
            theirs[other] = got[0];
        }
        let mut puts = Vec::with_capacity(k);
        let mut filled = Vec::with_capacity(k);
        for d in 0..k {
            puts.push(win.sync_ops_init(peers[d], MODE_WIN_PUT, theirs[d], &restart)?);
            filled.push(win.sync_object_init(mine[d], 1, &restart)?);
        }
        start_all(&mut puts)?;
        start_all(&mut filled)?;
        for mode in ["fence", "pscw", "lock", "counter", "counter_signal"] {
            for &s in &sizes {
                let s = s.max(8);
                let iters = self.iters_for(10_000, 256 << 20, 2 * s as u64, 50);
                let offl = (HALO_OFF + maxs) as isize;
                let offr = HALO_OFF as isize;
                let per = match mode {
                    "fence" => {
                        win.fence(0)?;
                        let p = self.timed(iters, |_| {
                            stamp += 1;
                            sbuf[..8].copy_from_slice(
                                &((r as i64 + 1) * 1_000_000_000 + stamp).to_le_bytes(),
                            );
                            win.put(&sbuf[..s], left, offl)?;
                            win.put(&sbuf[..s], right, offr)?;
                            win.fence(0)
                        })?;
                        win.fence(MODE_NOSUCCEED)?;
                        p
                    }
                    "counter" => self.timed(iters, |_| {
                        stamp += 1;
                        sbuf[..8].copy_from_slice(
                            &((r as i64 + 1) * 1_000_000_000 + stamp).to_le_bytes(),
                        );
                        let twin = ((stamp % 2) as usize * 2 * maxs) as isize;
                        win.put(&sbuf[..s], left, offl + twin)?;
                        win.put(&sbuf[..s], right, offr + twin)?;
                        for q in puts.iter_mut().chain(filled.iter_mut()) {
                            q.wait()?;
                        }
                        Ok(())
                    })?,
                    "counter_signal" => self.timed(iters, |_| {
                        // The same with put_signal (beyond the seed): the last put to each
                        // neighbour carries the signal, no sync ops request to wait on.
                        stamp += 1;
                        sbuf[..8].copy_from_slice(
                            &((r as i64 + 1) * 1_000_000_000 + stamp).to_le_bytes(),
                        );
                        let twin = ((stamp % 2) as usize * 2 * maxs) as isize;
                        if k == 1 {
                            win.put(&sbuf[..s], left, offl + twin)?;
                            win.put_signal(&sbuf[..s], right, offr + twin, theirs[0])?;
                        } else {
                            win.put_signal(&sbuf[..s], left, offl + twin, theirs[0])?;
                            win.put_signal(&sbuf[..s], right, offr + twin, theirs[1])?;
                        }
                        for q in filled.iter_mut() {
                            q.wait()?;
                        }
                        Ok(())
                    })?,
                    "pscw" => self.timed(iters, |_| {
                        stamp += 1;
                        sbuf[..8].copy_from_slice(
                            &((r as i64 + 1) * 1_000_000_000 + stamp).to_le_bytes(),
                        );
                        let exp = win.post(&nbrs, 0)?;
                        let acc = win.start(&nbrs, 0)?;
                        acc.put(&sbuf[..s], left, offl)?;
                        acc.put(&sbuf[..s], right, offr)?;
                        acc.complete()?;
                        exp.wait()
                    })?,
                    _ => {
                        let all = win.lock_all(MODE_NOCHECK)?;
                        let local = win.local::<i64>()?;
                        let mut expected = local.get(0)?;
                        let p = self.timed(iters, |_| {
                            stamp += 1;
                            sbuf[..8].copy_from_slice(
                                &((r as i64 + 1) * 1_000_000_000 + stamp).to_le_bytes(),
                            );
                            all.put(&sbuf[..s], left, offl)?;
                            all.put(&sbuf[..s], right, offr)?;
                            all.flush_all()?;
                            all.accumulate(&[1i64][..], left, 0, &Op::SUM)?;
                            all.accumulate(&[1i64][..], right, 0, &Op::SUM)?;
                            all.flush_all()?;
                            expected += 2;
                            let mut v = 0i64;
                            loop {
                                all.fetch_and_op(&0i64, &mut v, r, 0, &Op::NO_OP)?;
                                all.flush(r)?;
                                if v >= expected {
                                    return Ok(());
                                }
                            }
                        })?;
                        all.unlock_all()?;
                        p
                    }
                };
                w.barrier()?;
                // The halos carry the neighbours' stamps.
                let l = win.local::<u8>()?;
                let mut h = [0u8; 8];
                l.read(HALO_OFF, &mut h)?;
                let lh = i64::from_le_bytes(h);
                l.read(HALO_OFF + maxs, &mut h)?;
                let rh = i64::from_le_bytes(h);
                let ok =
                    lh / 1_000_000_000 == left as i64 + 1 && rh / 1_000_000_000 == right as i64 + 1;
                assert!(
                    ok,
                    "rma_halo_{mode}: halos do not hold the neighbours' stamps"
                );
                self.emit(&format!("rma_halo_{mode}"), s, iters, stats(per), "");
            }
        }
        // Every signal was sent before the neighbours' last iteration ended; the barrier
        // below is after them all, and dropping the requests withdraws their runs.
        drop((puts, filled));
        w.barrier()?;
        win.free_sync_objects(&mut mine)?;
        win.free()?;
        self.rma_passive()?;
        // The floor: one memcpy of 64 KiB, warm.
        let src = vec![1u8; 64 << 10];
        let mut dst = vec![0u8; 64 << 10];
        let per = self.timed(20_000, |i| {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst)[0] = i as u8;
            Ok(())
        })?;
        self.emit("memcpy", 64 << 10, 20_000, stats(per), "");
        Ok(())
    }

    /// Rank 0 against rank 1's memory, rank 1 idle (no MPI call during the timed loops).
    fn rma_passive(&self) -> Result<()> {
        let w = self.w;
        let r = w.rank();
        let win = w.win_allocate(8 * 8, 8, &Info::new())?;
        let all = win.lock_all(MODE_NOCHECK)?;
        let iters = self.iters_for(100_000, u64::MAX, 1, 1);
        let per = self.timed(iters, |i| {
            if r == 0 {
                all.put(&[i as i64][..], 1, 2)?;
                all.flush(1)?;
            }
            Ok(())
        })?;
        self.emit("rma_put_flush", 8, iters, stats(per), "");
        let per = self.timed(iters, |_| {
            if r == 0 {
                let mut v = 0i64;
                all.fetch_and_op(&1i64, &mut v, 1, 0, &Op::SUM)?;
                all.flush(1)?;
            }
            Ok(())
        })?;
        self.emit("rma_fetch_and_op", 8, iters, stats(per), "");
        const BATCH: u64 = 256;
        let batches = (iters / BATCH).max(1);
        let per = self.timed(batches, |_| {
            if r == 0 {
                for _ in 0..BATCH {
                    all.accumulate(&[1i64][..], 1, 1, &Op::SUM)?;
                }
                all.flush(1)?;
            }
            Ok(())
        })?;
        let st = stats(per.iter().map(|t| t / BATCH as f64).collect());
        let rate = format!(",\"mmsg_per_s\":{:.3}", 1.0 / st.median);
        self.emit("rma_acc_rate", 8, batches * BATCH, st, &rate);
        all.unlock_all()?;
        w.barrier()?;
        if r == 1 {
            let l = win.local::<i64>()?;
            let reps = self.reps() as u64 + 1;
            assert_eq!(l.get(0)? as u64, iters * reps, "fetch_and_op count");
            assert_eq!(l.get(1)? as u64, batches * BATCH * reps, "accumulate count");
        }
        w.barrier()?;
        win.free()
    }
}
