//! The settle mark: a moment before which every write this NSD acknowledged
//! is on the disk, kept in `<nsd>/settled` (nanoseconds since the epoch, in
//! decimal, fixed width).
//!
//! A new chunk file goes into place by a rename with no sync of its own (the
//! next barrier covers it). ext4 may commit the rename and the file's size
//! before its data blocks are written (a delayed, still unwritten extent):
//! after a power cut such a chunk is as long as its header says but holds
//! zeros where data never landed, so its checksums fail although nothing was
//! damaged. At open, every chunk modified after the mark (less [`SLACK`]) is
//! read whole, and one whose data fails its checksum is re-checksummed from
//! the bytes it holds (`recover::recheck`): zeros where the write was lost,
//! which is what the size allows, since that size was not durable either.
//! A chunk older than the mark that fails is real damage and stays reported.
//!
//! A barrier writes the start time of the *previous* completed barrier
//! before its own `syncfs`, which carries the mark to the disk at no extra
//! flush; so the mark lags one barrier behind and a few more chunks than
//! needed are read at open. A clean stop (`Store::close`, after the last
//! request) syncs and writes a mark that says `clean`: the next open reads
//! no chunk, and replaces it with a plain mark before it serves. A new NSD
//! gets a mark at format. An NSD with no mark (made by an older release)
//! has every chunk read once at open, then gets one.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// File of the mark, beside `chunks/`.
pub const SETTLED_FILE: &str = "settled";

/// A chunk modified up to this long before the mark is still read at open:
/// room for the clock stepping back between a barrier and a write.
pub const SLACK: Duration = Duration::from_secs(1);

/// Digits of the mark's time: room for any `u64` of nanoseconds.
const WIDTH: usize = 20;

/// Word after the time of a mark written at a clean stop.
const CLEAN: &str = "clean";

/// What the mark file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// Every write acknowledged before this moment (nanoseconds since the
    /// epoch) is on the disk.
    pub at: u64,
    /// Written by a clean stop, after the last write: nothing is unsettled.
    pub clean: bool,
}

/// Now, in nanoseconds since the epoch (0 before it).
pub fn now() -> u64 {
    nanos(SystemTime::now())
}

/// `t` in nanoseconds since the epoch; 0 before it, saturated past `u64`.
pub fn nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The mark of the NSD at `nsd_root`; `None` when there is none (an NSD of an
/// older release) or it does not parse (then every chunk is suspect).
pub fn read(nsd_root: &Path) -> io::Result<Option<Mark>> {
    let bytes = match std::fs::read(nsd_root.join(SETTLED_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let text = String::from_utf8_lossy(&bytes);
    let mut words = text.split_whitespace();
    let at = words.next().and_then(|w| w.parse().ok());
    let clean = match words.next() {
        None => Some(false),
        Some(CLEAN) => Some(true),
        Some(_) => None,
    };
    Ok(at.zip(clean).map(|(at, clean)| Mark { at, clean }))
}

/// Writes `mark` in place (one sector, fixed width, so it cannot tear);
/// `durable` also syncs it, else the caller's `syncfs` carries it.
pub fn write(nsd_root: &Path, mark: Mark, durable: bool) -> io::Result<()> {
    let path = nsd_root.join(SETTLED_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    let word = if mark.clean { CLEAN } else { "     " };
    file.write_all_at(format!("{:0WIDTH$} {word}\n", mark.at).as_bytes(), 0)?;
    if durable {
        file.sync_data()?;
        crate::label::sync_dir(nsd_root)?;
    }
    Ok(())
}

/// `syncfs(2)` of the file system that holds `dir`.
pub fn syncfs(dir: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let d = std::fs::File::open(dir)?;
    // SAFETY: `d` is an open descriptor for the whole call.
    if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a chunk last modified at `mtime` may hold data that had not
/// reached the disk when the NSD stopped, given the moment before which
/// every write is on the disk (`None`: none is known).
pub fn unsettled(mtime: u64, settled_before: Option<u64>) -> bool {
    match settled_before {
        None => true,
        Some(at) => mtime.saturating_add(SLACK.as_nanos() as u64) >= at,
    }
}

/// For the scan at open: the moment before which every chunk is settled
/// (`u64::MAX` after a clean stop; `None` without a mark).
pub fn settled_before(mark: Option<Mark>) -> Option<u64> {
    mark.map(|m| if m.clean { u64::MAX } else { m.at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_overwrites_in_place() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        let clean = Mark {
            at: u64::MAX,
            clean: true,
        };
        write(dir.path(), clean, true).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(clean));
        let running = Mark {
            at: 7,
            clean: false,
        };
        write(dir.path(), running, false).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(running));
        std::fs::write(dir.path().join(SETTLED_FILE), b"garbage").unwrap();
        assert_eq!(read(dir.path()).unwrap(), None, "unreadable: all suspect");
    }

    #[test]
    fn chunks_near_or_after_the_mark_are_unsettled() {
        let s = 1_000_000_000;
        assert!(unsettled(100 * s, Some(100 * s)));
        assert!(
            unsettled(100 * s, Some(100 * s + s / 2)),
            "within the slack"
        );
        assert!(!unsettled(100 * s, Some(102 * s)));
        assert!(unsettled(0, None));
        let clean = Mark { at: 0, clean: true };
        assert!(!unsettled(200 * s, settled_before(Some(clean))));
    }
}
