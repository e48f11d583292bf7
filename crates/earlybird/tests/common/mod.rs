//! Conformance-test harness: every scenario runs as a thread job and as processes under
//! `ebrun`.
//!
//! * **Threads**: [`run_threads`] starts an in-process [`earlybird::threads::Job`].
//! * **Processes**: [`run_procs`] starts `ebrun -n N --timeout 60 <this test binary> --exact
//!   __child --ignored ...` with `EB_SCENARIO=<name>`; each rank is this same binary running
//!   only the `__child` test (ignored in ordinary runs), which looks the scenario up by name
//!   ([`child`]), runs it between `earlybird::init()` and `finalize()`, exits non-zero
//!   (panic, status 101) on failure, and prints `eb-scenario-ok <name> <rank>` on success.
//!   `run_procs` wants ebrun's success and one such line from every rank, so a job whose
//!   ranks never ran the scenario (a filter that matched no test, say) fails.
//!
//! [`scenarios!`] generates, per scenario `foo`, a module `foo` with tests `threads_N` and
//! `procs_N` for each rank count (default 2, 3 and 8), plus the `__child` entry point.
//!
//! Scenario functions assert with `assert!`/`assert_eq!` and may return errors with `?`
//! (under the default errors-are-fatal handler an error already ends the job with its
//! message; scenarios that check errors set `ErrHandler::Return`).
#![allow(dead_code)]

use earlybird::{Comm, Equivalence, Result, Universe};
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Whether process `pid` still runs: it exists and is not a zombie. An orphan that nobody
/// reaps (PID 1 of some containers never does) stays a zombie, dead for every purpose here.
pub(crate) fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
        })
        .unwrap_or(false)
}

/// A scenario that borrows its universe (the harness finalizes it).
pub(crate) type Scenario = fn(&Universe) -> Result<()>;
/// A scenario that takes its universe and must finalize it itself.
pub(crate) type OwnedScenario = fn(Universe) -> Result<()>;

#[derive(Clone, Copy)]
pub(crate) enum Scn {
    Borrowed(Scenario),
    Owned(OwnedScenario),
}

/// Environment variable naming the scenario a `__child` rank runs.
pub(crate) const ENV_SCENARIO: &str = "EB_SCENARIO";
/// Timeout given to thread jobs and to ebrun (seconds).
pub(crate) const JOB_TIMEOUT_S: u64 = 60;
/// Hard bound on the wait for ebrun in the test itself.
pub(crate) const CHILD_LIMIT: Duration = Duration::from_secs(90);

fn run_scn(s: Scn, u: Universe) {
    let rank = u.world().rank();
    match s {
        Scn::Borrowed(f) => {
            if let Err(e) = f(&u) {
                panic!("rank {rank}: scenario returned an error: {e}");
            }
            if let Err(e) = u.finalize() {
                panic!("rank {rank}: finalize failed: {e}");
            }
        }
        Scn::Owned(f) => {
            if let Err(e) = f(u) {
                panic!("rank {rank}: scenario returned an error: {e}");
            }
        }
    }
}

/// Run a scenario as a thread job of `n` ranks.
pub(crate) fn run_threads(n: u32, s: Scn) {
    run_threads_asserting(n, earlybird::Assertions::empty(), s)
}

/// [`run_threads`] with every rank initialised with the assertions `a` (seed 002).
pub(crate) fn run_threads_asserting(n: u32, a: earlybird::Assertions, s: Scn) {
    let job = earlybird::threads::Job::new(n)
        .timeout(Duration::from_secs(JOB_TIMEOUT_S))
        .assertions(a);
    let out = job
        .run(|u| run_scn(s, u))
        .expect("thread job could not start");
    assert_eq!(out.len(), n as usize);
}

/// Path of the `ebrun` binary built beside this test binary (`target/<profile>/ebrun`).
pub(crate) fn ebrun_path() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("test binary lives in target/<profile>/deps");
    let p = dir.join("ebrun");
    assert!(
        p.exists(),
        "ebrun not found at {}: build the workspace: cargo test --workspace",
        p.display()
    );
    p
}

