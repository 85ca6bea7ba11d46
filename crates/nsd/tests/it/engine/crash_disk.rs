//! A disk in memory that fails from a chosen write or sync on, as at a
//! crash, and gives the device as it would be after the power cut.

use std::io;
use std::path::Path;
use std::sync::Mutex;

use weft_nsd::engine::disk::Disk;

/// A disk in memory that forgets, at a crash, the writes not yet synced:
/// all of them, none of them, or every other one.
#[derive(Debug)]
pub(super) struct CrashDisk {
    state: Mutex<CrashState>,
    len: u64,
    path: std::path::PathBuf,
}

#[derive(Debug)]
pub(super) struct CrashState {
    /// What reads see: every write applied.
    now: Vec<u8>,
    /// What survives a power cut: synced writes only.
    durable: Vec<u8>,
    unsynced: Vec<(u64, Vec<u8>)>,
    /// Writes that came through `write_direct_at`.
    direct_writes: u64,
    /// Writes and syncs so far; the device fails from `crash_at` on.
    ops: u64,
    crash_at: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Survive {
    All,
    None,
    EveryOther,
}

impl CrashDisk {
    pub(super) fn new(image: Vec<u8>, crash_at: u64) -> CrashDisk {
        CrashDisk {
            len: image.len() as u64,
            state: Mutex::new(CrashState {
                durable: image.clone(),
                now: image,
                unsynced: Vec::new(),
                direct_writes: 0,
                ops: 0,
                crash_at,
            }),
            path: "/crash-disk".into(),
        }
    }

    fn step(&self) -> io::Result<std::sync::MutexGuard<'_, CrashState>> {
        let mut s = self.state.lock().unwrap();
        if s.ops >= s.crash_at {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        s.ops += 1;
        Ok(s)
    }

    /// The device after the crash.
    pub(super) fn after_crash(&self, survive: Survive) -> Vec<u8> {
        let s = self.state.lock().unwrap();
        let mut img = s.durable.clone();
        for (i, (off, data)) in s.unsynced.iter().enumerate() {
            let keep = match survive {
                Survive::All => true,
                Survive::None => false,
                Survive::EveryOther => i % 2 == 0,
            };
            if keep {
                img[*off as usize..*off as usize + data.len()].copy_from_slice(data);
            }
        }
        img
    }

    pub(super) fn ops(&self) -> u64 {
        self.state.lock().unwrap().ops
    }

    pub(super) fn direct_writes(&self) -> u64 {
        self.state.lock().unwrap().direct_writes
    }
}

impl Disk for CrashDisk {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let s = self.state.lock().unwrap();
        let o = offset as usize;
        let src = s
            .now
            .get(o..o + buf.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut s = self.step()?;
        let o = offset as usize;
        s.now[o..o + buf.len()].copy_from_slice(buf);
        s.unsynced.push((offset, buf.to_vec()));
        Ok(())
    }
    /// A direct write is lost at a power cut like any other until the next
    /// sync (the device's own cache holds it).
    fn write_direct_at(&self, buf: &[u8], offset: u64) -> io::Result<bool> {
        self.write_at(buf, offset)?;
        self.state.lock().unwrap().direct_writes += 1;
        Ok(true)
    }
    fn sync(&self) -> io::Result<()> {
        let mut s = self.step()?;
        let pending = std::mem::take(&mut s.unsynced);
        for (off, data) in pending {
            s.durable[off as usize..off as usize + data.len()].copy_from_slice(&data);
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}
