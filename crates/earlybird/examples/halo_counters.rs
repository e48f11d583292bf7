//! The three halo examples of seed 001 (section 1.2.4, "Flexible RMA Synchronization"), on a
//! Jacobi relaxation over a periodic 2-D grid of ranks, each checked bit for bit against the
//! same relaxation whose halos travel by `sendrecv`.
//!
//! ```text
//! ebrun -n 4 target/release/examples/halo_counters [N [STEPS]]   (default N = 32, STEPS = 50)
//! ```
//!
//! Each rank owns an N x N block in a window of (N+2) x (N+2) doubles (row-major, the outer
//! ring is the halo) and has four neighbours (up, down, left, right; some may be the same rank,
//! or itself). Every step updates the block, then puts its boundary rows and columns into the
//! neighbours' halos (columns through a vector target datatype); the counter
//! `my_halos_updated` (count 4) says when all four of its own halos have arrived. The
//! variants differ in how a rank learns that a neighbour's halo is free to be written:
//!
//! - **A**: a barrier;
//! - **B**: a zero-byte message from the neighbour, each put made once its message is in;
//! - **C**: a second counter, `dest_halos_free`, which each neighbour signals with a sync ops
//!   request of mode 0 (no RMA, only the signal).
//!
//! `tests/halo_counters.rs` includes this file as a module and runs [`run`] as thread and
//! process jobs of 1 to 8 ranks, and runs the built example under `ebrun -n 4`.

use earlybird::{
    dims_create, scope, start_all, wait_all, wait_any, At, Comm, Datatype, Info, Request, Result,
    SyncCounter, Win, MODE_WIN_PUT,
};
use std::process::ExitCode;

const ALPHA: f64 = 0.2;
/// Directions: up, down, left, right. A message travelling in direction `d` has tag `d`, so
/// that when two neighbours are the same rank each message still finds its halo.
const DIRS: usize = 4;
const SYNCTAG: i32 = 77;

/// The seed's three variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    A,
    B,
    C,
}

/// One rank's block and neighbours.
struct Block {
    n: usize,
    nbr: [i32; DIRS],
    /// A halo column as the target sees it: n doubles one local row apart.
    col: Datatype,
}

impl Block {
    fn ld(&self) -> usize {
        self.n + 2
    }

    /// My boundary next to direction `d`, packed.
    fn boundary(&self, g: &[f64], d: usize) -> Vec<f64> {
        let (n, ld) = (self.n, self.ld());
        match d {
            0 => g[ld + 1..ld + 1 + n].to_vec(),
            1 => g[n * ld + 1..n * ld + 1 + n].to_vec(),
            2 => (1..=n).map(|i| g[i * ld + 1]).collect(),
            _ => (1..=n).map(|i| g[i * ld + n]).collect(),
        }
    }

    /// Where what travels in direction `d` lands in the receiver's array (its halo on the
    /// sender's side), and whether it is a column.
    fn landing(&self, d: usize) -> (usize, bool) {
        let (n, ld) = (self.n, self.ld());
        match d {
            0 => ((n + 1) * ld + 1, false),
            1 => (1, false),
            2 => (ld + n + 1, true),
            _ => (ld, true),
        }
    }

    /// Unpack `v` at `landing(d)` of `g`.
    fn land(&self, g: &mut [f64], d: usize, v: &[f64]) {
        let (at, column) = self.landing(d);
        for (k, x) in v.iter().enumerate() {
            g[if column { at + k * self.ld() } else { at + k }] = *x;
        }
    }

    /// One Jacobi step of the interior of `g`.
    fn update(&self, g: &mut [f64]) {
        let (n, ld) = (self.n, self.ld());
        let src = g.to_vec();
        for i in 1..=n {
            for j in 1..=n {
                let c = i * ld + j;
                let around = (src[c - ld] + src[c + ld]) + (src[c - 1] + src[c + 1]);
                g[c] = src[c] + ALPHA * (around - 4.0 * src[c]);
            }
        }
    }

    /// The reference exchange: every boundary by `sendrecv`.
    fn sendrecv_halos(&self, c: &Comm, g: &mut [f64]) -> Result<()> {
        for d in 0..DIRS {
            let out = self.boundary(g, d);
            let mut inn = vec![0.0f64; self.n];
            // Mine goes in direction d; what lands on my side d came from direction d ^ 1.
            c.sendrecv(
                &out[..],
                self.nbr[d],
                d as i32,
                &mut inn[..],
                self.nbr[d ^ 1],
                d as i32,
            )?;
            self.land(g, d, &inn);
        }
        Ok(())
    }