/// Entries named `earlybird-*` in /dev/shm.
pub(crate) fn shm_entries() -> Vec<String> {
    let Ok(rd) = std::fs::read_dir("/dev/shm") else {
        return vec![];
    };
    rd.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("earlybird-"))
        .collect()
}

/// What an ebrun run produced.
#[derive(Debug)]
pub(crate) struct JobOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl JobOutput {
    pub(crate) fn dump(&self) -> String {
        format!(
            "status {:?} after {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Start `ebrun -n n --timeout 60 <this binary> --exact __child ...` with `EB_SCENARIO=name`
/// (plus `env`), wait for it at most [`CHILD_LIMIT`] (killing it past that), and check that
/// the job left nothing in /dev/shm.
pub(crate) fn ebrun_scenario(name: &str, n: u32, env: &[(&str, &str)]) -> JobOutput {
    ebrun_scenario_within(name, n, env, JOB_TIMEOUT_S)
}

/// The arguments that make this test binary run scenario `EB_SCENARIO` as one rank.
pub(crate) const CHILD_ARGS: &[&str] = &[
    "--exact",
    "__child",
    "--ignored",
    "--nocapture",
    "--test-threads",
    "1",
    "-q",
];

/// Environment variable that runs the process-mode tests under another launcher:
/// `EB_LAUNCHER=hydra` starts them with MPICH's `mpiexec.hydra -n N` (PMI-1 over an
/// inherited socket), `hydra-port` with `mpiexec.hydra -pmi-port`, `hydra-pmi2` with PMI-2,
/// `openmpi` with Open MPI's `mpirun` (PMIx), `hydra-hosts` with Hydra across the three
/// namespace hosts that `suites/netns-hosts.sh up 3 $EB_NETNS_PREFIX` made (ranks placed on
/// them in turn), `ebrun-hosts` with `ebrun --hosts` across them (ranks in blocks).
pub(crate) const ENV_LAUNCHER: &str = "EB_LAUNCHER";

/// Hydra in namespace host 1 of `prefix` (`suites/netns-hosts.sh`), starting ranks on hosts
/// 1, 2 and 3 in turn through `suites/netns-ssh.sh`.
pub(crate) fn hydra_on_namespace_hosts(prefix: &str) -> Command {
    let (mut cmd, ssh) = in_namespace_host1(prefix, hydra_path());
    cmd.args(["-iface", "eth0", "-launcher", "ssh", "-launcher-exec"])
        .arg(ssh)
        .args(["-hosts", &namespace_host_list()]);
    cmd
}

/// The three namespace hosts, as `-hosts` and `--hosts` take them: each with
/// `EB_NETNS_SLOTS` slots when that is set (so that ranks share hosts: `2` puts ranks 0 and
/// 1 on host 1, rank 2 on host 2, ...), else one rank each in turn (Hydra) or in blocks
/// (ebrun).
fn namespace_host_list() -> String {
    match std::env::var("EB_NETNS_SLOTS") {
        Ok(k) => format!("10.77.0.1:{k},10.77.0.2:{k},10.77.0.3:{k}"),
        Err(_) => "10.77.0.1,10.77.0.2,10.77.0.3".into(),
    }
}

/// `program` run in namespace host 1 of `prefix`, with `EB_NETNS_PREFIX` set for
/// `suites/netns-ssh.sh`, and the path of that script.
fn in_namespace_host1(prefix: &str, program: PathBuf) -> (Command, PathBuf) {
    let suites = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../suites");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &format!("{prefix}h1")])
        .arg(program)
        .env("EB_NETNS_PREFIX", prefix);
    (cmd, suites.join("netns-ssh.sh"))
}

/// `ebrun --hosts` in namespace host 1 of `prefix` (`suites/netns-hosts.sh`), starting a
/// proxy on each of hosts 1, 2 and 3 through `suites/netns-ssh.sh`, with a timeout of
/// [`JOB_TIMEOUT_S`].
pub(crate) fn ebrun_on_namespace_hosts(prefix: &str) -> Command {
    let (mut cmd, ssh) = in_namespace_host1(prefix, ebrun_path());
    cmd.args(["--timeout", &JOB_TIMEOUT_S.to_string()])
        .args(["--hosts", &namespace_host_list(), "--launcher-exec"])
        .arg(ssh);
    cmd
}

/// Start scenario `name` on `n` ranks under MPICH's Hydra (`mpiexec.hydra`) with the extra
/// launcher arguments `args` and environment `env`, bounded as [`ebrun_scenario`].
pub(crate) fn hydra_scenario(name: &str, n: u32, args: &[&str], env: &[(&str, &str)]) -> JobOutput {
    let mut cmd = Command::new(hydra_path());
    cmd.args(args).arg("-n").arg(n.to_string());
    launch_scenario(
        cmd,
        name,
        env,
        &format!("mpiexec.hydra job {name} (-n {n} {args:?})"),
    )
}

/// Open MPI's launcher (Debian's openmpi-bin; CI installs it) for `n` ranks, as root and on
/// more ranks than cores.
pub(crate) fn open_mpi_mpirun(n: u32) -> Command {
    let mut cmd = Command::new("mpirun.openmpi");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "orte_tmpdir_base",
    ])
    .arg(open_mpi_session_base())
    .args(["-n", &n.to_string()]);
    cmd
}

/// A directory of its own for each mpirun's session files: Open MPI 4.1's mpiruns started
/// at once race to create the same `/tmp/ompi.HOST.UID` ("File exists").
pub(crate) fn open_mpi_session_base() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("ompi-{}-{k}", std::process::id()));
    std::fs::create_dir_all(&d).expect("a session directory for mpirun");
    d
}

