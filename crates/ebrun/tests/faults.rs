//! Fault tests of `ebrun`: how a job ends when something goes wrong, and that nothing is ever
//! left in /dev/shm.
//!
//! The rank program is this test binary itself: each test runs
//! `ebrun -n N <this binary> --exact child_role --nocapture --test-threads 1` with
//! `EB_FAULT=<role>` in the environment, and [`child_role`] plays that role as a rank (it
//! returns at once when `EB_FAULT` is unset, i.e. in the normal test run). Every wait is
//! bounded: ebrun gets `--timeout`, and the test kills it past its own deadline.
//!
//! The tests run one at a time (a lock), so that on a 2-core machine their time bounds do
//! not depend on each other.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use earlybird::launch::{BlockedIn, Published};

/// Which role the rank program plays.
const ROLE: &str = "EB_FAULT";
/// Directory where each rank writes its pid to a file named after its rank.
const PIDDIR: &str = "EB_PIDDIR";

// ---- the rank program ------------------------------------------------------------------

/// Not a test of its own: the rank program run by the tests below (see the module doc).
#[test]
fn child_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    rank_main(&role);
}

fn rank_main(role: &str) {
    if role == "stubborn" {
        // Every rank of this role survives SIGTERM (the handler only sets a flag).
        let term = Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(libc::SIGTERM, term).expect("catch SIGTERM");
    }
    let u = earlybird::init().expect("earlybird::init");
    let world = u.world();
    let (rank, size) = (world.rank(), world.size());
    if let Ok(dir) = std::env::var(PIDDIR) {
        // Write then rename, so the test never reads half a file.
        let tmp = Path::new(&dir).join(format!(".{rank}"));
        std::fs::write(&tmp, std::process::id().to_string()).expect("write pid file");
        std::fs::rename(&tmp, Path::new(&dir).join(rank.to_string())).expect("rename pid file");
    }
    let mut buf = [0i32];
    match role {
        // Pass a token around the ring: rank 0 sends 1, rank r adds r.
        "ring" => {
            if rank == 0 {
                world.send(&[1i32], 1 % size, 7).unwrap();
                world.recv(&mut buf, size - 1, 7).unwrap();
                let want = 1 + (1..size).sum::<i32>();
                assert_eq!(buf[0], want, "token after the ring");
                println!("ring ok: {}", buf[0]);
            } else {
                world.recv(&mut buf, rank - 1, 7).unwrap();
                println!("rank {rank} of {size} got {}", buf[0]);
                world.send(&[buf[0] + rank], (rank + 1) % size, 7).unwrap();
            }
        }
        // Rank 1 kills itself with SIGKILL while rank 0 is blocked receiving from it.
        "kill" => {
            if rank == 1 {
                await_rank0(&u, recv_from_me);
                earlybird::launch::signal(std::process::id(), libc::SIGKILL);
                std::thread::sleep(Duration::from_secs(60));
            } else {
                let _ = world.recv(&mut buf, 1, 5);
            }
        }
        // Rank 1 leaves right after init, without finalize (exit skips Universe's drop).
        "early" => {
            if rank == 1 {
                std::process::exit(0);
            } else {
                let _ = world.recv(&mut buf, 1, 5);
            }
        }
        // Rank 1 exits with status 3 while rank 0 is blocked receiving from it.
        "status3" => {
            if rank == 1 {
                await_rank0(&u, recv_from_me);
                std::process::exit(3);
            } else {
                let _ = world.recv(&mut buf, 1, 5);
            }
        }
        // Rank 1 exits with status 3; rank 0 ignores SIGTERM and computes, so only SIGKILL
        // ends it.
        "stubborn" => {
            if rank == 1 {
                // Rank 0 caught SIGTERM before init; once it runs, it is stubborn.
                await_rank0(&u, |_| true);
                std::process::exit(3);
            } else {
                std::thread::sleep(Duration::from_secs(60));
            }
        }
        // Rank 1 sends to a rank that does not exist: errors-are-fatal ends the job.
        "fatal" => {
            if rank == 1 {
                await_rank0(&u, recv_from_me);
                let _ = world.send(&[1i32], 99, 0);
                unreachable!("a fatal error returned");
            } else {
                let _ = world.recv(&mut buf, 1, 5);
            }
        }
        // Every rank waits for a message from the next one: nobody ever sends.
        "deadlock" => {
            report_when_blocked(&u, rank);
            let _ = world.recv(&mut buf, (rank + 1) % size, 5);
        }
        other => panic!("unknown role {other:?}"),
    }
    u.finalize().expect("finalize");
}

