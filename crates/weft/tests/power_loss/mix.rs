//! The mixes of a phase of writing in `power_loss.rs`: the operations a
//! writer draws from and their weights, how often a change is fsync'ed, how
//! many files a writer keeps and their sizes — one data-heavy, one
//! metadata-heavy — and the lengths of appends and overwrites.

use super::*;

#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    Create,
    Overwrite,
    Append,
    Truncate,
    Rename,
    Link,
    Unlink,
    Fsync,
    FsyncDir,
    Churn,
}

/// What a phase of writing does.
pub(super) struct Mix {
    /// Weight of each operation.
    pub(super) ops: &'static [(u32, Op)],
    /// Chance that a change is fsync'ed, with its directories, right after.
    pub(super) fsync: f64,
    /// Files with a name per writer at most: past it a create is an unlink.
    pub(super) files: usize,
    /// Sizes of new files.
    pub(super) sizes: &'static [(u32, Range<usize>)],
}

/// Data-heavy: a few files per writer, changed over and over.
pub(super) const DATA: Mix = Mix {
    ops: &[
        (14, Op::Create),
        (22, Op::Overwrite),
        (20, Op::Append),
        (10, Op::Truncate),
        (10, Op::Rename),
        (3, Op::Link),
        (6, Op::Unlink),
        (10, Op::Fsync),
        (3, Op::FsyncDir),
        (2, Op::Churn),
    ],
    fsync: 0.3,
    files: 16,
    sizes: &[(35, 0..3584), (30, 3584..65_536), (35, 65_536..327_680)],
};

/// Metadata-heavy: mass create, rename, link and unlink of small files.
pub(super) const META: Mix = Mix {
    ops: &[
        (40, Op::Create),
        (18, Op::Rename),
        (12, Op::Unlink),
        (8, Op::Link),
        (10, Op::Churn),
        (4, Op::FsyncDir),
        (3, Op::Fsync),
        (2, Op::Overwrite),
        (2, Op::Append),
        (1, Op::Truncate),
    ],
    fsync: 0.1,
    files: 5000,
    sizes: &[(90, 0..300), (10, 300..8192)],
};

/// Lengths of appends and of in-place overwrites.
pub(super) const APPENDS: &[(u32, Range<usize>)] =
    &[(60, 1..4096), (30, 4096..65_536), (10, 65_536..200_000)];
pub(super) const OVERWRITES: &[(u32, Range<usize>)] =
    &[(50, 1..4096), (40, 4096..65_536), (10, 65_536..131_072)];
