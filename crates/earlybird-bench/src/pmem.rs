//! `pmem`: windows on persistent memory (seed 004), against the floor of the file system
//! they live on. Per size (default 1 MiB, one window part per rank):
//!
//! - `pmem_checkpoint`: a `fence_persist` that commits a version after the owner rewrote all
//!   of its memory (`changed_bytes` = the size) or 1% of it (one run at the start);
//! - `pmem_floor`: `pwrite` + `fdatasync` of the same number of bytes over a file already
//!   written, on the same file system, by the same binary: what any durable write costs;
//! - `pmem_fence_unchanged` (a `fence_persist` when nothing changed) beside `fence`.
//!
//! Only the synchronisation is timed (not the program's stores); a repeat's time is the
//! maximum over ranks. The root is `$EARLYBIRD_PMEM_ROOT`, else the temporary directory.

use super::{stats, Bench};
use earlybird::{pmem, Info, Op, Result};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::Instant;

impl Bench<'_> {
    /// Per repeat, the mean over `iters` runs of the time `f` reports (max over ranks), in
    /// microseconds, after one warm-up repeat.
    fn timed_part(&self, iters: u64, mut f: impl FnMut(u64) -> Result<f64>) -> Result<Vec<f64>> {
        let mut per = Vec::new();
        for rep in 0..=self.reps() {
            self.w.barrier()?;
            let mut total = 0.0;
            for i in 0..iters {
                total += f(i)?;
            }
            let mine = [total / iters as f64 * 1e6];
            let mut max = [0.0f64];
            self.w.allreduce(&mine[..], &mut max[..], &Op::MAX)?;
            if rep > 0 {
                per.push(max[0]);
            }
        }
        Ok(per)
    }

    pub(crate) fn pmem(&self) -> Result<()> {
        let w = self.w;
        let base = std::env::var_os("EARLYBIRD_PMEM_ROOT")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let mut id = [std::process::id()];
        w.bcast(&mut id[..], 0)?;
        let root = base.join(format!("eb-bench-pmem-{}", id[0]));
        if w.rank() == 0 {
            std::fs::create_dir_all(&root).expect("the benchmark's root directory");
        }
        w.barrier()?;
        pmem::set_root_path(&root)?;
        for bytes in self.sizes(&[1 << 20]) {
            let iters = self.o.iters.unwrap_or(50);
            let mut info = Info::new();
            for (k, v) in [
                ("pmem_is_pmem", "true"),
                ("pmem_name", "bench"),
                ("pmem_mode", "expand"),
            ] {
                info.set(k, v)?;
            }
            if let Ok(v) = std::env::var("EB_BENCH_PMEM_IN_RAM") {
                info.set("pmem_allocate_in_ram", &v)?;
            }
            let win = w.win_allocate(bytes, 1, &info)?;
            win.fence(0)?;
            let local = win.local::<u8>()?;
            let mut img = vec![0u8; bytes];
            let one_pct = (bytes / 100).max(1);
            for (name, changed) in [("pmem_checkpoint", bytes), ("pmem_checkpoint", one_pct)] {
                let per = self.timed_part(iters, |i| {
                    for b in img[..changed].iter_mut() {
                        *b = b.wrapping_add(1 + i as u8);
                    }
                    local.write(0, &img[..changed])?;
                    let t = Instant::now();
                    win.fence_persist(0)?;
                    Ok(t.elapsed().as_secs_f64())
                })?;
                self.emit(
                    name,
                    bytes,
                    iters,
                    stats(per),
                    &format!(",\"changed_bytes\":{changed}"),
                );
            }
            let per = self.timed_part(iters * 20, |_| {
                let t = Instant::now();
                win.fence_persist(0)?;
                Ok(t.elapsed().as_secs_f64())
            })?;
            self.emit("pmem_fence_unchanged", bytes, iters * 20, stats(per), "");
            let per = self.timed_part(iters * 20, |_| {
                let t = Instant::now();
                win.fence(0)?;
                Ok(t.elapsed().as_secs_f64())
            })?;
            self.emit("fence", bytes, iters * 20, stats(per), "");
            win.free()?;
            // The floor: pwrite + fdatasync over a written file of this rank's.
            let path = root.join(format!("floor-{}", w.rank()));
            let mut f = std::fs::File::create(&path).expect("the floor's file");
            f.write_all(&img).expect("the floor's file");
            f.sync_all().expect("the floor's file");
            for changed in [bytes, one_pct] {
                let per = self.timed_part(iters, |i| {
                    img[0] = i as u8;
                    let t = Instant::now();
                    f.write_all_at(&img[..changed], 0).expect("pwrite");
                    f.sync_data().expect("fdatasync");
                    Ok(t.elapsed().as_secs_f64())
                })?;
                self.emit("pmem_floor", changed, iters, stats(per), "");
            }
            drop(f);
            let _ = std::fs::remove_file(&path);
            w.barrier()?;
            pmem::delete("bench")?;
        }
        w.barrier()?;
        if w.rank() == 0 {
            let _ = std::fs::remove_dir_all(&root);
        }
        Ok(())
    }
}
