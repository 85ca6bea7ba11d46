//! The oracle: what each file of a client must hold, kept apart from the
//! code under test. Every change the workload makes goes here once its
//! call succeeded, and only then; the invariants compare what the cluster
//! answers against it.

/// What the workload last wrote to each file: (inode, expected bytes).
pub(super) struct Model {
    pub(super) files: Vec<(u64, Vec<u8>)>,
}

impl Model {
    /// A file of `len` zero bytes.
    pub(super) fn add(&mut self, ino: u64, len: usize) {
        self.files.push((ino, vec![0; len]));
    }

    /// `data` was written at `off` of file `f`.
    pub(super) fn wrote(&mut self, f: usize, off: u64, data: &[u8]) {
        let content = &mut self.files[f].1;
        content[off as usize..off as usize + data.len()].copy_from_slice(data);
    }

    /// `len` bytes at `off` of file `f` read as zeros now (a punched hole,
    /// a zeroed range).
    pub(super) fn zeroed(&mut self, f: usize, off: u64, len: u64) {
        self.files[f].1[off as usize..(off + len) as usize].fill(0);
    }

    /// File `f` was cut to `off` and grown back to its length: the cut part
    /// reads as zeros.
    pub(super) fn cut_and_regrown(&mut self, f: usize, off: u64) {
        self.files[f].1[off as usize..].fill(0);
    }

    /// What `len` bytes at `off` of file `f` must read as.
    pub(super) fn expected(&self, f: usize, off: u64, len: u64) -> &[u8] {
        &self.files[f].1[off as usize..(off + len) as usize]
    }
}
