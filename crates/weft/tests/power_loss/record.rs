//! The record of `power_loss.rs`: what a writer knows about each file it
//! made — its inode, every name a link may have since it was last made
//! durable, every version of its content since its last fsync — and the
//! content rule the check applies to it, with its unit test.

use super::*;

/// What a writer knows about one file it made.
pub(super) struct Tracked {
    /// Its inode number, once the create returned.
    pub(super) ino: Option<u64>,
    /// Its names (hard links).
    pub(super) links: Vec<Link>,
    /// Its content since its last fsync: the fsync'ed one (empty for a new
    /// file) first, then one per change after it, the current last.
    pub(super) versions: Vec<Vec<u8>>,
    /// Fsync'ed and not changed since.
    pub(super) fsynced: bool,
}

/// One name of a file, through renames and unlinks.
pub(super) struct Link {
    /// Its name now; `None` once unlinked or renamed over.
    pub(super) now: Option<String>,
    /// Every name it had since it was last made durable (`None`: absent).
    pub(super) maybe: Vec<Option<String>>,
    /// Directories to fsync before its changes are durable.
    pub(super) pending: BTreeSet<String>,
}

impl Link {
    /// A link just made (created or linked): not durable yet.
    pub(super) fn new(name: &str) -> Link {
        Link {
            now: Some(name.to_string()),
            maybe: vec![None, Some(name.to_string())],
            pending: BTreeSet::from([dir_of(name).to_string()]),
        }
    }

    /// Renamed to `to` (`None`: unlinked), touching `dirs`.
    pub(super) fn moved(&mut self, to: Option<String>, dirs: &[&str]) {
        if !self.maybe.contains(&to) {
            self.maybe.push(to.clone());
        }
        self.now = to;
        self.pending.extend(dirs.iter().map(|d| d.to_string()));
    }
}

impl Tracked {
    pub(super) fn new(name: &str) -> Tracked {
        Tracked {
            ino: None,
            links: vec![Link::new(name)],
            versions: vec![Vec::new()],
            fsynced: false,
        }
    }

    pub(super) fn content(&self) -> &[u8] {
        self.versions.last().map(Vec::as_slice).unwrap_or_default()
    }

    pub(super) fn changed(&mut self, next: Vec<u8>) {
        self.versions.push(next);
        self.fsynced = false;
    }

    pub(super) fn fsynced(&mut self) {
        let last = self.versions.pop().unwrap_or_default();
        self.versions = vec![last];
        self.fsynced = true;
    }

    pub(super) fn name(&self) -> Option<&str> {
        self.links.iter().find_map(|l| l.now.as_deref())
    }

    /// Directory `d` was fsync'ed: its changes to these links are durable.
    pub(super) fn dir_synced(&mut self, d: &str) {
        for l in &mut self.links {
            if l.pending.remove(d) && l.pending.is_empty() {
                l.maybe = vec![l.now.clone()];
            }
        }
        if self.links.iter().all(|l| l.maybe == [None]) {
            // Gone for good: its content no longer matters.
            self.versions = vec![Vec::new()];
        }
    }

    /// Whether `got` is content this file may have after the cut.
    pub(super) fn check_content(&self, got: &[u8]) -> Result<(), String> {
        if let [only] = self.versions.as_slice() {
            if got == only.as_slice() {
                return Ok(());
            }
            let at = got.iter().zip(only).position(|(g, w)| g != w);
            return Err(match at {
                Some(at) => format!(
                    "differs from its known content at byte {at} ({} bytes, {} expected)",
                    got.len(),
                    only.len()
                ),
                None => format!("{} bytes, {} expected", got.len(), only.len()),
            });
        }
        if !self.versions.iter().any(|v| v.len() == got.len()) {
            return Err(format!(
                "size {} is none of the sizes it had since its last fsync",
                got.len()
            ));
        }
        for (i, &b) in got.iter().enumerate() {
            if b != 0 && !self.versions.iter().any(|v| v.get(i) == Some(&b)) {
                return Err(format!(
                    "byte {i} is {b:#04x}: neither zero nor what a version since its last \
                     fsync held there"
                ));
            }
        }
        Ok(())
    }

    /// Its state, for messages.
    pub(super) fn describe(&self) -> String {
        let sizes: Vec<usize> = self.versions.iter().map(Vec::len).collect();
        if self.fsynced {
            format!("fsync'ed with {} bytes", self.content().len())
        } else {
            format!("not fsync'ed since its last change (sizes since its last fsync or creation: {sizes:?})")
        }
    }
}

/// The content rule of the check, on made-up versions.
#[test]
fn content_rule() {
    let mut t = Tracked::new("d0/x");
    t.changed(vec![1, 2, 3, 4]);
    t.fsynced();
    assert!(t.check_content(&[1, 2, 3, 4]).is_ok());
    assert!(
        t.check_content(&[1, 2, 0, 4]).is_err(),
        "fsync'ed: zeros are not allowed"
    );
    assert!(t.check_content(&[1, 2, 3]).is_err());
    t.changed(vec![1, 9]);
    t.changed(vec![1, 9, 0, 0, 0, 0]);
    t.changed(vec![7, 9, 0, 0, 0, 5]);
    for ok in [
        &[1, 2, 3, 4][..],
        &[1, 9],
        &[0, 0],
        &[7, 2, 0, 4, 0, 5],
        &[1, 9, 3, 0, 0, 0],
    ] {
        assert!(t.check_content(ok).is_ok(), "{ok:?}");
    }
    assert!(t.check_content(&[1, 9, 3]).is_err(), "a size it never had");
    assert!(
        t.check_content(&[1, 3]).is_err(),
        "a byte no version held there"
    );
    assert!(
        t.check_content(&[1, 9, 0, 0, 4, 0]).is_err(),
        "a byte of another offset"
    );
}

pub(super) fn dir_of(name: &str) -> &str {
    name.rsplit_once('/').map_or(".", |(d, _)| d)
}
