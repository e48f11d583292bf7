//! The 2-D heat-diffusion example (`examples/heat2d.rs`): its halo exchange on a periodic
//! Cartesian communicator (halo columns as vector types through `split_views`) checked bit
//! for bit against a serial run, as thread and process jobs of 1 to 8 ranks; the built
//! example itself under `ebrun -n 4`; and `split_views` misuse.

mod common;

#[path = "../examples/heat2d.rs"]
#[allow(dead_code)]
mod heat2d;

use common::{assert_err, JobOutput};
use earlybird::{scope, split_views, Datatype, ErrHandler, ErrorClass, Result, Universe};

scenarios! {
    heat2d_matches_serial [1, 2, 3, 4, 8];
    split_view_misuse [1, 2];
}

/// 16 x 16 cells per rank, 25 steps: the gathered grid equals the serial one bit for bit, the
/// field did diffuse, and the heat is conserved up to rounding.
fn heat2d_matches_serial(u: &Universe) -> Result<()> {
    let Some(o) = heat2d::run(u.world(), 16, 25)? else {
        return Ok(());
    };
    let size = u.world().size();
    assert_eq!(o.dims[0] * o.dims[1], size, "{o:?}");
    let mut dims = [0; 2];
    earlybird::dims_create(size, &mut dims)?;
    assert_eq!(o.dims, dims);
    assert_eq!(
        (o.rows, o.cols),
        (16 * dims[0] as usize, 16 * dims[1] as usize)
    );
    assert_eq!(o.mismatches, 0, "{}", o.line());
    assert!(
        o.changed > o.rows * o.cols / 2,
        "the field barely changed: {o:?}"
    );
    assert!(
        (o.heat - o.initial_heat).abs() <= 1e-9 * o.initial_heat,
        "heat not conserved: {o:?}"
    );
    assert!(o.line().starts_with("heat2d: OK: "), "{}", o.line());
    Ok(())
}

/// Misuse of split views, and a persistent receive on one that is refused its whole buffer.
fn split_view_misuse(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(ErrHandler::Return);
    let f = Datatype::of::<f64>();
    let col = Datatype::vector(2, 1, 4, &f)?;
    let mut g = vec![0.0f64; 16];
    assert_err(
        split_views(&mut g, &[], &[(4, 1, &col)]),
        ErrorClass::Type,
        "receive view 0: a derived datatype used before commit",
    );
    col.commit()?;
    // Receiving into column 1 while sending column 1.
    assert_err(
        split_views(&mut g, &[(5, 1, &col)], &[(4, 1, &f), (5, 1, &col)]),
        ErrorClass::Buffer,
        "send view 0 and receive view 1 both reach element 5",
    );
    // Two receive views sharing element 9.
    assert_err(
        split_views(&mut g, &[], &[(9, 2, &f), (5, 1, &col)]),
        ErrorClass::Buffer,
        "receive view 0 and receive view 1 both reach element 9",
    );
    assert_err(
        split_views(&mut g, &[(14, 1, &col)], &[]),
        ErrorClass::Buffer,
        "send view 0",
    );
    assert_err(
        split_views(&mut g, &[], &[(17, 1, &f)]),
        ErrorClass::Buffer,
        "origin 17",
    );
    // Overlapping send views are fine.
    let (s, r) = split_views(&mut g, &[(5, 1, &col), (1, 2, &col)], &[(4, 1, &col)])?;
    assert_eq!(
        (s.len(), r.len(), s[0].packed_len(), r[0].packed_len()),
        (2, 1, 16, 16)
    );
    drop((s, r));

    // A column round trip to self through a persistent receive: it works, and buffer_mut on
    // the split view is MPI_ERR_BUFFER (the rest of the slice belongs to the other views).
    let me = w.rank();
    for (i, x) in g.iter_mut().enumerate() {
        *x = i as f64;
    }
    {
        let (s, mut r) = split_views(&mut g, &[(5, 1, &col)], &[(7, 1, &col)])?;
        scope(|sc| -> Result<()> {
            let mut rr = w.recv_init(sc, &mut r[0], me, 3)?;
            rr.start()?;
            w.send(&s[0], me, 3)?;
            rr.wait()?;
            assert_err(rr.buffer_mut::<f64>(), ErrorClass::Buffer, "split_views");
            Ok(())
        })?;
    }
    assert_eq!((g[7], g[11]), (5.0, 9.0));
    assert_eq!((g[5], g[9], g[6]), (5.0, 9.0, 6.0));
    Ok(())
}

fn run_example(n: u32, args: &[&str]) -> JobOutput {
    common::run_example("heat2d", n, args)
}

/// The example as a user runs it: 4 processes, a 2 x 2 grid of 32 x 32 blocks, 40 steps.
#[test]
fn example_under_ebrun_4() {
    let out = run_example(4, &["32", "40"]);
    assert!(out.status.success(), "{}", out.dump());
    let want = "heat2d: OK: 64x64 grid on 4 ranks (2x2), 40 steps";
    assert!(out.stdout.contains(want), "{}", out.dump());
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.dump());
}

/// A bad argument is a usage error (exit status 2), not a hang.
#[test]
fn example_rejects_bad_arguments() {
    let out = run_example(2, &["0"]);
    assert_eq!(out.status.code(), Some(2), "{}", out.dump());
    assert!(out.stderr.contains("usage: heat2d"), "{}", out.dump());
}