/// Rank 1's wait until rank 0 has published a state that `pred` accepts (bounded: a
/// rank 0 that never gets there fails the test through ebrun's report of rank 1).
fn await_rank0(u: &earlybird::Universe, pred: impl Fn(&Published) -> bool) {
    if let Err(e) = u
        .job_segment()
        .await_blocked(0, Duration::from_secs(20), pred)
    {
        panic!("rank 0 never reached the expected state: {e}");
    }
}

/// Rank 0 is blocked receiving from rank 1 (with the engine's published blocked-in state).
fn recv_from_me(p: &Published) -> bool {
    p.what == BlockedIn::Recv && p.peer == Some(1)
}

/// A watcher thread writes `blocked-<rank>` into the pid directory once this rank has
/// published that it is blocked in a receive, so the test acts on blocked ranks only.
fn report_when_blocked(u: &earlybird::Universe, rank: i32) {
    let Ok(dir) = std::env::var(PIDDIR) else {
        return;
    };
    let seg = u.job_segment();
    std::thread::spawn(move || {
        let limit = Duration::from_secs(20);
        if seg
            .await_blocked(rank as u32, limit, |p| p.what == BlockedIn::Recv)
            .is_ok()
        {
            let _ = std::fs::write(Path::new(&dir).join(format!("blocked-{rank}")), "");
        }
    });
}

