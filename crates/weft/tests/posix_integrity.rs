//! A seeded randomised data-integrity exerciser: thousands of mixed
//! operations on a few files through the mount, each file open through two
//! descriptors used in turn — writes at random offsets
//! (past the end too), O_APPEND writes, truncate up and down, punched holes
//! and zeroed ranges, reads, mmap reads and writes, O_DIRECT reads and
//! writes (page-aligned) beside buffered ones, close/reopen, and
//! remounts (stop and start of `weft up`) — each checked byte for byte
//! against an in-memory model.
//!
//! The seed is printed at the start and in the failure message; replay a
//! failure with `WEFT_SEED=<seed>`. `WEFT_OPS` changes the number of
//! operations (default 3000).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use common::*;

#[test]
fn posix_helper() {
    helper_main()
}

const FILES: usize = 4;
/// Largest offset a write starts at (files stay around a few blocks of 64 KiB).
const MAX_OFFSET: u64 = 1_500_000;
/// Operations between two remounts.
const REMOUNT_EVERY: usize = 700;

struct Exerciser {
    rng: StdRng,
    paths: Vec<PathBuf>,
    model: Vec<Vec<u8>>,
    /// Two descriptors per file, opened on demand.
    handles: Vec<[Option<File>; 2]>,
    /// The last operations, for the failure message.
    recent: VecDeque<String>,
    op: usize,
    seed: u64,
}

impl Exerciser {
    fn log(&mut self, what: String) {
        if self.recent.len() == 30 {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("#{} {what}", self.op));
    }

    #[track_caller]
    fn fail(&self, what: &str) -> ! {
        let recent: Vec<&str> = self.recent.iter().map(String::as_str).collect();
        panic!(
            "integrity failure at op {} (replay with WEFT_SEED={}): {what}\nlast operations:\n  {}",
            self.op,
            self.seed,
            recent.join("\n  ")
        );
    }

