//! 2-D heat diffusion (a Jacobi 5-point stencil) on a periodic Cartesian communicator; rank 0
//! gathers the grid and checks it, bit for bit, against the same computation done serially.
//!
//! ```text
//! ebrun -n 4 target/release/examples/heat2d [N [STEPS]]     (default N = 64, STEPS = 100)
//! ```
//!
//! `dims_create` shapes the ranks into a grid (4 ranks: 2 x 2; any count works, a prime one
//! as a column of ranks) and `cart_create` makes it periodic in both dimensions. Each rank
//! owns N x N cells in a local (N+2) x (N+2) array, row-major, whose outer ring is the halo.
//! Every step exchanges the four halos with `irecv`/`isend` and one `wait_all`: halo rows as a
//! contiguous type, halo columns as `Datatype::vector(N, 1, N+2)`, both through views of the
//! local array at the right origin. The receive views (into the halo) and the send views (of
//! the boundary cells) interleave in memory, so they come from one `split_views` call, which
//! checks that no byte received into is also sent from.
//!
//! The serial run applies the same `sweep` to the whole periodic grid, so every cell is the
//! same arithmetic on the same values in the same order: the results must be identical.
//!
//! `tests/heat2d.rs` includes this file as a module and runs [`run`] as thread and process
//! jobs of 1 to 8 ranks, and runs the built example itself under `ebrun -n 4`.

use earlybird::{dims_create, scope, split_views, wait_all, Comm, Datatype, Result, TypedMut};
use std::process::ExitCode;

/// Diffusion number (stable below 0.25 for the 5-point stencil).
const ALPHA: f64 = 0.2;

/// Tags name the direction a message travels, so that when both neighbours along a dimension
/// are the same rank (a periodic extent of 1 or 2) each message still lands in the right halo.
const TO_UP: i32 = 1;
const TO_DOWN: i32 = 2;
const TO_LEFT: i32 = 3;
const TO_RIGHT: i32 = 4;
const GATHER: i32 = 5;

/// The initial temperature of global cell `(i, j)`: a hot rectangle off the centre on a
/// ripple that differs along rows and columns (so that a transposed block would show).
pub(crate) fn initial(i: usize, j: usize, rows: usize, cols: usize) -> f64 {
    let hot = (rows / 4..rows / 2).contains(&i) && (cols / 3..cols * 5 / 6).contains(&j);
    let ripple = ((i * 31 + j * 17) % 97) as f64 / 97.0;
    if hot {
        100.0 + ripple
    } else {
        ripple
    }
}

/// One Jacobi sweep over the `rows x cols` interior of a grid with a one-cell halo (leading
/// dimension `cols + 2`): `dst = src + ALPHA * (neighbours - 4 src)`.
pub(crate) fn sweep(src: &[f64], dst: &mut [f64], rows: usize, cols: usize) {
    let ld = cols + 2;
    for i in 1..=rows {
        for j in 1..=cols {
            let c = i * ld + j;
            let around = (src[c - ld] + src[c + ld]) + (src[c - 1] + src[c + 1]);
            dst[c] = src[c] + ALPHA * (around - 4.0 * src[c]);
        }
    }
}

/// Fill the halo of a whole periodic grid from its opposite edges (the serial run's halo
/// exchange; corners are not used by the 5-point stencil).
fn wrap(g: &mut [f64], rows: usize, cols: usize) {
    let ld = cols + 2;
    for j in 1..=cols {
        g[j] = g[rows * ld + j];
        g[(rows + 1) * ld + j] = g[ld + j];
    }
    for i in 1..=rows {
        g[i * ld] = g[i * ld + cols];
        g[i * ld + cols + 1] = g[i * ld + 1];
    }
}

/// This rank's place in the grid.
struct Block {
    n: usize,
    up: i32,
    down: i32,
    left: i32,
    right: i32,
    /// `n` doubles: a halo row.
    row: Datatype,
    /// `n` doubles one local row apart: a halo column.
    col: Datatype,
}