// ---- helpers ---------------------------------------------------------------------------

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A pid directory for one test, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let p = std::env::temp_dir().join(format!("ebrun-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    /// The pids written so far (a rank ended by the job's failure may not have got there).
    fn pids_written(&self, n: u32) -> Vec<u32> {
        (0..n)
            .filter_map(|r| {
                std::fs::read_to_string(self.0.join(r.to_string()))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect()
    }

    /// The pid of one rank, which must have written it.
    fn pid_of(&self, rank: u32) -> u32 {
        let s = std::fs::read_to_string(self.0.join(rank.to_string())).expect("rank wrote its pid");
        s.trim().parse().unwrap()
    }

    /// The pid each rank wrote, waiting up to `limit` for all `n` of them.
    fn pids(&self, n: u32, limit: Duration) -> Vec<u32> {
        let end = Instant::now() + limit;
        loop {
            let got: Vec<Option<u32>> = (0..n)
                .map(|r| {
                    std::fs::read_to_string(self.0.join(r.to_string()))
                        .ok()
                        .and_then(|s| s.trim().parse().ok())
                })
                .collect();
            if got.iter().all(Option::is_some) {
                return got.into_iter().map(Option::unwrap).collect();
            }
            assert!(
                Instant::now() < end,
                "ranks did not all write their pids within {limit:?}: {got:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait up to `limit` until each of the `n` ranks has reported that it is blocked in a
    /// receive (see `report_when_blocked`).
    fn blocked(&self, n: u32, limit: Duration) {
        let end = Instant::now() + limit;
        let missing = || (0..n).filter(|r| !self.0.join(format!("blocked-{r}")).exists());
        while missing().next().is_some() {
            assert!(
                Instant::now() < end,
                "ranks {:?} did not block in recv within {limit:?}",
                missing().collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An ebrun being run, with its output collected by threads.
struct Running {
    child: Child,
    start: Instant,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// What an ebrun run ended with.
#[derive(Debug)]
struct Ended {
    pid: u32,
    status: ExitStatus,
    elapsed: Duration,
    stdout: String,
    stderr: String,
}

/// Start `ebrun ARGS <this binary> --exact child_role ...` with `EB_FAULT=role`.
fn start(args: &[&str], role: &str, env: &[(&str, &Path)]) -> Running {
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ebrun"));
    cmd.args(args)
        .arg(&me)
        .args([
            "--exact",
            "child_role",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(ROLE, role)
        .env_remove("EARLYBIRD_SHM_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let start = Instant::now();
    let mut child = cmd.spawn().expect("start ebrun");
    let collect = |pipe: Box<dyn Read + Send>| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let b = buf.clone();
        let h = std::thread::spawn(move || {
            let mut pipe = pipe;
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        (buf, h)
    };
    let (stdout, h1) = collect(Box::new(child.stdout.take().unwrap()));
    let (stderr, h2) = collect(Box::new(child.stderr.take().unwrap()));
    Running {
        child,
        start,
        stdout,
        stderr,
        readers: vec![h1, h2],
    }
}

impl Running {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for ebrun to exit; past `limit`, kill it and fail the test.
    fn finish(mut self, limit: Duration) -> Ended {
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if self.start.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "ebrun did not end within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&self.stdout.lock().unwrap()),
                    String::from_utf8_lossy(&self.stderr.lock().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let elapsed = self.start.elapsed();
        // The pipes close when the ranks are gone too; do not wait forever for that.
        let end = Instant::now() + Duration::from_secs(5);
        while self.readers.iter().any(|h| !h.is_finished()) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        let ended = Ended {
            pid: self.child.id(),
            status,
            elapsed,
            stdout: String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned(),
            stderr: String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned(),
        };
        assert!(
            self.readers.iter().all(|h| h.is_finished()),
            "a rank still holds ebrun's output open: {ended:#?}"
        );
        ended
    }
}

fn run(args: &[&str], role: &str, env: &[(&str, &Path)], limit: Duration) -> Ended {
    start(args, role, env).finish(limit)
}

/// True once `pid` has exited (no such process, or a zombie nobody reaped yet).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            .unwrap_or(true),
    }
}

/// Wait up to `limit` for every pid to be gone; the time it took.
fn wait_gone(pids: &[u32], limit: Duration) -> Duration {
    let t = Instant::now();
    while !pids.iter().all(|&p| gone(p)) {
        assert!(
            t.elapsed() < limit,
            "ranks {pids:?} still alive {limit:?} later"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t.elapsed()
}

/// Nothing of launcher `pid`'s job in `dir`, and no segment of any dead launcher either.
fn assert_no_segment_in(dir: &Path, pid: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix("earlybird-") else {
            continue;
        };
        let owner: Option<u32> = rest.split('-').next().and_then(|p| p.parse().ok());
        assert!(
            owner != Some(pid),
            "{} left behind by ebrun (pid {pid})",
            e.path().display()
        );
        if let Some(o) = owner {
            assert!(
                !gone(o),
                "{} left behind by a launcher that is gone (pid {o})",
                e.path().display()
            );
        }
    }
}

fn assert_no_segment(pid: u32) {
    assert_no_segment_in(Path::new("/dev/shm"), pid);
}

/// The job ended because of what the test did, not because ebrun's `--timeout` ran out.
fn assert_ended_by_the_failure(e: &Ended) {
    assert!(!e.stderr.contains("ebrun: timeout"), "{e:#?}");
}

fn assert_code(e: &Ended, code: i32) {
    assert_eq!(e.status.code(), Some(code), "ebrun's exit status: {e:#?}");
}

// ---- the scenarios ---------------------------------------------------------------------

#[test]
fn clean_ring_of_4_exits_0_and_tags_output() {
    let _g = serial();
    let e = run(
        &["-np", "4", "--tag-output", "--timeout", "30"],
        "ring",
        &[],
        Duration::from_secs(40),
    );
    assert_code(&e, 0);
    assert!(
        e.stderr.lines().all(|l| !l.starts_with("ebrun:")),
        "ebrun complained: {e:#?}"
    );
    // (The test harness of the rank writes "test child_role ... " before the rank's line.)
    let has_line = |tag: &str, text: &str| {
        e.stdout
            .lines()
            .any(|l| l.starts_with(tag) && l.contains(text))
    };
    assert!(has_line("[0] ", "ring ok: 7"), "{e:#?}");
    for r in 1..4 {
        assert!(
            has_line(&format!("[{r}] "), &format!("rank {r} of 4 got ")),
            "rank {r}'s line: {e:#?}"
        );
    }
    for l in e.stdout.lines().chain(e.stderr.lines()) {
        let tagged = ["[0] ", "[1] ", "[2] ", "[3] "]
            .iter()
            .any(|p| l.starts_with(p));
        assert!(tagged, "untagged line {l:?}: {e:#?}");
    }
    assert_ended_by_the_failure(&e);
    assert_no_segment(e.pid);
}

#[test]
fn clean_ring_untagged() {
    let _g = serial();
    let e = run(
        &["-n", "3", "--timeout", "30"],
        "ring",
        &[],
        Duration::from_secs(40),
    );
    assert_code(&e, 0);
    assert!(e.stdout.contains("ring ok: 4\n"), "{e:#?}");
    assert_no_segment(e.pid);
}

#[test]
fn rank_killed_mid_job() {
    let _g = serial();
    let dir = TempDir::new("kill");
    let e = run(
        &["-n", "2", "--timeout", "30"],
        "kill",
        &[(PIDDIR, &dir.0)],
        Duration::from_secs(40),
    );
    let pids = dir.pids_written(2);
    let failed = dir.pid_of(1);
    assert_code(&e, 137);
    let want = format!(
        "ebrun: rank 1 (pid {}) killed by signal 9 (SIGKILL)",
        failed
    );
    assert!(e.stderr.contains(&want), "want {want:?}: {e:#?}");
    assert_eq!(
        e.stderr.matches("ebrun: rank").count(),
        1,
        "one failure line: {e:#?}"
    );
    assert_ended_by_the_failure(&e);
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn rank_exits_early_without_finalize() {
    let _g = serial();
    let dir = TempDir::new("early");
    let e = run(
        &["-n", "2", "--timeout", "30"],
        "early",
        &[(PIDDIR, &dir.0)],
        Duration::from_secs(40),
    );
    let pids = dir.pids_written(2);
    let failed = dir.pid_of(1);
    assert_code(&e, 1);
    let want = format!("ebrun: rank 1 (pid {}) exited without finalizing", failed);
    assert!(e.stderr.contains(&want), "want {want:?}: {e:#?}");
    assert_ended_by_the_failure(&e);
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn rank_exits_with_status_3() {
    let _g = serial();
    let dir = TempDir::new("status3");
    let e = run(
        &["-n", "2", "--timeout", "30"],
        "status3",
        &[(PIDDIR, &dir.0)],
        Duration::from_secs(40),
    );
    let pids = dir.pids_written(2);
    let failed = dir.pid_of(1);
    assert_code(&e, 3);
    let want = format!("ebrun: rank 1 (pid {}) exited with status 3", failed);
    assert!(e.stderr.contains(&want), "want {want:?}: {e:#?}");
    assert_ended_by_the_failure(&e);
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn rank_ignoring_sigterm_is_killed_within_a_second() {
    let _g = serial();
    let dir = TempDir::new("stubborn");
    let run = start(
        &["-n", "2", "--timeout", "30"],
        "stubborn",
        &[(PIDDIR, &dir.0)],
    );
    let pids = dir.pids(2, Duration::from_secs(20));
    // Rank 1 exits once rank 0 runs; rank 0 must be gone within 1 s of that.
    wait_gone(&[pids[1]], Duration::from_secs(5));
    let after_failure = wait_gone(&[pids[0]], Duration::from_secs(5));
    let e = run.finish(Duration::from_secs(40));
    assert_code(&e, 3);
    assert!(
        e.stderr.contains(&format!(
            "ebrun: rank 1 (pid {}) exited with status 3",
            pids[1]
        )),
        "{e:#?}"
    );
    assert!(
        after_failure < Duration::from_millis(1000),
        "rank 0 lived {after_failure:?} after rank 1 failed"
    );
    assert_no_segment(e.pid);
}

#[test]
fn fatal_error_in_a_rank_ends_the_job_with_its_message() {
    let _g = serial();
    let dir = TempDir::new("fatal");
    let e = run(
        &["-n", "2", "--timeout", "30"],
        "fatal",
        &[(PIDDIR, &dir.0)],
        Duration::from_secs(40),
    );
    let pids = dir.pids_written(2);
    let failed = dir.pid_of(1);
    assert_code(&e, 1);
    assert!(
        e.stderr.contains("MPI_ERR_RANK"),
        "the rank's own message: {e:#?}"
    );
    let want = format!("ebrun: rank 1 (pid {}) exited with status 1", failed);
    assert!(e.stderr.contains(&want), "want {want:?}: {e:#?}");
    assert_ended_by_the_failure(&e);
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn ebrun_killed_takes_the_ranks_with_it() {
    let _g = serial();
    let dir = TempDir::new("ebrun-killed");
    let mut run = start(
        &["-n", "2", "--timeout", "30"],
        "deadlock",
        &[(PIDDIR, &dir.0)],
    );
    let pids = dir.pids(2, Duration::from_secs(20));
    dir.blocked(2, Duration::from_secs(20));
    let ebrun_pid = run.pid();
    run.child.kill().unwrap(); // SIGKILL
                               // The ranks notice their launcher is gone (they are blocked in recv: no other cause).
    wait_gone(&pids, Duration::from_secs(5));
    let e = run.finish(Duration::from_secs(40));
    assert_eq!(e.status.signal(), Some(libc::SIGKILL), "{e:#?}");
    assert_no_segment(ebrun_pid);
}

#[test]
fn sigterm_to_ebrun_is_forwarded() {
    let _g = serial();
    let dir = TempDir::new("sigterm");
    let run = start(
        &["-n", "2", "--timeout", "30"],
        "deadlock",
        &[(PIDDIR, &dir.0)],
    );
    let pids = dir.pids(2, Duration::from_secs(20));
    dir.blocked(2, Duration::from_secs(20));
    earlybird::launch::signal(run.pid(), libc::SIGTERM);
    let e = run.finish(Duration::from_secs(40));
    assert_code(&e, 128 + libc::SIGTERM);
    assert!(e.stderr.contains("ebrun: received 15 (SIGTERM)"), "{e:#?}");
    assert_ended_by_the_failure(&e);
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn timeout_reports_what_each_rank_was_blocked_in() {
    let _g = serial();
    let dir = TempDir::new("timeout");
    let e = run(
        &["-n", "2", "--timeout", "2"],
        "deadlock",
        &[(PIDDIR, &dir.0)],
        Duration::from_secs(30),
    );
    let pids = [dir.pid_of(0), dir.pid_of(1)];
    assert_code(&e, 124);
    assert!(
        e.stderr.contains("ebrun: timeout after 2 s; ranks were:\n"),
        "{e:#?}"
    );
    for (r, peer) in [(0, 1), (1, 0)] {
        let want = format!(
            "  rank {r} (pid {}): was blocked in recv from rank {peer} (tag 5",
            pids[r]
        );
        assert!(e.stderr.contains(&want), "want {want:?}: {e:#?}");
    }
    assert!(
        e.elapsed >= Duration::from_secs(2) && e.elapsed < Duration::from_secs(6),
        "{e:#?}"
    );
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn mpiexec_timeout_from_the_environment_when_no_option_gives_one() {
    let _g = serial();
    let dir = TempDir::new("envtimeout");
    let e = run(
        &["-n", "2"],
        "deadlock",
        &[(PIDDIR, &dir.0), ("MPIEXEC_TIMEOUT", Path::new("1"))],
        Duration::from_secs(30),
    );
    let pids = [dir.pid_of(0), dir.pid_of(1)];
    assert_code(&e, 124);
    assert!(e.stderr.contains("ebrun: timeout after 1 s"), "{e:#?}");
    wait_gone(&pids, Duration::from_secs(1));
    assert_no_segment(e.pid);
}

#[test]
fn program_that_cannot_start() {
    let _g = serial();
    let out = Command::new(env!("CARGO_BIN_EXE_ebrun"))
        .args(["-n", "2", "/nonexistent/earlybird-program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ebrun: cannot start rank 0: /nonexistent/earlybird-program: "),
        "{err}"
    );
    assert!(!err.contains("ebrun: timeout"), "{err}");
}

/// A tmpfs mounted for one test, unmounted (and removed) on drop.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn full_shm_is_a_clear_error() {
    let _g = serial();
    let dir = TempDir::new("tmpfs-parent");
    let mnt = dir.0.join("shm");
    std::fs::create_dir(&mnt).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&mnt)
        .output();
    match mounted {
        Ok(o) if o.status.success() => {}
        Ok(o) => {
            eprintln!(
                "SKIPPED full_shm_is_a_clear_error: mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
            return;
        }
        Err(e) => {
            eprintln!("SKIPPED full_shm_is_a_clear_error: cannot run mount: {e}");
            return;
        }
    }
    let fs = Tmpfs(mnt.clone());
    let e = run(
        &["-n", "8", "--timeout", "30"],
        "ring",
        &[("EARLYBIRD_SHM_DIR", &fs.0)],
        Duration::from_secs(30),
    );
    assert_code(&e, 1);
    assert!(e.stderr.contains("ebrun: cannot reserve "), "{e:#?}");
    assert!(
        e.stderr.contains(&format!(" KiB in {} ", fs.0.display())),
        "names the directory and size: {e:#?}"
    );
    assert!(e.stderr.contains("No space left on device"), "{e:#?}");
    assert!(
        !e.stdout.contains("running 1 test"),
        "no rank should have started: {e:#?}"
    );
    assert_ended_by_the_failure(&e);
    let left: Vec<_> = std::fs::read_dir(&fs.0)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the tmpfs: {left:?}");
    assert_no_segment(e.pid);
}