/// MPICH's Hydra launcher (Debian's `mpich` package; CI installs it).
pub(crate) fn hydra_path() -> PathBuf {
    let p = PathBuf::from("/usr/bin/mpiexec.hydra");
    assert!(
        p.exists(),
        "{} not found: install Debian's mpich (apt-get install mpich)",
        p.display()
    );
    p
}

/// [`ebrun_scenario`] with ebrun's `--timeout` at `timeout_s` seconds.
pub(crate) fn ebrun_scenario_within(
    name: &str,
    n: u32,
    env: &[(&str, &str)],
    timeout_s: u64,
) -> JobOutput {
    let mut cmd = Command::new(ebrun_path());
    cmd.arg("-n")
        .arg(n.to_string())
        .arg("--timeout")
        .arg(timeout_s.to_string());
    launch_scenario(cmd, name, env, &format!("ebrun job {name} (-n {n})"))
}

/// Run scenario `name` with `env` by `launcher` (a command given its arguments up to the
/// program), bounded in time, and check that the job left nothing in /dev/shm.
pub(crate) fn launch_scenario(
    mut launcher: Command,
    name: &str,
    env: &[(&str, &str)],
    what: &str,
) -> JobOutput {
    let exe = std::env::current_exe().expect("current_exe");
    let before = shm_entries();
    launcher.arg(&exe).args(CHILD_ARGS).env(ENV_SCENARIO, name);
    for (k, v) in env {
        launcher.env(k, v);
    }
    let out = run_bounded(launcher, what);
    assert_no_new_shm(&before, &out);
    out
}