impl Block {
    /// Exchange all four halos of `g` with the neighbours.
    fn exchange(&self, cart: &Comm, g: &mut [f64]) -> Result<()> {
        let (n, ld) = (self.n, self.n + 2);
        let at = |i: usize, j: usize| i * ld + j;
        // (origin in the local array, type, peer, tag)
        let sends = [
            (at(1, 1), &self.row, self.up, TO_UP),
            (at(n, 1), &self.row, self.down, TO_DOWN),
            (at(1, 1), &self.col, self.left, TO_LEFT),
            (at(1, n), &self.col, self.right, TO_RIGHT),
        ];
        let recvs = [
            (at(0, 1), &self.row, self.up, TO_DOWN),
            (at(n + 1, 1), &self.row, self.down, TO_UP),
            (at(1, 0), &self.col, self.left, TO_RIGHT),
            (at(1, n + 1), &self.col, self.right, TO_LEFT),
        ];
        let (out, mut into) = split_views(
            g,
            &sends.map(|(o, t, _, _)| (o, 1, t)),
            &recvs.map(|(o, t, _, _)| (o, 1, t)),
        )?;
        scope(|s| -> Result<()> {
            let mut reqs = Vec::with_capacity(8);
            for (v, &(_, _, peer, tag)) in into.iter_mut().zip(&recvs) {
                reqs.push(cart.irecv(s, v, peer, tag)?);
            }
            for (v, &(_, _, peer, tag)) in out.iter().zip(&sends) {
                reqs.push(cart.isend(s, v, peer, tag)?);
            }
            wait_all(&mut reqs)?;
            Ok(())
        })
    }
}

/// What rank 0 found.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The process grid.
    pub dims: [i32; 2],
    /// The global grid's extents.
    pub rows: usize,
    pub cols: usize,
    pub steps: usize,
    /// Sum of the initial and of the final field (equal up to rounding: diffusion on a
    /// torus conserves heat).
    pub initial_heat: f64,
    pub heat: f64,
    /// Cells whose final value differs from the initial one.
    pub changed: usize,
    /// Cells that differ from the serial run, and the first: `(i, j, parallel, serial)`.
    pub mismatches: usize,
    pub first_mismatch: Option<(usize, usize, f64, f64)>,
}

impl Outcome {
    /// The line the example prints.
    pub(crate) fn line(&self) -> String {
        let what = format!(
            "{}x{} grid on {} ranks ({}x{}), {} steps, heat {:.6} (initially {:.6})",
            self.rows,
            self.cols,
            self.dims[0] * self.dims[1],
            self.dims[0],
            self.dims[1],
            self.steps,
            self.heat,
            self.initial_heat
        );
        match self.first_mismatch {
            None => format!("heat2d: OK: {what}; identical to the serial run, bit for bit"),
            Some((i, j, p, s)) => format!(
                "heat2d: MISMATCH: {what}; {} of {} cells differ from the serial run, the first at ({i}, {j}): {p:e} instead of {s:e}",
                self.mismatches,
                self.rows * self.cols
            ),
        }
    }
}

