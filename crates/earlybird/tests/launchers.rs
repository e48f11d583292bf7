//! Jobs started by launchers other than ebrun: MPICH's Hydra (`mpiexec.hydra`, Debian's
//! `mpich`) speaking PMI-1 over an inherited socket, PMI-1 over a TCP port (`-pmi-port`) and
//! PMI-2; Open MPI's `mpirun` through PMIx; a real one-node Slurm; MPI_Abort's exit code
//! reaching the launcher; a job spanning several hosts refused clearly; launchers earlybird
//! cannot talk to refused at init rather than run as singletons; and a fake PMI server whose
//! reply is malformed.
//!
//! The whole conformance suite runs under Hydra too: `EB_LAUNCHER=hydra cargo test procs_`
//! (or `hydra-port`, `hydra-pmi2`; see `tests/common`).

mod common;
use common::*;
use earlybird::{Op, Result, Universe};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// Every rank passes a token around the ring, sums the ranks, and checks that it shares a
/// node with every other rank (one host).
fn ring_and_sum(u: &Universe) -> Result<()> {
    let w = u.world();
    let (right, left) = ring(w);
    let mut got = [0i64];
    w.sendrecv(&[w.rank() as i64], right, 3, &mut got[..], left, 3)?;
    assert_eq!(got[0], left as i64);
    let mut sum = [0i64];
    w.allreduce(&[w.rank() as i64 + 1], &mut sum[..], &Op::SUM)?;
    let n = w.size() as i64;
    assert_eq!(sum[0], n * (n + 1) / 2);
    let node = w
        .split_type(earlybird::SplitType::Shared, 0, &earlybird::Info::new())?
        .expect("every rank is in a shared-memory group");
    assert_eq!(node.size(), w.size());
    Ok(())
}

/// The last rank calls MPI_Abort with code 7 while the others wait for it.
fn abort_seven(u: &Universe) -> Result<()> {
    let w = u.world();
    let last = w.size() - 1;
    if w.rank() == last {
        w.abort(7);
    }
    let mut b = [0u8];
    w.recv(&mut b, last, 0)?;
    Ok(())
}

/// The aborting rank of [`abort_seven`] on 3 ranks said why on stderr.
fn assert_abort_named(out: &JobOutput) {
    assert!(
        out.stderr
            .contains("rank 2: MPI_Abort on communicator \"MPI_COMM_WORLD\""),
        "{}",
        out.dump()
    );
}

/// The last rank leaves without MPI (exit status 3) while the others wait for it.
fn exit_early(u: &Universe) -> Result<()> {
    let w = u.world();
    let last = w.size() - 1;
    if w.rank() == last {
        std::process::exit(3);
    }
    let mut b = [0u8];
    w.recv(&mut b, last, 0)?;
    Ok(())
}

/// Write this rank's pid in the directory `EB_PID_DIR` names, as a file named by its rank.
fn record_pid(w: &earlybird::Comm) {
    let dir = std::env::var("EB_PID_DIR").expect("EB_PID_DIR");
    let f = std::path::Path::new(&dir).join(w.rank().to_string());
    std::fs::write(f, std::process::id().to_string()).expect("record the pid");
}

/// Every rank records its pid; then the last rank is killed (SIGKILL) while the others wait
/// for it.
fn killed_rank(u: &Universe) -> Result<()> {
    let w = u.world();
    record_pid(w);
    w.barrier()?;
    let last = w.size() - 1;
    if w.rank() == last {
        let me = std::process::id().to_string();
        let _ = Command::new("kill").args(["-KILL", &me]).status();
        std::thread::sleep(Duration::from_secs(60));
    }
    let mut b = [0u8];
    w.recv(&mut b, last, 0)?;
    Ok(())
}

/// Every rank records its pid; then rank 0 kills its parent, the launcher's proxy on this
/// host, while every rank waits in a receive that never completes.
fn proxy_killed(u: &Universe) -> Result<()> {
    let w = u.world();
    record_pid(w);
    w.barrier()?;
    if w.rank() == 0 {
        let proxy = std::os::unix::process::parent_id().to_string();
        let _ = Command::new("kill").args(["-KILL", &proxy]).status();
    }
    let mut b = [0u8];
    w.recv(&mut b, (w.rank() + 1) % w.size(), 0)?;
    Ok(())
}