/// Run `cmd` with its output collected, waiting for it at most [`CHILD_LIMIT`] (killing it
/// past that: a launcher hang, since ebrun's own `--timeout` should have ended the job).
pub(crate) fn run_bounded(mut cmd: Command, what: &str) -> JobOutput {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let mut killed = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        if start.elapsed() > CHILD_LIMIT {
            let _ = child.kill();
            killed = true;
            break child.wait().expect("wait on a killed child");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = JobOutput {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    };
    assert!(
        !killed,
        "{what} did not end within {CHILD_LIMIT:?}; killed it\n{}",
        out.dump()
    );
    out
}

/// Every `earlybird-*` entry of /dev/shm that was not there before the job must be gone
/// (other jobs running concurrently unlink theirs within microseconds, so a short grace
/// period separates them from a leak).
pub(crate) fn assert_no_new_shm(before: &[String], out: &JobOutput) {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let new: Vec<String> = shm_entries()
            .into_iter()
            .filter(|e| !before.contains(e))
            .collect();
        if new.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            panic!("the job left {new:?} in /dev/shm\n{}", out.dump());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What a rank prints once it has run scenario `name` to the end. The ranks share one stdout
/// and the test harness of each writes partial lines, so the marker is bracketed and looked
/// for anywhere in the output (it is written by one `write`, so it is never split).
fn ok_marker(name: &str, rank: i32) -> String {
    format!("<eb-scenario-ok {name} {rank}>")
}

/// Run a scenario as a process job of `n` ranks under ebrun; it must exit 0, and every rank
/// must report that it ran the scenario.
pub(crate) fn run_procs(name: &str, n: u32) {
    run_procs_env(name, n, &[])
}

/// [`run_procs`] with `env` added to the ranks' environment. The launcher is ebrun, or
/// the one [`ENV_LAUNCHER`] names.
pub(crate) fn run_procs_env(name: &str, n: u32, env: &[(&str, &str)]) {
    let launcher = std::env::var(ENV_LAUNCHER).unwrap_or_default();
    let out = match launcher.as_str() {
        "" | "ebrun" => ebrun_scenario(name, n, env),
        "hydra" => hydra_scenario(name, n, &[], env),
        "hydra-port" => hydra_scenario(name, n, &["-pmi-port"], env),
        "hydra-pmi2" => {
            let mut env = env.to_vec();
            env.push(("EARLYBIRD_PMI", "2"));
            hydra_scenario(name, n, &[], &env)
        }
        "openmpi" => launch_scenario(
            open_mpi_mpirun(n),
            name,
            env,
            &format!("mpirun.openmpi job {name} (-n {n})"),
        ),
        "hydra-hosts" | "ebrun-hosts" => {
            let prefix = std::env::var("EB_NETNS_PREFIX").unwrap_or_else(|_| {
                panic!("{ENV_LAUNCHER}={launcher} needs EB_NETNS_PREFIX (suites/netns-hosts.sh up 3 PREFIX)")
            });
            let mut cmd = match launcher.as_str() {
                "hydra-hosts" => hydra_on_namespace_hosts(&prefix),
                _ => ebrun_on_namespace_hosts(&prefix),
            };
            cmd.args(["-n", &n.to_string()]);
            launch_scenario(
                cmd,
                name,
                env,
                &format!("{launcher} job {name} (-n {n}) on namespace hosts"),
            )
        }
        other => panic!(
            "{ENV_LAUNCHER}={other:?}: the launchers are ebrun, hydra, hydra-port, hydra-pmi2, \
             openmpi, hydra-hosts and ebrun-hosts"
        ),
    };
    assert_job_ran(name, n, &out);
}

/// The job of scenario `name` on `n` ranks succeeded and every rank reported running it.
pub(crate) fn assert_job_ran(name: &str, n: u32, out: &JobOutput) {
    assert!(
        out.status.success(),
        "job {name} (-n {n}) failed\n{}",
        out.dump()
    );
    let missing: Vec<i32> = (0..n as i32)
        .filter(|&r| !out.stdout.contains(&ok_marker(name, r)))
        .collect();
    assert!(
        missing.is_empty(),
        "job {name} (-n {n}) succeeded but ranks {missing:?} never reported running the scenario\n{}",
        out.dump()
    );
}

/// The body of the `__child` test: run the scenario named by `EB_SCENARIO` as one rank of
/// an ebrun job. Returns at once when the variable is unset (an ordinary `cargo test` run).
pub(crate) fn child(lookup: fn(&str) -> Option<Scn>) {
    let Ok(name) = std::env::var(ENV_SCENARIO) else {
        return;
    };
    if !earlybird::launch::launched() {
        // Set in the test's own environment but not started by a launcher: nothing to do.
        return;
    }
    let s =
        lookup(&name).unwrap_or_else(|| panic!("no scenario named {name:?} in this test binary"));
    let u = earlybird::init().unwrap_or_else(|e| panic!("earlybird::init failed: {e}"));
    let rank = u.world().rank();
    run_scn(s, u);
    println!("{}", ok_marker(&name, rank));
}

/// Generate the tests of a file's scenarios.
///
/// ```ignore
/// scenarios! {
///     ring_shift;                 // threads_2/3/8 and procs_2/3/8
///     pair_only [2];              // threads_2 and procs_2
///     owned finalize_twice [2];   // fn(Universe) -> Result<()>, finalizes itself
///     child_only fatal_rank;      // only reachable through EB_SCENARIO (no tests made)
/// }
/// ```
#[macro_export]
macro_rules! scenarios {
    (@kind borrowed $f:path) => { $crate::common::Scn::Borrowed($f) };
    (@kind owned $f:path) => { $crate::common::Scn::Owned($f) };
    (@tests $kind:ident $name:ident [$($n:tt),*]) => {
        mod $name {
            $crate::scenarios!(@each $kind $name [$($n),*]);
        }
    };
    (@each $kind:ident $name:ident []) => {};
    (@each $kind:ident $name:ident [$n:tt $(, $rest:tt)*]) => {
        $crate::scenarios!(@one $kind $name $n);
        $crate::scenarios!(@each $kind $name [$($rest),*]);
    };
    (@one $kind:ident $name:ident 1) => {
        #[test] fn threads_1() { $crate::common::run_threads(1, $crate::scenarios!(@kind $kind super::$name)); }
        #[test] fn procs_1() { $crate::common::run_procs(stringify!($name), 1); }
    };
    (@one $kind:ident $name:ident 2) => {
        #[test] fn threads_2() { $crate::common::run_threads(2, $crate::scenarios!(@kind $kind super::$name)); }
        #[test] fn procs_2() { $crate::common::run_procs(stringify!($name), 2); }
    };
    (@one $kind:ident $name:ident 3) => {
        #[test] fn threads_3() { $crate::common::run_threads(3, $crate::scenarios!(@kind $kind super::$name)); }
        #[test] fn procs_3() { $crate::common::run_procs(stringify!($name), 3); }
    };
    (@one $kind:ident $name:ident 4) => {
        #[test] fn threads_4() { $crate::common::run_threads(4, $crate::scenarios!(@kind $kind super::$name)); }
        #[test] fn procs_4() { $crate::common::run_procs(stringify!($name), 4); }
    };
    (@one $kind:ident $name:ident 8) => {
        #[test] fn threads_8() { $crate::common::run_threads(8, $crate::scenarios!(@kind $kind super::$name)); }
        #[test] fn procs_8() { $crate::common::run_procs(stringify!($name), 8); }
    };
    (@lookup [$($kind:ident $name:ident)*] [$($cname:ident)*]) => {
        fn __lookup(name: &str) -> Option<$crate::common::Scn> {
            match name {
                $(stringify!($name) => Some($crate::scenarios!(@kind $kind $name)),)*
                $(stringify!($cname) => Some($crate::common::Scn::Borrowed($cname)),)*
                _ => None,
            }
        }
        /// Entry point of the ranks of process-mode tests (see tests/common); run only
        /// by them (`--ignored`), with the scenario named in the environment.
        #[test]
        #[ignore = "a rank of a process-mode test, started by run_procs"]
        fn __child() {
            $crate::common::child(__lookup);
        }
    };
    (@parse [$($acc:tt)*] [$($c:tt)*]) => {
        $crate::scenarios!(@emit [$($acc)*] [$($c)*]);
    };
    (@parse [$($acc:tt)*] [$($c:tt)*] child_only $name:ident; $($rest:tt)*) => {
        $crate::scenarios!(@parse [$($acc)*] [$($c)* $name] $($rest)*);
    };
    (@parse [$($acc:tt)*] [$($c:tt)*] owned $name:ident [$($n:tt),*]; $($rest:tt)*) => {
        $crate::scenarios!(@parse [$($acc)* (owned $name [$($n),*])] [$($c)*] $($rest)*);
    };
    (@parse [$($acc:tt)*] [$($c:tt)*] owned $name:ident; $($rest:tt)*) => {
        $crate::scenarios!(@parse [$($acc)* (owned $name [2, 3, 8])] [$($c)*] $($rest)*);
    };
    (@parse [$($acc:tt)*] [$($c:tt)*] $name:ident [$($n:tt),*]; $($rest:tt)*) => {
        $crate::scenarios!(@parse [$($acc)* (borrowed $name [$($n),*])] [$($c)*] $($rest)*);
    };
    (@parse [$($acc:tt)*] [$($c:tt)*] $name:ident; $($rest:tt)*) => {
        $crate::scenarios!(@parse [$($acc)* (borrowed $name [2, 3, 8])] [$($c)*] $($rest)*);
    };
    (@emit [$(($kind:ident $name:ident [$($n:tt),*]))*] [$($c:ident)*]) => {
        $( $crate::scenarios!(@tests $kind $name [$($n),*]); )*
        $crate::scenarios!(@lookup [$($kind $name)*] [$($c)*]);
    };
    // Entry (last, so that it never swallows the internal rules): normalise every line to `kind name [counts]` or `child name`.
    ($($body:tt)*) => {
        $crate::scenarios!(@parse [] [] $($body)*);
    };
}

/// Run one collective in form `$form`: 0 blocking, 1 nonblocking, 2 persistent (started
/// twice). The arguments are evaluated in that form's arm only (typed views are moved).
#[macro_export]
macro_rules! run_forms {
    ($form:expr, $c:expr, $b:ident, $i:ident, $p:ident ($($arg:expr),*)) => {
        match $form {
            0 => $c.$b($($arg),*)?,
            1 => earlybird::scope(|s| $c.$i(s, $($arg),*)?.wait().map(|_| ()))?,
            _ => earlybird::scope(|s| -> earlybird::Result<()> {
                let mut r = $c.$p(s, $($arg),*)?;
                for _ in 0..2 {
                    r.start()?;
                    r.wait()?;
                }
                Ok(())
            })?,
        }
    };
}

// ---- helpers for scenarios ----------------------------------------------------------------

/// The message of a panic caught by `catch_unwind` (a thread job re-raises its ranks').
pub(crate) fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Right and left neighbours on the ring.
pub(crate) fn ring(w: &Comm) -> (i32, i32) {
    let (r, n) = (w.rank(), w.size());
    ((r + 1) % n, (r + n - 1) % n)
}

/// Deterministic bytes for message `seed` of `len` bytes.
pub(crate) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            if i % 8 == 0 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            (x >> ((i % 8) * 8)) as u8
        })
        .collect()
}

