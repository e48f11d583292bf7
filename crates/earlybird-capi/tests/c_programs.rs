//! C programs compiled with earlybird's installed `mpicc` and `mpi.h`, and some also with
//! MPICH's own (Debian's `mpicc.mpich`), run on earlybird's `libmpi.so.12` (through the rpath,
//! or for MPICH's binaries `LD_LIBRARY_PATH`) under `ebrun` at several sizes and alone as a
//! singleton.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn work_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("earlybird-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("work dir");
    d
}

/// earlybird installed in `work/prefix` by its own installer (from this build).
fn install(work: &Path) -> PathBuf {
    support::install(&work.join("prefix"))
}

/// Which `mpi.h` a test program is compiled with.
#[derive(Clone, Copy, Debug)]
enum Header {
    /// earlybird's, through the installed `mpicc`.
    Earlybird,
    /// MPICH's, through Debian's `mpicc.mpich`: the binary is MPICH's and must run unmodified.
    Mpich,
}

/// Compile `tests/c/<name>.c` (with `flags` added).
fn compile(name: &str, work: &Path, prefix: &Path, header: Header, flags: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = work.join(format!("{name}-{header:?}"));
    let cc = match header {
        Header::Earlybird => prefix.join("bin/mpicc"),
        Header::Mpich => PathBuf::from("mpicc.mpich"),
    };
    let out = Command::new(&cc)
        // MPICH's header declares status arrays so that gcc warns about MPI_STATUSES_IGNORE.
        .args(["-O1", "-Wall", "-Werror", "-Wno-stringop-overflow"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("{} compiles the C tests: {e}", cc.display()));
    assert!(
        out.status.success(),
        "{} {}: {}",
        cc.display(),
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Run `cmd` with the library first on the path, bounded in time.
fn run(mut cmd: Command, lib: &Path) -> Output {
    cmd.env("LD_LIBRARY_PATH", lib);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("{cmd:?} did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn ebrun(prefix: &Path, n: usize, exe: &Path) -> Command {
    let mut c = Command::new(prefix.join("bin/mpiexec"));
    c.args(["-n", &n.to_string(), "--timeout", "100"]).arg(exe);
    c
}

/// Compile `tests/c/<name>.c` with each header, run it at 1 to 4 ranks and alone: every rank
/// must print "<name>: ok <rank>" and the job must succeed.
fn run_everywhere(name: &str, headers: &[Header]) {
    run_everywhere_with(name, headers, &[])
}

/// [`run_everywhere`], compiling with `flags` added.
fn run_everywhere_with(name: &str, headers: &[Header], flags: &[&str]) {
    let work = work_dir(name);
    let prefix = install(&work);
    let lib = prefix.join("lib");
    for &header in headers {
        let exe = compile(name, &work, &prefix, header, flags);
        run_built(name, &exe, &prefix, &lib);
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// The job of program `name` on `n` ranks, started by `launcher`, succeeded and every rank
/// printed "<name>: ok <rank>".
fn assert_every_rank_ok(name: &str, launcher: &str, n: usize, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{launcher} -n {n} {name}: {:?}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for r in 0..n {
        assert!(
            stdout.lines().any(|l| l == format!("{name}: ok {r}")),
            "rank {r} of {n} did not report ok under {launcher}:\n{stdout}"
        );
    }
}

fn run_built(name: &str, exe: &Path, prefix: &Path, lib: &Path) {
    for n in [1, 2, 3, 4] {
        let out = run(ebrun(prefix, n, exe), lib);
        assert_every_rank_ok(name, "ebrun", n, &out);
    }
    let out = run(Command::new(exe), lib);
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains(&format!("{name}: ok 0")),
        "{name} alone: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Under MPICH's own launcher, Hydra (`mpiexec.hydra` of Debian's mpich), in its three PMI
/// modes: PMI-1 over an inherited socket, PMI-1 over a port (`-pmi-port`), PMI-2. MPICH's
/// binaries run unmodified, started as they would be on MPICH.
#[test]
fn basic_program_under_hydra() {
    let name = "basic";
    let work = work_dir("hydra");
    let prefix = install(&work);
    let lib = prefix.join("lib");
    let modes: [(&[&str], &str); 3] = [(&[], ""), (&["-pmi-port"], ""), (&[], "2")];
    for &header in BOTH {
        let exe = compile(name, &work, &prefix, header, &[]);
        for (args, pmi) in modes {
            for n in [2, 3] {
                let mut cmd = Command::new("mpiexec.hydra");
                cmd.args(args).args(["-n", &n.to_string()]).arg(&exe);
                cmd.env("EARLYBIRD_PMI", pmi);
                let out = run(cmd, &lib);
                let what = format!("mpiexec.hydra {args:?} (EARLYBIRD_PMI={pmi:?})");
                assert_every_rank_ok(name, &what, n, &out);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Under Open MPI's launcher (`mpirun` of Debian's openmpi-bin), which speaks PMIx: earlybird
/// joins through the system's libpmix.
#[test]
fn basic_program_under_open_mpi_mpirun() {
    let name = "basic";
    let work = work_dir("mpirun");
    let prefix = install(&work);
    let lib = prefix.join("lib");
    for &header in BOTH {
        let exe = compile(name, &work, &prefix, header, &[]);
        for n in [2, 3] {
            let mut cmd = Command::new("mpirun.openmpi");
            // Session files in the test's directory: Open MPI 4.1's mpiruns started at once
            // race to create the same /tmp/ompi.HOST.UID.
            cmd.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "--mca",
                "orte_tmpdir_base",
            ])
            .arg(&work)
            .args(["-n", &n.to_string()])
            .arg(&exe);
            let out = run(cmd, &lib);
            assert_every_rank_ok(name, "mpirun.openmpi", n, &out);
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Both headers: the programs most of MPI's users write, compiled as MPICH's binaries too.
const BOTH: &[Header] = &[Header::Earlybird, Header::Mpich];
const OURS: &[Header] = &[Header::Earlybird];

#[test]
fn basic_program_at_several_sizes_and_alone() {
    run_everywhere("basic", BOTH);
}

#[test]
fn requests_completed_at_their_start_at_several_sizes_and_alone() {
    run_everywhere("completed_at_start", BOTH);
}

#[test]
fn info_calls_before_init_and_after_finalize() {
    run_everywhere("info_outside_init", BOTH);
}

#[test]
fn derived_datatypes_at_several_sizes_and_alone() {
    run_everywhere("datatypes", BOTH);
}

#[test]
fn v_collectives_scans_and_nonblocking_collectives_at_several_sizes_and_alone() {
    run_everywhere("collectives", BOTH);
}

/// Counts beyond INT_MAX: datatypes of more than 2^31 bytes, a message of 2^31 + 16 bytes by
/// MPI_Send_c and MPI_Recv_c, and packing datatypes that reach below their buffer.
#[test]
fn large_counts_and_datatypes_below_their_buffer_at_several_sizes_and_alone() {
    run_everywhere("large_counts", BOTH);
}

/// Fault tolerance's agreement, shrink and failure queries (MPICH's MPIX_ names).
#[test]
fn fault_tolerant_agreement_and_shrink_at_several_sizes_and_alone() {
    run_everywhere("fault_tolerance", OURS);
}

#[test]
fn cartesian_topologies_and_split_type_at_several_sizes_and_alone() {
    run_everywhere("topology", OURS);
}

#[test]
fn persistent_point_to_point_at_several_sizes_and_alone() {
    run_everywhere("persistent", OURS);
}

/// Partitioned communication (MPI 4.1 chapter 4), compiled against MPICH's header too.
#[test]
fn partitioned_communication_at_several_sizes_and_alone() {
    run_everywhere("partitioned", BOTH);
}

#[test]
fn attributes_with_c_callbacks_at_several_sizes_and_alone() {
    run_everywhere("attributes", OURS);
}

#[test]
fn intercommunicators_and_user_error_handlers_at_several_sizes_and_alone() {
    run_everywhere("intercomm", OURS);
}

#[test]
fn one_sided_windows_epochs_and_operations_at_several_sizes_and_alone() {
    run_everywhere("rma", BOTH);
}

#[test]
fn sessions_alone_at_several_sizes_and_alone() {
    run_everywhere("sessions", BOTH);
}

#[test]
fn sessions_beside_the_world_model_at_several_sizes_and_alone() {
    run_everywhere("sessions_world", BOTH);
}

#[test]
fn unimplemented_calls_exist_and_say_so() {
    run_everywhere("unsupported", OURS);
}

#[test]
fn topologies_neighbourhood_and_persistent_collectives_at_several_sizes_and_alone() {
    run_everywhere("neighbors", OURS);
}

#[test]
fn matched_probes_isendrecv_and_status_accessors_at_several_sizes_and_alone() {
    run_everywhere("matched", OURS);
}

#[test]
fn group_operations_idup_attributes_and_decoders_at_several_sizes_and_alone() {
    run_everywhere("groups", OURS);
}

#[test]
fn long_double_complex_bool_and_pair_reductions_and_alltoallw_over_bottom() {
    run_everywhere("reductions", BOTH);
}

#[test]
fn seed_000_channels_slack_channels_and_bundles_through_mpi_ext_h() {
    run_everywhere("channels", OURS);
}

#[test]
fn seed_001_examples_as_the_seed_writes_them_against_a_sendrecv_relaxation() {
    run_everywhere("seed001_examples", OURS);
}

#[test]
fn seed_004_persistent_windows_and_their_management() {
    run_everywhere("seed004_pmem", OURS);
}

#[test]
fn seed_002_assertions_and_their_broken_promises() {
    run_everywhere("seed002_assertions", OURS);
}

/// Seed 003's hybrid example with OpenMP: endpoint communicators, each thread of a team
/// driving its own handle (1 to 3 threads per process), the seed's queries and errors.
#[test]
fn seed003_endpoints() {
    run_everywhere_with("seed003_endpoints", OURS, &["-fopenmp"]);
}

/// MPI_THREAD_SERIALIZED: two threads of each rank take turns at MPI.
#[test]
fn threads_serialized() {
    run_everywhere_with("threads_serialized", BOTH, &["-pthread"]);
}

/// MPI_THREAD_MULTIPLE: four threads of each rank call at once, blocking calls included
/// that only another thread of the same process can end.
#[test]
fn threads_multiple() {
    run_everywhere_with("threads_multiple", BOTH, &["-pthread"]);
}

/// Even ranks under MPI_THREAD_MULTIPLE, odd ones under MPI_THREAD_SINGLE: their blocking
/// barriers and bcasts meet.
#[test]
fn mixed_thread_levels() {
    run_everywhere("mixed_thread_levels", BOTH);
}

#[test]
fn seed_000_examples_as_the_seed_writes_them() {
    run_everywhere("seed000_examples", OURS);
}

#[test]
fn errors_are_fatal_by_default_and_name_the_value() {
    let work = work_dir("fatal");
    let prefix = install(&work);
    let exe = compile("fatal", &work, &prefix, Header::Earlybird, &[]);
    let out = run(ebrun(&prefix, 2, &exe), &prefix.join("lib"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the job ended well:\n{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains("got past"),
        "a rank went on after the error:\n{stdout}"
    );
    assert!(
        stderr.contains('5'),
        "the message does not name rank 5:\n{stderr}"
    );
    assert!(
        !stdout.contains("delete function ran")
            && !stderr.contains("panicked")
            && !stderr.contains("signal"),
        "the exit ran a delete function or crashed:\n{stdout}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&work);
}