/// Every rank records its pid; then the last rank takes its host's network link down (it
/// runs in that host's network namespace, as root) while every rank waits in a receive that
/// never completes.
fn link_down(u: &Universe) -> Result<()> {
    let w = u.world();
    record_pid(w);
    w.barrier()?;
    if w.rank() == w.size() - 1 {
        let st = Command::new("ip")
            .args(["link", "set", "eth0", "down"])
            .status();
        assert!(st.is_ok_and(|s| s.success()), "ip link set eth0 down");
    }
    let mut b = [0u8];
    w.recv(&mut b, (w.rank() + 1) % w.size(), 0)?;
    Ok(())
}

/// Ranks on several hosts (`EB_RANKS_PER_HOST` each): eager and rendezvous messages around
/// the ring, a flood past the flow limit, collectives, the shared-memory split (which groups
/// the ranks of each host), and a window, which needs shared memory and is refused with a
/// clear error rather than mapping another host's descriptor.
fn across_hosts(u: &Universe) -> Result<()> {
    let w = u.world();
    w.set_errhandler(earlybird::ErrHandler::Return);
    let (right, left) = ring(w);
    let me = w.rank();
    let mut got = [0i64];
    w.sendrecv(&[me as i64], right, 3, &mut got[..], left, 3)?;
    assert_eq!(got[0], left as i64);
    // Small and large eager messages in turn (a small one is copied out of its receive
    // buffer, a large one keeps it): every size arrives whole, whatever came before.
    let sizes = [8usize, 8192, 8, 8192, 32768, 100, 65536, 4096, 4097, 65536];
    for round in 0..3u64 {
        let data: Vec<Vec<u8>> = (0..sizes.len())
            .map(|i| pattern(round * 100 + i as u64 + me as u64, sizes[i]))
            .collect();
        earlybird::scope(|s| -> Result<()> {
            let mut reqs = Vec::new();
            for (i, d) in data.iter().enumerate() {
                reqs.push(w.isend(s, &d[..], right, 40 + i as i32)?);
            }
            for (i, &n) in sizes.iter().enumerate() {
                let mut b = vec![0u8; n];
                w.recv(&mut b[..], left, 40 + i as i32)?;
                assert_eq!(
                    b,
                    pattern(round * 100 + i as u64 + left as u64, n),
                    "{n} bytes"
                );
            }
            earlybird::wait_all(&mut reqs)?;
            Ok(())
        })?;
    }
    // 1 MiB: a rendezvous pulled across the network.
    let big: Vec<u64> = (0..1u64 << 17).map(|i| i * 7 + me as u64).collect();
    let mut back = vec![0u64; big.len()];
    w.sendrecv(&big[..], right, 4, &mut back[..], left, 4)?;
    assert!(back
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u64 * 7 + left as u64));
    // 1500 messages of 1 KiB, past the 1 MiB flow limit, before the receiver looks.
    let msg: Vec<u8> = pattern(me as u64, 1024);
    earlybird::scope(|s| -> Result<()> {
        let mut reqs = Vec::new();
        for _ in 0..1500 {
            reqs.push(w.isend(s, &msg[..], right, 5)?);
        }
        w.barrier()?;
        let mut b = vec![0u8; 1024];
        for _ in 0..1500 {
            w.recv(&mut b[..], left, 5)?;
            assert_eq!(b, pattern(left as u64, 1024));
        }
        earlybird::wait_all(&mut reqs)?;
        Ok(())
    })?;
    let mut sum = [0i64];
    w.allreduce(&[me as i64 + 1], &mut sum[..], &Op::SUM)?;
    let n = w.size() as i64;
    assert_eq!(sum[0], n * (n + 1) / 2);
    let mut b = [0u32; 4];
    if me == w.size() - 1 {
        b = [1, 2, 3, 4];
    }
    w.bcast(&mut b[..], w.size() - 1)?;
    assert_eq!(b, [1, 2, 3, 4]);
    let send: Vec<i32> = (0..w.size()).map(|r| me * 100 + r).collect();
    let mut recv = vec![0i32; w.size() as usize];
    w.alltoall(&send[..], &mut recv[..])?;
    assert!(recv
        .iter()
        .enumerate()
        .all(|(r, &v)| v == r as i32 * 100 + me));
    let node = w
        .split_type(earlybird::SplitType::Shared, 0, &earlybird::Info::new())?
        .expect("every rank is in a shared-memory group");
    if let Ok(per) = std::env::var("EB_RANKS_PER_HOST") {
        assert_eq!(node.size().to_string(), per, "ranks sharing this host");
    }
    let win = w.win_allocate(64, 1, &earlybird::Info::new());
    let e = win.err().expect("a window across hosts is refused");
    assert!(e.to_string().contains("another host"), "{e}");
    w.barrier()
}