/// Element-by-element comparison that names the first difference (without printing
/// megabytes on failure).
#[track_caller]
pub(crate) fn check_eq<T: Equivalence + PartialEq + std::fmt::Debug>(
    what: &str,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what}: length differs");
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        let bad = got.iter().zip(want).filter(|(a, b)| a != b).count();
        panic!(
            "{what}: element {i} is {:?}, expected {:?} ({bad} of {} elements differ)",
            got[i],
            want[i],
            got.len()
        );
    }
}

/// The message sizes (bytes) every data-moving scenario covers: 0, 8, 1 KiB, the eager limit
/// and one byte past it, 64 KiB, 1 MiB and 4 MiB.
pub(crate) fn sizes(u: &Universe) -> Vec<usize> {
    let e = u.eager_limit_bytes();
    let mut v = vec![0, 8, 1024, e, e + 1, 64 << 10, 1 << 20, 4 << 20];
    v.sort_unstable();
    v.dedup();
    v
}

/// Sizes up to 64 KiB (for scenarios that repeat many times).
pub(crate) fn small_sizes(u: &Universe) -> Vec<usize> {
    sizes(u).into_iter().filter(|&s| s <= 64 << 10).collect()
}

/// Assert that `r` failed with `class` and a message containing `names` (the bad value).
#[track_caller]
pub(crate) fn assert_err<T: std::fmt::Debug>(
    r: Result<T>,
    class: earlybird::ErrorClass,
    names: &str,
) {
    match r {
        Ok(v) => panic!("expected {class} naming {names:?}, got Ok({v:?})"),
        Err(e) => assert!(
            e.class() == class && e.detail().contains(names),
            "expected {class} naming {names:?}, got {e}"
        ),
    }
}

