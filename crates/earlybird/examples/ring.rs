//! The demo job: a token passed around a ring, then a 1-D heat-diffusion stencil whose halo
//! cells travel with `sendrecv`; rank 0 gathers the field and checks it, bit for bit, against
//! the same computation done serially.
//!
//! ```text
//! ebrun -n 4 target/release/examples/ring
//! ```

use earlybird::Result;

const CELLS_PER_RANK: usize = 1000;
const STEPS: usize = 500;

fn step(u: &[f64], left: f64, right: f64, out: &mut [f64]) {
    let n = u.len();
    for i in 0..n {
        let l = if i == 0 { left } else { u[i - 1] };
        let r = if i == n - 1 { right } else { u[i + 1] };
        out[i] = u[i] + 0.25 * (l - 2.0 * u[i] + r);
    }
}

fn initial(global_index: usize, total: usize) -> f64 {
    let x = global_index as f64 / total as f64;
    if (0.4..0.6).contains(&x) {
        100.0
    } else {
        0.0
    }
}

fn main() -> Result<()> {
    let universe = earlybird::init()?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;

    // 1. Ring: each rank adds its rank to the token.
    let mut token = [0u64];
    if rank == 0 {
        world.send(&[0u64], right, 0)?;
        world.recv(&mut token, left, 0)?;
        let expect = (size as u64) * (size as u64 - 1) / 2;
        assert_eq!(token[0], expect, "ring token");
        println!(
            "ring: token went round {size} ranks and came back as {} (expected {expect})",
            token[0]
        );
    } else {
        world.recv(&mut token, left, 0)?;
        token[0] += rank as u64;
        world.send(&token, right, 0)?;
    }

    // 2. Heat diffusion on a periodic 1-D grid split across the ranks.
    let total = CELLS_PER_RANK * size as usize;
    let mut u: Vec<f64> = (0..CELLS_PER_RANK)
        .map(|i| initial(rank as usize * CELLS_PER_RANK + i, total))
        .collect();
    let mut next = vec![0.0; CELLS_PER_RANK];
    for _ in 0..STEPS {
        let mut from_left = [0.0f64];
        let mut from_right = [0.0f64];
        world.sendrecv(&u[CELLS_PER_RANK - 1..], right, 1, &mut from_left, left, 1)?;
        world.sendrecv(&u[..1], left, 2, &mut from_right, right, 2)?;
        step(&u, from_left[0], from_right[0], &mut next);
        std::mem::swap(&mut u, &mut next);
    }

    if rank == 0 {
        let mut field = u.clone();
        let mut part = vec![0.0f64; CELLS_PER_RANK];
        for r in 1..size {
            world.recv(&mut part, r, 3)?;
            field.extend_from_slice(&part);
        }
        let mut s: Vec<f64> = (0..total).map(|i| initial(i, total)).collect();
        let mut t = vec![0.0; total];
        for _ in 0..STEPS {
            let (l, r) = (s[total - 1], s[0]);
            step(&s, l, r, &mut t);
            std::mem::swap(&mut s, &mut t);
        }
        let same = field
            .iter()
            .zip(&s)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        let heat: f64 = field.iter().sum();
        println!(
            "heat: {total} cells on {size} ranks, {STEPS} steps, total heat {heat:.6}; matches the serial run bit for bit: {same}"
        );
        if !same {
            std::process::exit(1);
        }
    } else {
        world.send(&u, 0, 3)?;
    }
    universe.finalize()
}