scenarios! {
    child_only across_hosts;
    child_only ring_and_sum;
    child_only abort_seven;
    child_only exit_early;
    child_only killed_rank;
    child_only proxy_killed;
    child_only link_down;
}

/// Run scenario `name` on `n` ranks under Hydra with a directory for the ranks' pids, and
/// check that every rank process is gone within 2 s of the job's end.
fn hydra_job_leaving_no_rank(name: &str, n: u32) -> JobOutput {
    let mut hydra = Command::new(hydra_path());
    hydra.args(["-n", &n.to_string()]);
    job_leaving_no_rank(hydra, name, n)
}

/// Run scenario `name` on `n` ranks by `launcher` (given its arguments up to the program)
/// with a directory for the ranks' pids, and check that every rank process is gone within
/// 2 s of the job's end.
fn job_leaving_no_rank(launcher: Command, name: &str, n: u32) -> JobOutput {
    // Tests of this binary run at once, some with the same scenario.
    static JOBS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let job = JOBS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pids-{name}-{}-{job}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("pid directory");
    let d = dir.to_string_lossy().to_string();
    let out = launch_scenario(
        launcher,
        name,
        &[("EB_PID_DIR", &d)],
        &format!("job {name}"),
    );
    let pids: Vec<String> = (0..n)
        .filter_map(|r| std::fs::read_to_string(dir.join(r.to_string())).ok())
        .collect();
    assert_eq!(
        pids.len(),
        n as usize,
        "every rank records its pid\n{}",
        out.dump()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    for p in pids {
        while p.trim().parse().is_ok_and(running) {
            assert!(
                std::time::Instant::now() < deadline,
                "rank process {p} outlived its job\n{}",
                out.dump()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// Faults under Hydra: a rank killed, and the proxy that started the ranks killed. The job
/// ends (Hydra names the signal; the ranks whose proxy died die with it), without a hang and
/// with no rank left running.
#[test]
fn hydra_jobs_end_when_a_rank_or_the_proxy_is_killed() {
    let out = hydra_job_leaving_no_rank("killed_rank", 3);
    assert!(!out.status.success(), "{}", out.dump());
    assert!(
        out.stdout.contains("signal 9") || out.stderr.contains("signal 9"),
        "{}",
        out.dump()
    );
    let out = hydra_job_leaving_no_rank("proxy_killed", 3);
    assert!(!out.status.success(), "{}", out.dump());
}

#[test]
fn hydra_pmi1_over_an_inherited_socket() {
    for n in [1, 2, 3] {
        let out = hydra_scenario("ring_and_sum", n, &[], &[]);
        assert_job_ran("ring_and_sum", n, &out);
    }
}

#[test]
fn hydra_pmi1_over_a_port() {
    for n in [2, 3] {
        let out = hydra_scenario("ring_and_sum", n, &["-pmi-port"], &[]);
        assert_job_ran("ring_and_sum", n, &out);
    }
}

#[test]
fn hydra_pmi2() {
    for n in [2, 3] {
        let out = hydra_scenario("ring_and_sum", n, &[], &[("EARLYBIRD_PMI", "2")]);
        assert_job_ran("ring_and_sum", n, &out);
    }
}

/// MPI_Abort reaches Hydra as PMI's abort: mpiexec exits with the code, at once, in both
/// PMI-1 modes. Hydra 4.0.2's PMI-2 server does not know PMI-2's `abort` (Slurm's does): it
/// ends the job at once too, but as a failure of its own ("Unrecognized PMI command: abort",
/// status 255, or mpiexec killed by SIGPIPE while it cleans up).
#[test]
fn hydra_exits_with_the_abort_code() {
    let modes: [(&[&str], &[(&str, &str)], Option<i32>); 3] = [
        (&[], &[], Some(7)),
        (&["-pmi-port"], &[], Some(7)),
        (&[], &[("EARLYBIRD_PMI", "2")], None),
    ];
    for (args, env, status) in modes {
        let out = hydra_scenario("abort_seven", 3, args, env);
        match status {
            Some(_) => {
                assert_eq!(
                    out.status.code(),
                    status,
                    "{args:?} {env:?}\n{}",
                    out.dump()
                );
                assert_abort_named(&out);
            }
            None => assert!(!out.status.success(), "{args:?} {env:?}\n{}", out.dump()),
        }
        // The other ranks are ended by Hydra, not by a 10 s wait of their own.
        assert!(out.elapsed < Duration::from_secs(8), "{}", out.dump());
    }
}

/// Two "hosts" by Hydra's fork launcher on this machine: PMI_process_mapping says two nodes,
/// so the ranks reach each other through the network (libfabric on the loopback here) and
/// each is alone in its shared-memory group. A provider that does not exist is refused at
/// init, naming the network, instead of running a wrong job.
#[test]
fn a_job_on_two_hosts_of_one_machine_runs_over_the_network() {
    let hosts = ["-launcher", "fork", "-hosts", "127.0.0.1,127.0.0.2"];
    let out = hydra_scenario(
        "across_hosts",
        2,
        &hosts,
        &[("FI_TCP_IFACE", "lo"), ("EB_RANKS_PER_HOST", "1")],
    );
    assert_job_ran("across_hosts", 2, &out);
    let out = hydra_scenario("ring_and_sum", 2, &hosts, &[("FI_PROVIDER", "nonesuch")]);
    assert!(!out.status.success(), "{}", out.dump());
    assert!(
        out.stderr.contains(
            "spans 2 hosts (PMI_process_mapping), and the network between them cannot be opened"
        ),
        "{}",
        out.dump()
    );
}

/// What `earlybird::init` gives this test binary when started (not by a launcher) with
/// `env`: `Ok(size)` or the error's text.
fn init_with(env: &[(&str, &str)]) -> std::result::Result<i32, String> {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", "__probe_init", "--ignored", "--nocapture", "-q"])
        .env("EB_PROBE_INIT", "1");
    for k in [
        "PMI_FD",
        "PMI_PORT",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_ID",
        "EARLYBIRD_RANK",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = run_bounded(cmd, "init probe");
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("probe: "))
        .unwrap_or_else(|| panic!("the probe printed no result\n{}", out.dump()))
        .to_string();
    match line.strip_prefix("size ") {
        Some(n) => Ok(n.parse().expect("a size")),
        None => Err(line),
    }
}

/// Run by [`init_with`] only: init, print the outcome, finalize.
#[test]
#[ignore = "run by init_with in its own process"]
fn __probe_init() {
    if std::env::var_os("EB_PROBE_INIT").is_none() {
        return;
    }
    match earlybird::init() {
        Ok(u) => {
            println!("probe: size {}", u.world().size());
            u.finalize().expect("finalize");
        }
        Err(e) => println!("probe: {e}"),
    }
}

#[test]
fn without_a_launcher_a_program_is_a_singleton() {
    assert_eq!(init_with(&[]), Ok(1));
}

/// Open MPI's `mpirun` (PMIx, through the system's libpmix): jobs run, and MPI_Abort's code
/// is mpirun's status.
#[test]
fn open_mpi_mpirun_through_pmix() {
    for n in [1, 2, 3] {
        let out = launch_scenario(open_mpi_mpirun(n), "ring_and_sum", &[], "mpirun.openmpi");
        assert_job_ran("ring_and_sum", n, &out);
    }
    let out = launch_scenario(open_mpi_mpirun(3), "abort_seven", &[], "mpirun.openmpi");
    assert_eq!(out.status.code(), Some(7), "{}", out.dump());
    assert_abort_named(&out);
}

/// Launchers earlybird cannot talk to, or half an offer of PMI, fail init with the reason:
/// never N singletons.
#[test]
fn foreign_launchers_and_half_offers_fail_init() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("PMIX_RANK", "0"), ("PMIX_NAMESPACE", "ns")],
            "PMIx launcher",
        ),
        (&[("OMPI_COMM_WORLD_SIZE", "2")], "Open MPI's mpirun"),
        (
            &[("SLURM_PROCID", "1"), ("SLURM_STEP_NUM_TASKS", "4")],
            "srun without PMI",
        ),
        (
            &[("PMI_RANK", "0"), ("PMI_SIZE", "2")],
            "neither PMI_FD nor PMI_PORT",
        ),
        (&[("PMI_PORT", "127.0.0.1:1")], "PMI_ID is not"),
        (
            &[("PMI_FD", "x"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")],
            "bad PMI_FD=\"x\"",
        ),
        (
            &[("PMI_FD", "9"), ("PMI_RANK", "0")],
            "without PMI_RANK and PMI_SIZE",
        ),
        (
            &[
                ("PMI_FD", "9"),
                ("PMI_RANK", "0"),
                ("PMI_SIZE", "2"),
                ("EARLYBIRD_PMI", "3"),
            ],
            "EARLYBIRD_PMI=\"3\"",
        ),
        // An offer whose descriptor is not open in the process.
        (
            &[("PMI_FD", "987"), ("PMI_RANK", "0"), ("PMI_SIZE", "2")],
            "PMI_FD=987",
        ),
    ];
    for (env, want) in cases {
        match init_with(env) {
            Ok(n) => panic!("{env:?}: init succeeded with size {n}; want an error with {want:?}"),
            Err(e) => assert!(e.contains(want), "{env:?}: want {want:?} in {e:?}"),
        }
    }
}

/// A fake PMI server on a port that answers `reply` to the first request after the
/// initack; returns the address for `PMI_PORT`.
fn fake_port_server(reply: &'static str) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind on the loopback");
    let addr = l.local_addr().expect("address").to_string();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().expect("the rank connects");
        let mut w = s.try_clone().expect("clone");
        let mut r = BufReader::new(s);
        let mut seen = Vec::new();
        let mut line = String::new();
        r.read_line(&mut line).expect("initack");
        seen.push(line.trim_end().to_string());
        w.write_all(b"cmd=initack\ncmd=set size=2\ncmd=set rank=1\ncmd=set debug=0\n")
            .expect("write");
        line.clear();
        r.read_line(&mut line).expect("init");
        seen.push(line.trim_end().to_string());
        w.write_all(reply.as_bytes()).expect("write");
        // Keep the connection open until the rank has read the reply and given up.
        line.clear();
        let _ = r.read_line(&mut line);
        seen
    });
    (addr, t)
}

#[test]
fn a_malformed_pmi_reply_fails_init_quoting_it() {
    for (reply, want) in [
        ("this is no reply\n", "malformed reply \"this is no reply\""),
        (
            "cmd=response_to_init pmi_version=1 rc=-1 msg=refused\n",
            "rc=-1 refused",
        ),
        ("cmd=barrier_out\n", "expected response_to_init"),
    ] {
        let (addr, t) = fake_port_server(reply);
        let e = init_with(&[("PMI_PORT", &addr), ("PMI_ID", "1")])
            .expect_err("a malformed reply must fail init");
        assert!(e.contains(want), "want {want:?} in {e:?}");
        let seen = t.join().expect("server");
        assert_eq!(
            seen,
            [
                "cmd=initack pmiid=1",
                "cmd=init pmi_version=1 pmi_subversion=1"
            ]
        );
    }
}

/// A one-node Slurm cluster (`suites/slurm-one-node.sh`, Debian's slurmd, slurmctld and munge;
/// CI installs them), stopped when dropped.
struct Slurm {
    dir: std::path::PathBuf,
    conf: String,
}

impl Slurm {
    fn script() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../suites/slurm-one-node.sh")
    }

    fn up() -> Slurm {
        assert!(
            std::path::Path::new("/usr/sbin/slurmd").exists(),
            "Slurm is not installed: apt-get install slurmd slurmctld slurm-client munge"
        );
        let dir = std::env::temp_dir().join(format!("earlybird-slurm-{}", std::process::id()));
        let mut cmd = Command::new("bash");
        cmd.arg(Self::script()).arg("up").arg(&dir);
        // Made before the start, so that a failed start is stopped too.
        let mut s = Slurm {
            dir,
            conf: String::new(),
        };
        let out = run_bounded(cmd, "slurm-one-node.sh up");
        assert!(out.status.success(), "Slurm did not start\n{}", out.dump());
        s.conf = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("SLURM_CONF="))
            .expect("the script prints SLURM_CONF")
            .to_string();
        s
    }

    /// `srun ARGS -n N <this binary> __child` running scenario `name`.
    fn srun(&self, name: &str, n: u32, args: &[&str]) -> JobOutput {
        let mut cmd = Command::new("srun");
        cmd.env("SLURM_CONF", &self.conf)
            .args(args)
            .args(["-n", &n.to_string(), "--time=2"]);
        launch_scenario(cmd, name, &[], &format!("srun {args:?} -n {n} {name}"))
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::script())
            .arg("down")
            .arg(&self.dir)
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Slurm for real: `srun --mpi=pmi2` speaks PMI-2 (Slurm's native wire) to the step daemon;
/// MPI_Abort ends the step at once; a rank that dies is found by the others; `srun
/// --mpi=pmix` goes through libpmix; `srun` without PMI fails init instead of running
/// singletons.
#[test]
fn srun_with_pmi2_and_pmix() {
    let slurm = Slurm::up();
    for n in [1, 2, 4] {
        let out = slurm.srun("ring_and_sum", n, &["--mpi=pmi2"]);
        assert_job_ran("ring_and_sum", n, &out);
    }
    // Slurm cancels the step at once; srun exits with the highest status of its tasks (137
    // for those it killed) and names the aborting task's code.
    let out = slurm.srun("abort_seven", 3, &["--mpi=pmi2"]);
    assert!(!out.status.success(), "{}", out.dump());
    assert!(
        out.stderr.contains("task 2: Exited with exit code 7"),
        "{}",
        out.dump()
    );
    assert_abort_named(&out);
    // A rank that leaves without MPI: Slurm leaves the others running (KillOnBadExit is 0),
    // so they find the dead process themselves and end the job, naming it.
    let out = slurm.srun("exit_early", 3, &["--mpi=pmi2"]);
    assert!(!out.status.success(), "{}", out.dump());
    assert!(
        out.stderr.contains("rank 2 (pid") && out.stderr.contains("ended without finalize"),
        "{}",
        out.dump()
    );
    // Slurm's PMIx plugin: earlybird joins through libpmix.
    let out = slurm.srun("ring_and_sum", 3, &["--mpi=pmix"]);
    assert_job_ran("ring_and_sum", 3, &out);
    let out = slurm.srun("ring_and_sum", 2, &["--mpi=none"]);
    assert!(!out.status.success(), "{}", out.dump());
    assert!(out.stderr.contains("srun without PMI"), "{}", out.dump());
}

/// Three test hosts (`suites/netns-hosts.sh`: network namespaces on a bridge of their own,
/// root only), removed when dropped.
struct NetnsHosts {
    prefix: String,
    n: u32,
}

impl NetnsHosts {
    fn suites() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../suites")
    }

    fn up(n: u32) -> NetnsHosts {
        // Tests of this binary run at once: each set of hosts gets its own names.
        static SETS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let set = SETS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let h = NetnsHosts {
            prefix: format!("eb{}x{set}", std::process::id()),
            n,
        };
        let mut cmd = Command::new("bash");
        cmd.arg(Self::suites().join("netns-hosts.sh"))
            .args(["up", &n.to_string(), &h.prefix]);
        let out = run_bounded(cmd, "netns-hosts.sh up");
        assert!(out.status.success(), "no namespace hosts\n{}", out.dump());
        h
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(Self::suites().join("netns-hosts.sh"))
            .args(["down", &self.n.to_string(), &self.prefix])
            .status();
    }
}