    /// One of the two descriptors of file `i`, at random.
    fn handle(&mut self, i: usize) -> &File {
        let h = self.rng.gen_range(0..2);
        if self.handles[i][h].is_none() {
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&self.paths[i])
                .unwrap_or_else(|e| self.fail(&format!("open f{i}: {e}")));
            self.handles[i][h] = Some(f);
        }
        self.handles[i][h].as_ref().expect("just opened")
    }

    fn len_for(&mut self) -> usize {
        match self.rng.gen_range(0..10) {
            0..=3 => self.rng.gen_range(1..100),
            4..=7 => self.rng.gen_range(1..10_000),
            _ => self.rng.gen_range(1..200_000),
        }
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        v
    }

    fn offset(&mut self, i: usize) -> u64 {
        let len = self.model[i].len() as u64;
        match self.rng.gen_range(0..4) {
            0 => len,
            1 => self.rng.gen_range(0..=len),
            2 => self.rng.gen_range(0..=MAX_OFFSET),
            _ => (len / 65536) * 65536 + self.rng.gen_range(0..3) * 65536,
        }
    }

    fn write(&mut self, i: usize) {
        let off = self.offset(i);
        let n = self.len_for();
        let data = self.bytes(n);
        self.log(format!("write f{i} at {off} len {n}"));
        if let Err(e) = self.handle(i).write_all_at(&data, off) {
            self.fail(&format!("write: {e}"));
        }
        let m = &mut self.model[i];
        let end = off as usize + n;
        if m.len() < end {
            m.resize(end, 0);
        }
        m[off as usize..end].copy_from_slice(&data);
    }

    fn append(&mut self, i: usize) {
        let n = self.len_for();
        let data = self.bytes(n);
        self.log(format!("append f{i} len {n}"));
        let res = std::fs::OpenOptions::new()
            .append(true)
            .open(&self.paths[i])
            .and_then(|mut f| std::io::Write::write_all(&mut f, &data));
        if let Err(e) = res {
            self.fail(&format!("append: {e}"));
        }
        self.model[i].extend_from_slice(&data);
    }

    fn truncate(&mut self, i: usize) {
        let len = self.model[i].len() as u64;
        let new = match self.rng.gen_range(0..4) {
            0 => 0,
            1 => self.rng.gen_range(0..=len),
            2 => self.rng.gen_range(0..=MAX_OFFSET),
            _ => len + self.rng.gen_range(0..70_000),
        };
        let by_path = self.rng.gen_bool(0.3);
        self.log(format!("truncate f{i} to {new} (by path: {by_path})"));
        let res = if by_path {
            let c = cpath(&self.paths[i]);
            // SAFETY: valid path.
            if unsafe { libc::truncate(c.as_ptr(), new as i64) } == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        } else {
            self.handle(i).set_len(new)
        };
        if let Err(e) = res {
            self.fail(&format!("truncate: {e}"));
        }
        self.model[i].resize(new as usize, 0);
    }

    fn fallocate(&mut self, i: usize) {
        let off = self.offset(i);
        let n = self.len_for() as u64;
        let (mode, name) = match self.rng.gen_range(0..3) {
            0 => (
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                "punch",
            ),
            1 => (libc::FALLOC_FL_ZERO_RANGE, "zero range"),
            _ => (0, "extend"),
        };
        self.log(format!("fallocate {name} f{i} at {off} len {n}"));
        let fd = self.handle(i).as_raw_fd();
        // SAFETY: a descriptor this exerciser owns.
        if unsafe { libc::fallocate(fd, mode, off as i64, n as i64) } != 0 {
            self.fail(&format!("fallocate: {}", std::io::Error::last_os_error()));
        }
        let m = &mut self.model[i];
        let end = (off + n) as usize;
        if mode != (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE) && m.len() < end {
            m.resize(end, 0);
        }
        if mode != 0 {
            let stop = end.min(m.len());
            if (off as usize) < stop {
                m[off as usize..stop].fill(0);
            }
        }
    }

    fn read(&mut self, i: usize) {
        let len = self.model[i].len() as u64;
        let off = self.rng.gen_range(0..=len + 1000);
        let n = self.len_for();
        self.log(format!("read f{i} at {off} len {n}"));
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.handle(i).read_at(&mut buf[got..], off + got as u64) {
                Ok(0) => break,
                Ok(k) => got += k,
                Err(e) => self.fail(&format!("read: {e}")),
            }
        }
        let m = &self.model[i];
        let want = if off >= len {
            &[][..]
        } else {
            &m[off as usize..(off as usize + n).min(m.len())]
        };
        if &buf[..got] != want {
            let first = buf[..got]
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.min(want.len()));
            self.fail(&format!(
                "read f{i} at {off}: got {got} bytes, model has {}; first difference at +{first}",
                want.len()
            ));
        }
    }

    fn mmap(&mut self, i: usize, write: bool) {
        let len = self.model[i].len();
        if len == 0 {
            return;
        }
        let off = self.rng.gen_range(0..len);
        let n = self.rng.gen_range(1..=(len - off).min(100_000));
        self.log(format!(
            "mmap {} f{i} at {off} len {n}",
            if write { "write" } else { "read" }
        ));
        let fd = self.handle(i).as_raw_fd();
        // SAFETY: mapping the whole current file through a descriptor we own.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            self.fail(&format!("mmap: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `p` maps `len` bytes until the munmap below.
        let map = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), len) };
        if write {
            let data = self.bytes(n);
            map[off..off + n].copy_from_slice(&data);
            // SAFETY: `p` maps `len` bytes.
            if unsafe { libc::msync(p, len, libc::MS_SYNC) } != 0 {
                self.fail(&format!("msync: {}", std::io::Error::last_os_error()));
            }
            self.model[i][off..off + n].copy_from_slice(&data);
        } else if map[off..off + n] != self.model[i][off..off + n] {
            // SAFETY: unmapping before failing.
            unsafe { libc::munmap(p, len) };
            self.fail(&format!("mmap read of f{i} at {off} len {n} differs"));
        }
        // SAFETY: unmapping what was mapped above.
        unsafe { libc::munmap(p, len) };
    }

    /// An O_DIRECT read or write of whole 4 KiB pages, through a
    /// descriptor of its own, beside the buffered ones.
    fn direct(&mut self, i: usize, write: bool) {
        use std::os::unix::fs::OpenOptionsExt;
        const PAGE: usize = 4096;
        let pages = self.rng.gen_range(1..=32);
        let n = pages * PAGE;
        let len = self.model[i].len();
        let off = self.rng.gen_range(0..=(len.max(1) + 2 * n) / PAGE) * PAGE;
        self.log(format!(
            "O_DIRECT {} f{i} at {off} len {n}",
            if write { "write" } else { "read" }
        ));
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&self.paths[i])
            .unwrap_or_else(|e| self.fail(&format!("open O_DIRECT: {e}")));
        let mut raw = vec![0u8; n + PAGE];
        let at = raw.as_ptr().align_offset(PAGE);
        let buf = &mut raw[at..at + n];
        if write {
            self.rng.fill_bytes(buf);
            if let Err(e) = f.write_all_at(buf, off as u64) {
                self.fail(&format!("O_DIRECT write: {e}"));
            }
            let m = &mut self.model[i];
            if m.len() < off + n {
                m.resize(off + n, 0);
            }
            m[off..off + n].copy_from_slice(buf);
        } else {
            let mut got = 0;
            while got < n {
                match f.read_at(&mut buf[got..], (off + got) as u64) {
                    Ok(0) => break,
                    Ok(k) => got += k,
                    Err(e) => self.fail(&format!("O_DIRECT read: {e}")),
                }
            }
            let m = &self.model[i];
            let want = &m[off.min(m.len())..(off + n).min(m.len())];
            if &buf[..got] != want {
                self.fail(&format!(
                    "O_DIRECT read f{i} at {off}: {got} bytes, model {}",
                    want.len()
                ));
            }
        }
    }

    fn compare_all(&mut self, why: &str) {
        for i in 0..FILES {
            let got = std::fs::read(&self.paths[i])
                .unwrap_or_else(|e| self.fail(&format!("read f{i} ({why}): {e}")));
            if got != self.model[i] {
                let first = got
                    .iter()
                    .zip(&self.model[i])
                    .position(|(a, b)| a != b)
                    .unwrap_or(got.len().min(self.model[i].len()));
                self.fail(&format!(
                    "f{i} ({why}): {} bytes, model {}; first difference at {first}",
                    got.len(),
                    self.model[i].len()
                ));
            }
        }
    }
}