/// Run `steps` steps with `n x n` cells per rank on a periodic grid of all the ranks of
/// `world`; rank 0 returns what it found, the others `None`.
pub(crate) fn run(world: &Comm, n: usize, steps: usize) -> Result<Option<Outcome>> {
    let mut dims = [0i32; 2];
    dims_create(world.size(), &mut dims)?;
    let cart = world
        .cart_create(&dims, &[true, true], true)?
        .expect("a grid of all the ranks holds every rank");
    let coords = cart.cart_get()?.coords;
    let (up, down) = cart.cart_shift(0, 1)?;
    let (left, right) = cart.cart_shift(1, 1)?;
    let f64t = Datatype::of::<f64>();
    let ld = n + 2;
    let b = Block {
        n,
        up,
        down,
        left,
        right,
        row: Datatype::contiguous(n, &f64t)?,
        col: Datatype::vector(n, 1, ld as isize, &f64t)?,
    };
    b.row.commit()?;
    b.col.commit()?;

    let (rows, cols) = (dims[0] as usize * n, dims[1] as usize * n);
    let (i0, j0) = (coords[0] as usize * n, coords[1] as usize * n);
    let mut cur = vec![0.0f64; ld * ld];
    for i in 1..=n {
        for j in 1..=n {
            cur[i * ld + j] = initial(i0 + i - 1, j0 + j - 1, rows, cols);
        }
    }
    let mut next = cur.clone();
    for _ in 0..steps {
        b.exchange(&cart, &mut cur)?;
        sweep(&cur, &mut next, n, n);
        std::mem::swap(&mut cur, &mut next);
    }

    // Gather: each block travels as one n x n subarray of the local array (a vector type)
    // and lands in its place in the global field (a vector type of the global stride).
    let mine = Datatype::vector(n, n, ld as isize, &f64t)?;
    mine.commit()?;
    let sent = earlybird::Typed::at(&cur, ld + 1, 1, &mine)?;
    if cart.rank() != 0 {
        cart.send(&sent, 0, GATHER)?;
        return Ok(None);
    }
    let place = Datatype::vector(n, n, cols as isize, &f64t)?;
    place.commit()?;
    let mut field = vec![0.0f64; rows * cols];
    for r in 0..cart.size() {
        let c = cart.cart_coords(r)?;
        let origin = c[0] as usize * n * cols + c[1] as usize * n;
        let mut into = TypedMut::at(&mut field, origin, 1, &place)?;
        if r == 0 {
            cart.sendrecv(&sent, 0, GATHER, &mut into, 0, GATHER)?;
        } else {
            cart.recv(&mut into, r, GATHER)?;
        }
    }

    // The serial run on the whole grid.
    let gl = cols + 2;
    let mut s = vec![0.0f64; (rows + 2) * gl];
    for i in 0..rows {
        for j in 0..cols {
            s[(i + 1) * gl + j + 1] = initial(i, j, rows, cols);
        }
    }
    let mut t = s.clone();
    for _ in 0..steps {
        wrap(&mut s, rows, cols);
        sweep(&s, &mut t, rows, cols);
        std::mem::swap(&mut s, &mut t);
    }

    let mut o = Outcome {
        dims,
        rows,
        cols,
        steps,
        initial_heat: 0.0,
        heat: 0.0,
        changed: 0,
        mismatches: 0,
        first_mismatch: None,
    };
    for i in 0..rows {
        for j in 0..cols {
            let (p, q) = (field[i * cols + j], s[(i + 1) * gl + j + 1]);
            let init = initial(i, j, rows, cols);
            o.initial_heat += init;
            o.heat += p;
            o.changed += usize::from(p != init);
            if p.to_bits() != q.to_bits() {
                o.mismatches += 1;
                o.first_mismatch.get_or_insert((i, j, p, q));
            }
        }
    }
    Ok(Some(o))
}

fn parse(arg: Option<&String>, default: usize, least: usize) -> Option<usize> {
    arg.map_or(Some(default), |a| a.parse().ok())
        .filter(|&v| v >= least)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(n), Some(steps), true) = (
        parse(args.first(), 64, 1),
        parse(args.get(1), 100, 0),
        args.len() <= 2,
    ) else {
        eprintln!("usage: heat2d [N [STEPS]]   (N >= 1 cells per side per rank, default 64; STEPS default 100)");
        return ExitCode::from(2);
    };
    let outcome = earlybird::init().and_then(|u| {
        let o = run(u.world(), n, steps)?;
        u.finalize()?;
        Ok(o)
    });
    match outcome {
        Err(e) => {
            eprintln!("heat2d: {e}");
            ExitCode::FAILURE
        }
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(o)) => {
            println!("{}", o.line());
            if o.mismatches == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