/// Hydra, then Open MPI's mpirun, across three namespace hosts, each with its own address,
/// host name and /dev/shm (their daemons started through `suites/netns-ssh.sh` as through
/// ssh), two ranks on each: PMI's mapping (cyclic under Hydra, blocks under mpirun), then
/// PMIx's node ids, say where the ranks are, and the job runs over shared memory within a
/// host and the network between hosts.
#[test]
fn a_job_runs_on_three_namespace_hosts() {
    let hosts = NetnsHosts::up(3);
    let ssh = NetnsHosts::suites().join("netns-ssh.sh");
    let in_host1 = || {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &format!("{}h1", hosts.prefix)]);
        cmd
    };
    let env = [
        ("EB_NETNS_PREFIX", hosts.prefix.as_str()),
        ("EB_RANKS_PER_HOST", "2"),
    ];
    let mut hydra = hydra_on_namespace_hosts(&hosts.prefix);
    hydra.args(["-n", "6"]);
    let mut mpirun = in_host1();
    mpirun
        .args(["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe"])
        .args(["--mca", "orte_tmpdir_base"])
        .arg(open_mpi_session_base())
        .args([
            "--mca",
            "oob_tcp_if_include",
            "eth0",
            "--mca",
            "plm_rsh_agent",
        ])
        .arg(&ssh)
        .args(["--host", "10.77.0.1:2,10.77.0.2:2,10.77.0.3:2", "-n", "6"]);
    for launcher in [hydra, mpirun] {
        let out = launch_scenario(
            launcher,
            "across_hosts",
            &env,
            "a job across namespace hosts",
        );
        assert_job_ran("across_hosts", 6, &out);
    }
    // Faults: the last rank (on host 3) killed while the others wait for it, then the proxy
    // of host 1 killed. The job ends, naming the host and the signal, and no rank process is
    // left on any host (the namespaces share the PID space, so /proc shows them all).
    let mut hydra = hydra_on_namespace_hosts(&hosts.prefix);
    hydra.args(["-n", "6"]);
    let out = job_leaving_no_rank(hydra, "killed_rank", 6);
    assert!(!out.status.success(), "{}", out.dump());
    // Hydra names the host and the signal (a remote proxy reports it as the exit code).
    assert!(
        out.stdout.contains("RUNNING AT 10.77.0.3") && out.stdout.contains("EXIT CODE: 9"),
        "{}",
        out.dump()
    );
    let mut hydra = hydra_on_namespace_hosts(&hosts.prefix);
    hydra.args(["-n", "6"]);
    let out = job_leaving_no_rank(hydra, "proxy_killed", 6);
    assert!(!out.status.success(), "{}", out.dump());
    hosts.down_leaving_nothing();
}