#[test]
fn random_operations_match_the_model() {
    let seed = std::env::var("WEFT_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let ops: usize = std::env::var("WEFT_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    report(&format!(
        "[integrity] seed {seed} (replay with WEFT_SEED={seed}), {ops} operations"
    ));
    let td = test_dir("integrity");
    let mut w = WeftUp::start("integrity", td.path(), &["-B", "64K"]);
    let dir = w.m("ex");
    std::fs::create_dir(&dir).unwrap();
    let paths: Vec<PathBuf> = (0..FILES).map(|i| dir.join(format!("f{i}"))).collect();
    for p in &paths {
        std::fs::write(p, b"").unwrap();
    }
    let mut ex = Exerciser {
        rng: StdRng::seed_from_u64(seed),
        paths,
        model: vec![Vec::new(); FILES],
        handles: (0..FILES).map(|_| [None, None]).collect(),
        recent: VecDeque::new(),
        op: 0,
        seed,
    };
    let mut counts = [0usize; 12];
    for op in 0..ops {
        ex.op = op;
        let i = ex.rng.gen_range(0..FILES);
        let k = ex.rng.gen_range(0..100);
        let kind = match k {
            0..=34 => 0,
            35..=39 => 1,
            40..=49 => 2,
            50..=54 => 3,
            55..=74 => 4,
            75..=79 => 5,
            80..=84 => 6,
            85..=89 => 7,
            90..=92 => 8,
            93..=95 => 9,
            _ => 10,
        };
        counts[kind] += 1;
        match kind {
            0 => ex.write(i),
            1 => ex.append(i),
            2 => ex.truncate(i),
            3 => ex.fallocate(i),
            4 => ex.read(i),
            5 => ex.mmap(i, false),
            6 => ex.mmap(i, true),
            7 => {
                let w = ex.rng.gen_bool(0.5);
                ex.direct(i, w);
            }
            8 => {
                let h = ex.rng.gen_range(0..2);
                ex.log(format!("close f{i} descriptor {h}"));
                ex.handles[i][h] = None;
            }
            9 => {
                ex.log(format!("fsync f{i}"));
                if let Err(e) = ex.handle(i).sync_all() {
                    ex.fail(&format!("fsync: {e}"));
                }
            }
            _ => ex.compare_all("full read"),
        }
        if op > 0 && op % REMOUNT_EVERY == 0 {
            counts[11] += 1;
            ex.log("remount".to_string());
            ex.handles.iter_mut().for_each(|h| *h = [None, None]);
            w.stop();
            w.restart();
            ex.compare_all("after remount");
        }
    }
    ex.handles.iter_mut().for_each(|h| *h = [None, None]);
    ex.compare_all("at the end");
    w.stop();
    w.restart();
    ex.compare_all("after the last remount");
    w.stop();
    report(&format!(
        "[integrity] seed {seed}: write {} append {} truncate {} fallocate {} read {} \
         mmap-read {} mmap-write {} O_DIRECT {} close {} fsync {} full-read {} remount {}",
        counts[0],
        counts[1],
        counts[2],
        counts[3],
        counts[4],
        counts[5],
        counts[6],
        counts[7],
        counts[8],
        counts[9],
        counts[10],
        counts[11]
    ));
}
