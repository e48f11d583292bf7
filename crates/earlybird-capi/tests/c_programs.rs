//! C programs compiled with MPICH's own `mpicc` (Debian's `mpicc.mpich`, MPICH's `mpi.h`)
//! and run, unmodified, on earlybird's `libmpi.so.12` (found first through
//! `LD_LIBRARY_PATH`), under `ebrun` at several sizes and alone as a singleton.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `target/<profile>`, where cargo put this test's binary (in `deps/`), `libmpi.so` and
/// `ebrun`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// A directory holding this library under MPICH's two names. The library is the one cargo
/// built for this test (it is a dependency of the test through its rlib, and cargo leaves the
/// cdylib beside it in `deps/` without copying it up to `target/<profile>/`).
fn lib_dir(work: &Path) -> PathBuf {
    let lib = work.join("lib");
    std::fs::create_dir_all(&lib).expect("lib dir");
    let so = profile_dir().join("deps").join("libmpi.so");
    assert!(so.exists(), "{} is not built", so.display());
    for name in ["libmpi.so.12", "libmpich.so.12"] {
        let link = lib.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link).expect("symlink");
    }
    lib
}

fn work_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("earlybird-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("work dir");
    d
}

/// Compile `tests/c/<name>.c` with MPICH's mpicc.
fn compile(name: &str, work: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = work.join(name);
    let out = Command::new("mpicc.mpich")
        // MPICH's header declares status arrays so that gcc warns about MPI_STATUSES_IGNORE.
        .args(["-O1", "-Wall", "-Wno-stringop-overflow", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("mpicc.mpich (Debian's libmpich-dev) compiles the C tests");
    assert!(
        out.status.success(),
        "mpicc.mpich {}: {}",
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

fn ebrun(n: usize, exe: &Path) -> Command {
    let mut c = Command::new(profile_dir().join("ebrun"));
    c.args(["-n", &n.to_string(), "--timeout", "100"]).arg(exe);
    c
}

/// Compile `tests/c/<name>.c`, run it at 1 to 4 ranks and alone: every rank must print
/// "<name>: ok <rank>" and the job must succeed.
fn run_everywhere(name: &str) {
    let work = work_dir(name);
    let lib = lib_dir(&work);
    let exe = compile(name, &work);
    for n in [1, 2, 3, 4] {
        let out = run(ebrun(n, &exe), &lib);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "ebrun -n {n} {name}: {:?}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        for r in 0..n {
            assert!(
                stdout.lines().any(|l| l == format!("{name}: ok {r}")),
                "rank {r} of {n} did not report ok:\n{stdout}"
            );
        }
    }
    let out = run(Command::new(&exe), &lib);
    assert!(
        out.status.success()
            && String::from_utf8_lossy(&out.stdout).contains(&format!("{name}: ok 0")),
        "{name} alone: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn basic_program_at_several_sizes_and_alone() {
    run_everywhere("basic");
}

#[test]
fn derived_datatypes_at_several_sizes_and_alone() {
    run_everywhere("datatypes");
}

#[test]
fn v_collectives_scans_and_nonblocking_collectives_at_several_sizes_and_alone() {
    run_everywhere("collectives");
}

#[test]
fn cartesian_topologies_and_split_type_at_several_sizes_and_alone() {
    run_everywhere("topology");
}

#[test]
fn persistent_point_to_point_at_several_sizes_and_alone() {
    run_everywhere("persistent");
}

#[test]
fn attributes_with_c_callbacks_at_several_sizes_and_alone() {
    run_everywhere("attributes");
}

#[test]
fn intercommunicators_and_user_error_handlers_at_several_sizes_and_alone() {
    run_everywhere("intercomm");
}

#[test]
fn unimplemented_calls_exist_and_say_so() {
    run_everywhere("unsupported");
}

#[test]
fn errors_are_fatal_by_default_and_name_the_value() {
    let work = work_dir("fatal");
    let lib = lib_dir(&work);
    let exe = compile("fatal", &work);
    let out = run(ebrun(2, &exe), &lib);
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
    let _ = std::fs::remove_dir_all(&work);
}