/// Run `f` once per algorithm earlybird has for `coll`, on a dup of `w` whose info forces
/// that algorithm (`earlybird_coll_<coll>`), and once on `w` itself (the default choice).
/// `f` gets the communicator and the forced name (`""` for the default). An algorithm whose
/// restrictions the call does not meet falls back to the default, so `f` may check
/// `earlybird::coll::last_algorithm()` only when it knows the algorithm fits.
#[allow(dead_code)]
pub(crate) fn each_algorithm(
    w: &Comm,
    coll: earlybird::Coll,
    mut f: impl FnMut(&Comm, &str) -> Result<()>,
) -> Result<()> {
    f(w, "")?;
    for a in earlybird::coll::algorithms()
        .iter()
        .filter(|a| a.coll == coll)
    {
        let mut info = earlybird::Info::new();
        info.set(&format!("earlybird_coll_{}", coll.name()), a.name)?;
        let c = w.dup_with_info(&info)?;
        f(&c, a.name).map_err(|e| {
            earlybird::Error::new(
                e.class(),
                format!("{} forced to {}: {e}", coll.name(), a.name),
            )
        })?;
        c.free()?;
    }
    Ok(())
}

/// `target/<profile>/examples/<name>`, which `cargo test` builds beside the tests (unless it
/// is told to build only some test targets).
pub(crate) fn example_path(name: &str) -> PathBuf {
    let p = ebrun_path().with_file_name("examples").join(name);
    assert!(
        p.exists(),
        "{} not found: `cargo test -p earlybird` builds it, `--test {name}` alone does not (run `cargo build -p earlybird --example {name}` first)",
        p.display()
    );
    p
}