impl NetnsHosts {
    /// The processes still running on the hosts.
    fn pids(&self) -> Vec<String> {
        (1..=self.n)
            .flat_map(|k| {
                let out = Command::new("ip")
                    .args(["netns", "pids", &format!("{}h{k}", self.prefix)])
                    .output()
                    .expect("ip netns pids");
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Remove the hosts; whatever the launchers left on them (daemons whose "ssh" was
    /// killed) goes with them, within 2 s.
    fn down_leaving_nothing(self) {
        let left = self.pids();
        drop(self);
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        for p in left {
            while p.parse().is_ok_and(running) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "process {p} of a namespace host outlived it"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// `ebrun --hosts` across three namespace hosts (a proxy on each through
/// `suites/netns-ssh.sh`, PMI-1 served by ebrun): the job runs with two ranks on each host;
/// then faults, each ending the job with the cause named, its status, and no process left on
/// any host: a rank killed, a rank aborting, a rank leaving without finalize, the proxy of
/// a host killed, and a host's link taken down.
#[test]
fn ebrun_runs_a_job_across_namespace_hosts_and_ends_it_on_faults() {
    let hosts = NetnsHosts::up(3);
    let ebrun = |n: u32| {
        let mut cmd = ebrun_on_namespace_hosts(&hosts.prefix);
        cmd.args(["-n", &n.to_string()]);
        cmd
    };
    // After each job, nothing of it is left on any host: the proxies and the "ssh" that
    // started them exit by themselves.
    let nothing_left = |out: &JobOutput| {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let left = hosts.pids();
            if left.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "processes {left:?} outlived the job on the hosts\n{}",
                out.dump()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let out = launch_scenario(
        ebrun(6),
        "across_hosts",
        &[("EB_RANKS_PER_HOST", "2")],
        "ebrun --hosts job",
    );
    assert_job_ran("across_hosts", 6, &out);
    nothing_left(&out);
    // Uneven: 3 ranks on the first host, 2 on the second.
    let mut cmd = ebrun_on_namespace_hosts(&hosts.prefix);
    cmd.args(["--hosts", "10.77.0.1:3,10.77.0.2:2"]);
    let out = launch_scenario(cmd, "across_hosts", &[], "ebrun --hosts with slots");
    assert_job_ran("across_hosts", 5, &out);
    nothing_left(&out);

    let out = job_leaving_no_rank(ebrun(6), "killed_rank", 6);
    assert_eq!(out.status.code(), Some(137), "{}", out.dump());
    assert!(
        out.stderr
            .contains("on host 10.77.0.3) killed by signal 9 (SIGKILL)")
            && out.stderr.contains("ebrun: rank 5 (pid"),
        "{}",
        out.dump()
    );
    nothing_left(&out);
    let out = launch_scenario(ebrun(3), "abort_seven", &[], "ebrun --hosts abort");
    assert_eq!(out.status.code(), Some(7), "{}", out.dump());
    assert_abort_named(&out);
    assert!(
        out.stderr
            .contains("on host 10.77.0.3) aborted the job with code 7"),
        "{}",
        out.dump()
    );
    nothing_left(&out);
    // The rank that left is named, even when its neighbour on the host saw it go and
    // aborted (two ranks per host).
    for n in [3, 6] {
        let out = launch_scenario(ebrun(n), "exit_early", &[], "ebrun --hosts exit");
        assert_eq!(out.status.code(), Some(3), "{}", out.dump());
        let last = format!("ebrun: rank {} (pid", n - 1);
        assert!(
            out.stderr.contains(&last) && out.stderr.contains("exited with status 3"),
            "{}",
            out.dump()
        );
        nothing_left(&out);
    }
    let out = job_leaving_no_rank(ebrun(6), "proxy_killed", 6);
    assert_eq!(out.status.code(), Some(255), "{}", out.dump());
    assert!(
        out.stderr
            .contains("lost host 10.77.0.1 (its proxy's connection closed); its ranks 0, 1"),
        "{}",
        out.dump()
    );
    nothing_left(&out);
    let start = std::time::Instant::now();
    let out = job_leaving_no_rank(ebrun(6), "link_down", 6);
    assert_eq!(out.status.code(), Some(255), "{}", out.dump());
    assert!(
        out.stderr
            .contains("lost host 10.77.0.3 (its proxy: no word for 3 s); its ranks 4, 5"),
        "{}",
        out.dump()
    );
    assert!(start.elapsed() < Duration::from_secs(20), "{}", out.dump());
    nothing_left(&out);
    drop(hosts);
}
