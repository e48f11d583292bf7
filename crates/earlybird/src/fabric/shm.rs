//! The shared-memory transport: every endpoint of a job on one host, threads of one process
//! or separate processes alike, through the job segment's rings (one per ordered pair of
//! endpoints), single-copy bulk transfers, and memory regions mapped by both ends.

use super::bulk::{self, RemoteRef};
use super::frame::Frame;
use super::job::JobSegment;
use super::ring::{Consumer, Producer};
use super::{RegionKey, Transport};
use crate::sys::lend::Loan;
use crate::sys::segment::Segment;
use std::cell::Cell;
use std::io;
use std::os::fd::OwnedFd;

/// One endpoint's ends of the job's rings.
pub(crate) struct Shm {
    me: u32,
    my_pid: u32,
    job: JobSegment,
    /// Producer of ring (me -> p), for every peer p but me.
    outs: Vec<Option<Producer>>,
    /// Consumer of ring (p -> me), for every peer p but me.
    ins: Vec<Option<Consumer>>,
    /// Peers' pids as read from their rank slots (0: not read yet).
    peer_pid: Vec<Cell<u32>>,
    max_payload: usize,
}

impl std::fmt::Debug for Shm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shm").field("me", &self.me).finish()
    }
}

impl Shm {
    /// Endpoint `me` of `job`, claimed for this process (`Err` if it was claimed already).
    pub(crate) fn new(job: JobSegment, me: u32) -> Result<Shm, String> {
        let my_pid = crate::sys::process::pid();
        job.claim(me, my_pid)?;
        let n = job.nranks();
        let mut outs = Vec::with_capacity(n as usize);
        let mut ins = Vec::with_capacity(n as usize);
        let mut max_payload = usize::MAX;
        for p in 0..n {
            if p == me {
                outs.push(None);
                ins.push(None);
                continue;
            }
            // SAFETY: this endpoint was claimed above, once for the whole job, and only the
            // endpoint `me` makes ends of rings (me -> p) as producer and (p -> me) as
            // consumer: each ring gets one producer and one consumer. The ends live in this
            // Shm, which holds a clone of the segment they point into.
            let (o, i) = unsafe {
                (
                    Producer::new(job.ring(me, p)),
                    Consumer::new(job.ring(p, me)),
                )
            };
            max_payload = max_payload.min(o.max_payload());
            outs.push(Some(o));
            ins.push(Some(i));
        }
        if n == 1 {
            max_payload = 64 * 1024;
        }
        Ok(Shm {
            me,
            my_pid,
            job,
            outs,
            ins,
            peer_pid: (0..n).map(|_| Cell::new(0)).collect(),
            max_payload,
        })
    }

    fn pid_of(&self, peer: u32) -> u32 {
        let c = &self.peer_pid[peer as usize];
        if c.get() == 0 {
            c.set(self.job.pid(peer));
        }
        c.get()
    }

    fn out(&mut self, peer: u32) -> &mut Producer {
        self.outs[peer as usize]
            .as_mut()
            .expect("a ring to every other endpoint")
    }

    fn input(&self, peer: u32) -> &Consumer {
        self.ins[peer as usize]
            .as_ref()
            .expect("a ring from every other endpoint")
    }
}

impl Transport for Shm {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    #[inline(always)]
    fn try_send(
        &mut self,
        peer: u32,
        frame: &Frame,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> bool {
        self.out(peer).try_push_with(frame, len, fill)
    }

    #[inline(always)]
    fn peek(&self, peer: u32) -> Option<Frame> {
        self.input(peer).peek()
    }

    #[inline(always)]
    fn payload<'f>(&'f self, peer: u32, frame: &'f Frame) -> &'f [u8] {
        self.input(peer).payload(frame)
    }

    #[inline(always)]
    fn consume(&mut self, peer: u32, frame: &Frame) {
        self.ins[peer as usize]
            .as_mut()
            .expect("a ring from every other endpoint")
            .pop(frame);
    }

    fn delivered_by(&self, peer: u32) -> u64 {
        self.outs[peer as usize]
            .as_ref()
            .map_or(0, |o| o.delivered_bytes())
    }

    fn report_delivered(&mut self, from: u32, bytes: u64) {
        if let Some(c) = self.ins[from as usize].as_mut() {
            c.add_delivered(bytes);
        }
    }

    fn same_process(&self, peer: u32) -> bool {
        // A job without a launcher (thread job, singleton) has all its ranks in this process.
        self.job.launcher_pid() == 0 || self.pid_of(peer) == self.my_pid
    }

    fn pull(&self, peer: u32, remote: &RemoteRef, dst: &Loan, n: usize) -> io::Result<()> {
        let pid = self.pid_of(peer);
        bulk::pull(pid == self.my_pid, pid, remote, dst, n)
    }

    fn create_region(&mut self, bytes: usize) -> io::Result<(Segment, RegionKey, OwnedFd)> {
        let (seg, fd) = Segment::create_unlinked(&crate::sys::segment::shm_dir(), bytes)?;
        let key = RegionKey {
            pid: self.my_pid,
            fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            bytes,
        };
        Ok((seg, key, fd))
    }

    fn map_region(&mut self, key: &RegionKey) -> io::Result<Segment> {
        Segment::map_held(key.pid, key.fd, key.bytes)
    }
}
