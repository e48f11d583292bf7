//! Kill -9 sweep of persistent windows (seed 004): a 4-rank job (`examples/pmem_sweep.rs`)
//! checkpoints forever with `fence_persist`; at a random instant one of its ranks, or
//! `ebrun`, is killed with SIGKILL; the next job over the same root must load a version whose
//! every element is one iteration's, never older than the last iteration the killed job
//! acknowledged (printed after its fence returned). The default suite kills 12 times;
//! `cargo test -p earlybird --test pmem_crash -- --ignored` kills 1,000 times.

mod common;

use common::Rng;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn start(root: &str) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(common::ebrun_path())
        .args(["-n", "4", "--timeout", "120"])
        .arg(common::example_path("pmem_sweep"))
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(format!("{root}.stderr")).expect("a stderr file"),
        ))
        .spawn()
        .expect("ebrun starts");
    let out = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Pids of `pid`'s children.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn sweep(kills: u32) {
    let root = std::env::temp_dir().join(format!("eb-pmem-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let root_s = root.to_str().unwrap().to_string();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("pmem sweep: seed {seed}");
    let mut rng = Rng(seed);
    let mut acked: Option<u64> = None;
    let (mut rank_kills, mut ebrun_kills, mut loads) = (0, 0, 0);
    for round in 0..kills {
        let (mut child, rx) = start(&root_s);
        let ebrun = child.id();
        // Let it run until it has acknowledged a little (or a while), then kill.
        let wait = Duration::from_millis(20 + rng.next() % 250);
        let t0 = Instant::now();
        let mut loaded_seen = acked.is_none();
        let mut ranks = Vec::new();
        while t0.elapsed() < Duration::from_secs(60) {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(line) => {
                    if let Some(k) = line.strip_prefix("loaded ") {
                        let k: u64 = k.parse().unwrap();
                        if let Some(a) = acked {
                            assert!(
                                k >= a,
                                "round {round}: loaded {k}, but {a} was acknowledged (seed {seed})"
                            );
                        }
                        loaded_seen = true;
                        loads += 1;
                    } else if line == "none" {
                        assert!(acked.is_none(), "round {round}: nothing loaded, but {acked:?} was acknowledged (seed {seed})");
                        loaded_seen = true;
                    } else if let Some(k) = line.strip_prefix("ack ") {
                        assert!(loaded_seen, "round {round}: acked before loading");
                        acked = Some(k.parse().unwrap());
                    } else {
                        panic!("round {round}: {line} (seed {seed})");
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "round {round}: the job ended by itself: {:?}\n{}",
                        child.wait(),
                        std::fs::read_to_string(format!("{root_s}.stderr")).unwrap_or_default()
                    )
                }
            }
            if ranks.len() < 4 {
                ranks = children(ebrun);
            }
            if loaded_seen && t0.elapsed() >= wait && ranks.len() == 4 {
                break;
            }
        }
        assert_eq!(ranks.len(), 4, "round {round}: ebrun's ranks not found");
        let victim = if rng.next() % 5 == 0 {
            ebrun_kills += 1;
            ebrun
        } else {
            rank_kills += 1;
            ranks[(rng.next() % 4) as usize]
        };
        // SAFETY-free: kill(1) rather than libc.
        let _ = Command::new("kill")
            .args(["-9", &victim.to_string()])
            .status();
        // Every process of the job must be gone before the next starts (ebrun ends the
        // ranks when one dies, and the ranks end themselves when ebrun dies).
        let t1 = Instant::now();
        while ranks.iter().any(|&p| common::running(p)) || common::running(ebrun) {
            assert!(
                t1.elapsed() < Duration::from_secs(20),
                "round {round}: the job outlived the kill of {victim}"
            );
            let _ = child.try_wait();
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.wait();
        // Lines printed before the kill still count.
        while let Ok(line) = rx.try_recv() {
            if let Some(k) = line.strip_prefix("ack ") {
                acked = Some(k.parse().unwrap());
            }
        }
    }
    // A last job checks the last state.
    let (mut child, rx) = start(&root_s);
    let mut line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("a last line");
    if line == "none" && acked.is_none() {
        line = "loaded 0".into();
    }
    let k: u64 = line
        .strip_prefix("loaded ")
        .unwrap_or_else(|| panic!("last job: {line}"))
        .parse()
        .unwrap();
    assert!(
        k >= acked.unwrap_or(0),
        "last job loaded {k}, {acked:?} acknowledged"
    );
    let _ = child.kill();
    let _ = child.wait();
    eprintln!(
        "pmem sweep: {kills} kills ({rank_kills} of a rank, {ebrun_kills} of ebrun), {loads} verified loads, last acknowledged {acked:?}"
    );
    std::fs::remove_dir_all(&root).unwrap();
    let _ = std::fs::remove_file(format!("{root_s}.stderr"));
}

#[test]
fn kill_sweep_12() {
    sweep(12);
}

#[test]
#[ignore = "1,000 kills: about 10 minutes"]
fn kill_sweep_1000() {
    sweep(1000);
}