/// Run example `name` under `ebrun -n n --timeout 60` with `args`, checking that it leaves
/// nothing behind in the shared-memory directory.
pub(crate) fn run_example(name: &str, n: u32, args: &[&str]) -> JobOutput {
    let before = shm_entries();
    let mut cmd = Command::new(ebrun_path());
    cmd.args(["-n", &n.to_string(), "--timeout", "60"])
        .arg(example_path(name))
        .args(args);
    let out = run_bounded(cmd, &format!("example {name} (-n {n})"));
    assert_no_new_shm(&before, &out);
    out
}

/// Wait (bounded) until `sender` has published that it is blocked in a send to this rank
/// with `tag`: it has filled what the fabric holds for this pair and waits for receives.
pub(crate) fn await_sender_blocked(u: &Universe, sender: i32, tag: i32) {
    let me = u.world().rank();
    u.job_segment()
        .await_blocked(sender as u32, Duration::from_secs(30), |p| {
            p.what == earlybird::launch::BlockedIn::Send && p.peer == Some(me) && p.tag == tag
        })
        .unwrap_or_else(|e| panic!("rank {sender} never blocked sending to rank {me}: {e}"));
}

/// A small deterministic generator (xorshift): the same sequence on every rank from one
/// seed, for property-style tests.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub(crate) fn signed(&mut self, n: i64) -> isize {
        (self.below(2 * n as u64 + 1) as i64 - n) as isize
    }
}

/// The product of two 2x2 integer matrices (row-major): an associative operation that does
/// not commute, to check that reductions keep rank order.
pub(crate) fn mat_mul(x: [i64; 4], y: [i64; 4]) -> [i64; 4] {
    [
        x[0] * y[0] + x[1] * y[2],
        x[0] * y[1] + x[1] * y[3],
        x[2] * y[0] + x[3] * y[2],
        x[2] * y[1] + x[3] * y[3],
    ]
}

/// Rank `r`'s matrix for element `i` (products of these differ in every order).
pub(crate) fn mat(r: i32, i: usize) -> [i64; 4] {
    [1, r as i64 + 1, i as i64 % 3, 1]
}

/// [`mat_mul`] as a user operation (`b = a b` element by element).
pub(crate) fn matmul_op() -> earlybird::Op {
    earlybird::Op::user(false, |a: &[[i64; 4]], b: &mut [[i64; 4]]| {
        for (x, y) in a.iter().zip(b.iter_mut()) {
            *y = mat_mul(*x, *y);
        }
    })
}

/// CPUs online on this host, as `/sys/devices/system/cpu/online` lists them ("0-1", "0-3,6"):
/// what the library compares a communicator's size with to tell whether its ranks share
/// cores (not this process's affinity mask).
pub(crate) fn host_cpus() -> usize {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .expect("/sys/devices/system/cpu/online");
    list.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}
