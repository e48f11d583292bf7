//! Process facts: pid, parent watch, nonces.

use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) fn pid() -> u32 {
    std::process::id()
}

/// A value unlikely to repeat across calls and processes (segment names).
pub(crate) fn nonce() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (COUNTER.fetch_add(1, Ordering::Relaxed) << 48) ^ ((pid() as u64) << 20)
}

/// Ask the kernel to send SIGKILL to this process when its parent dies.
pub(crate) fn die_with_parent() {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes a signal number and touches no memory.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
}

/// Make the process `cmd` starts die (SIGKILL) when this thread ends, from before its
/// program runs: a launcher's child then never outlives it, even one killed before the
/// child reaches MPI init (which asks the same again). Call it from the thread that spawns
/// and lives as long as the launcher.
pub fn die_with_spawner(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let spawner = pid();
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl and
    // getppid, which are async-signal-safe, and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            // The spawner died before the request took effect: do not run orphaned.
            if libc::getppid() as u32 != spawner {
                return Err(std::io::Error::other("the launcher died while starting it"));
            }
            Ok(())
        })
    };
}

/// This process's parent.
pub(crate) fn parent() -> u32 {
    // SAFETY: getppid cannot fail and touches no memory.
    unsafe { libc::getppid() as u32 }
}

/// Whether `pid` is this process's parent, grandparent, ... (read from /proc).
pub(crate) fn has_ancestor(pid: u32) -> bool {
    let mut p = parent();
    for _ in 0..64 {
        if p == pid {
            return true;
        }
        if p <= 1 {
            return false;
        }
        match parent_of(p) {
            Some(pp) => p = pp,
            None => return false,
        }
    }
    false
}

/// The fields of `/proc/PID/stat` after the command name (field 2, in parentheses, which may
/// hold spaces): state, parent, ...
fn stat_after_name(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat[stat.rfind(')')? + 1..].to_string())
}

fn parent_of(pid: u32) -> Option<u32> {
    stat_after_name(pid)?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether a process with this pid runs: it exists (signal 0 probe) and is not a zombie.
/// A killed rank whose parent died too stays a zombie where PID 1 never reaps orphans (some
/// containers' init), and must read as dead.
pub(crate) fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    let exists = rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
    exists && stat_after_name(pid).is_none_or(|rest| !rest.trim_start().starts_with(['Z', 'X']))
}

/// Send a signal to a process.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill touches no memory of ours.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Pin the calling thread to one CPU (best effort; benchmarks use it).
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu % libc::CPU_SETSIZE as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Number of CPUs online on this host: the same figure whether or not the process was pinned
/// already (`EARLYBIRD_BIND=core` pins at init; a benchmark that pins again must get the same
/// CPU, not rank modulo 1).
pub fn cpus() -> usize {
    // SAFETY: sysconf reads a system value; no memory is passed.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        n as usize
    } else {
        allowed_cpus()
    }
}

/// Number of CPUs this process may run on now (its affinity mask).
pub(crate) fn allowed_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zombie_is_not_alive() {
        assert!(alive(pid()));
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let id = child.id();
        // Not reaped yet: it stays a zombie until `wait`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(id) {
            assert!(
                std::time::Instant::now() < deadline,
                "`true` still runs after 10 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            stat_after_name(id).is_some(),
            "the zombie is still in /proc"
        );
        child.wait().expect("reap");
        assert!(!alive(id));
    }
}