    /// Put my boundary `d` into the neighbour's halo.
    fn put(&self, win: &Win, g: &[f64], d: usize) -> Result<()> {
        let out = self.boundary(g, d);
        let (at, column) = self.landing(d);
        if column {
            win.put_to(&out[..], self.nbr[d], at as isize, At::new(1, &self.col))
        } else {
            win.put(&out[..], self.nbr[d], at as isize)
        }
    }
}

/// The window's block as a vector, and the interior written back.
fn load(win: &Win, len: usize) -> Result<Vec<f64>> {
    let mut g = vec![0.0; len];
    win.local::<f64>()?.read(0, &mut g)?;
    Ok(g)
}

fn store_interior(win: &Win, b: &Block, g: &[f64]) -> Result<()> {
    let l = win.local::<f64>()?;
    for i in 1..=b.n {
        let at = i * b.ld() + 1;
        l.write(at, &g[at..at + b.n])?;
    }
    Ok(())
}

/// Send each neighbour this rank's `mine` and receive theirs: `theirs[d]` is the counter of
/// the neighbour in direction `d`.
fn exchange_counters(c: &Comm, b: &Block, mine: SyncCounter) -> Result<[SyncCounter; DIRS]> {
    let mut theirs = [SyncCounter::NULL; DIRS];
    for d in 0..DIRS {
        // Everyone sends in direction d: mine goes to nbr[d], and the counter that arrives
        // is that of the neighbour on the other side.
        let mut got = [SyncCounter::NULL];
        c.sendrecv(
            &[mine][..],
            b.nbr[d],
            d as i32,
            &mut got[..],
            b.nbr[d ^ 1],
            d as i32,
        )?;
        theirs[d ^ 1] = got[0];
    }
    Ok(theirs)
}

/// `steps` steps of variant `v` from the initial block `g0`; the final block.
fn with_counters(
    c: &Comm,
    b: &Block,
    win: &Win,
    v: Variant,
    g0: &[f64],
    steps: usize,
) -> Result<Vec<f64>> {
    win.local::<f64>()?.write(0, g0)?;
    c.barrier()?;
    let none = Info::new();
    let mut mine = win.alloc_sync_objects(if v == Variant::C { 2 } else { 1 }, &none)?;
    let to_halos_updated = exchange_counters(c, b, mine[0])?;
    let mut my_halos_updated_req = win.sync_object_init(mine[0], DIRS as i64, &none)?;
    let mut put_req: Vec<Request> = (0..DIRS)
        .map(|d| win.sync_ops_init(b.nbr[d], MODE_WIN_PUT, to_halos_updated[d], &none))
        .collect::<Result<_>>()?;
    // Variant C: the second counter, and a signal-only request per neighbour.
    let (mut dest_halos_free_req, mut free_req) = if v == Variant::C {
        let to_halos_free = exchange_counters(c, b, mine[1])?;
        let obj = win.sync_object_init(mine[1], DIRS as i64, &none)?;
        let frees: Vec<Request> = (0..DIRS)
            .map(|d| win.sync_ops_init(b.nbr[d], 0, to_halos_free[d], &none))
            .collect::<Result<_>>()?;
        (Some(obj), frees)
    } else {
        (None, Vec::new())
    };
    let len = b.ld() * b.ld();
    let nothing = earlybird::ScratchBuffer::new(0);
    for _ in 0..steps {
        start_all(&mut put_req)?;
        my_halos_updated_req.start()?;
        if let Some(r) = dest_halos_free_req.as_mut() {
            r.start()?;
        }
        let mut g = load(win, len)?;
        b.update(&mut g);
        store_interior(win, b, &g)?;
        match v {
            Variant::A => {
                // My halos are free to be updated: a barrier says so to everyone.
                c.barrier()?;
                for d in 0..DIRS {
                    b.put(win, &g, d)?;
                }
            }
            Variant::B => scope(|s| -> Result<()> {
                // A zero-byte message to each neighbour says my halos are free; each put
                // follows the message of the neighbour it writes.
                let mut recvs = Vec::with_capacity(DIRS);
                let mut sends = Vec::with_capacity(DIRS);
                for d in 0..DIRS {
                    recvs.push(c.irecv_scratch(s, &nothing, b.nbr[d], SYNCTAG)?);
                    sends.push(c.isend(s, &[0u8; 0][..], b.nbr[d], SYNCTAG)?);
                }
                for _ in 0..DIRS {
                    let (d, _) = wait_any(&mut recvs)?.expect("a receive per neighbour");
                    b.put(win, &g, d)?;
                }
                wait_all(&mut sends)?;
                Ok(())
            })?,
            Variant::C => {
                start_all(&mut free_req)?;
                wait_all(&mut free_req)?;
                dest_halos_free_req
                    .as_mut()
                    .expect("variant C has it")
                    .wait()?;
                for d in 0..DIRS {
                    b.put(win, &g, d)?;
                }
            }
        }
        wait_all(&mut put_req)?;
        my_halos_updated_req.wait()?;
    }
    let g = load(win, len)?;
    drop((put_req, my_halos_updated_req, free_req, dest_halos_free_req));
    c.barrier()?;
    win.free_sync_objects(&mut mine)?;
    Ok(g)
}

/// What a rank found.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub dims: [i32; 2],
    pub n: usize,
    pub steps: usize,
    /// Per variant: cells of this rank's block that differ from the sendrecv run.
    pub mismatches: [usize; 3],
    /// Cells that changed from the initial block (the run did something).
    pub changed: usize,
}

impl Outcome {
    pub(crate) fn line(&self) -> String {
        let what = format!(
            "{}x{} blocks on {} ranks ({}x{}), {} steps",
            self.n,
            self.n,
            self.dims[0] * self.dims[1],
            self.dims[0],
            self.dims[1],
            self.steps
        );
        if self.mismatches == [0; 3] {
            format!(
                "halo_counters: OK: {what}; variants A, B and C identical to sendrecv, bit for bit"
            )
        } else {
            format!(
                "halo_counters: MISMATCH: {what}; cells differing from sendrecv in A, B, C: {:?}",
                self.mismatches
            )
        }
    }
}

/// Run the three variants and the reference on all ranks of `world`; every rank's outcome,
/// summed over ranks (the same on every rank).
pub(crate) fn run(world: &Comm, n: usize, steps: usize) -> Result<Outcome> {
    let mut dims = [0i32; 2];
    dims_create(world.size(), &mut dims)?;
    let cart = world
        .cart_create(&dims, &[true, true], true)?
        .expect("a grid of all the ranks holds every rank");
    let coords = cart.cart_get()?.coords;
    let (up, down) = cart.cart_shift(0, 1)?;
    let (left, right) = cart.cart_shift(1, 1)?;
    let ld = n + 2;
    let col = Datatype::vector(n, 1, ld as isize, &Datatype::of::<f64>())?;
    col.commit()?;
    let b = Block {
        n,
        nbr: [up, down, left, right],
        col,
    };
    // The initial block, halos included, from the global periodic field.
    let (rows, cols) = (dims[0] as usize * n, dims[1] as usize * n);
    let (i0, j0) = (coords[0] as usize * n, coords[1] as usize * n);
    let field = |i: usize, j: usize| {
        ((i * 31 + j * 17) % 97) as f64 / 97.0 + if i < rows / 2 { 50.0 } else { 0.0 }
    };
    let mut g0 = vec![0.0f64; ld * ld];
    for i in 0..ld {
        for j in 0..ld {
            let gi = (i0 + rows + i - 1) % rows;
            let gj = (j0 + cols + j - 1) % cols;
            g0[i * ld + j] = field(gi, gj);
        }
    }
    let mut want = g0.clone();
    for _ in 0..steps {
        b.update(&mut want);
        b.sendrecv_halos(&cart, &mut want)?;
    }
    let win = cart.win_allocate(ld * ld * 8, 8, &Info::new())?;
    let mut mine = [0u64; 4];
    for (k, v) in [Variant::A, Variant::B, Variant::C].into_iter().enumerate() {
        let got = with_counters(&cart, &b, &win, v, &g0, steps)?;
        mine[k] = (1..=n)
            .flat_map(|i| (1..=n).map(move |j| i * ld + j))
            .filter(|&c| got[c].to_bits() != want[c].to_bits())
            .count() as u64;
    }
    mine[3] = (0..ld * ld).filter(|&c| g0[c] != want[c]).count() as u64;
    win.free()?;
    let mut all = [0u64; 4];
    cart.allreduce(&mine[..], &mut all[..], &earlybird::Op::SUM)?;
    Ok(Outcome {
        dims,
        n,
        steps,
        mismatches: [all[0] as usize, all[1] as usize, all[2] as usize],
        changed: all[3] as usize,
    })
}

#[allow(dead_code)] // the tests include this file for `run`
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| {
        args.get(i)
            .map_or(Some(d), |a| a.parse().ok().filter(|&v| v > 0))
    };
    let (Some(n), Some(steps)) = (num(0, 32), num(1, 50)) else {
        eprintln!("usage: halo_counters [N [STEPS]] (N cells per side of a rank's block, STEPS steps; both positive)");
        return ExitCode::from(2);
    };
    let r = (|| -> Result<bool> {
        let u = earlybird::init()?;
        let o = run(u.world(), n, steps)?;
        if u.world().rank() == 0 {
            println!("{}", o.line());
        }
        Ok(o.mismatches == [0; 3] && o.changed > 0)
    })();
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("halo_counters: {e}");
            ExitCode::FAILURE
        }
    }
}
