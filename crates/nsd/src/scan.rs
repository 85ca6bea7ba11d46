//! Rebuilds an NSD's space accounting at open by reading every chunk header,
//! removes temporary files left by writes a crash interrupted, sets aside
//! chunk files a crash tore at creation (see `recover`), and reads whole
//! the chunks written after the settle mark, re-checksumming those whose
//! data did not all reach the disk (see `settled`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::chunk::{piece_count, ChunkHeader};
use crate::chunk_file::{self, ChunkIoError};
use crate::error::NsdError;
use crate::paths::{parse_decimal, parse_entry, parse_file_dir, Entry, Paths};
use crate::recover;
use crate::settled;
use crate::usage::Usage;

/// What the scan found besides healthy chunks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanReport {
    /// Chunks whose header is damaged; accounted by their file length.
    pub damaged: u64,
    pub tmp_removed: u64,
    /// Chunk files torn at creation, moved to `damaged/`.
    pub torn: u64,
    /// Chunks written after the settle mark, re-checksummed from their bytes.
    pub unsettled: u64,
}

/// Walks the chunk tree; `mark` is the settle mark (`None`: all suspect).
pub fn rebuild(
    paths: &Paths,
    usage: &Usage,
    block_size: u32,
    mark: Option<u64>,
) -> Result<ScanReport, NsdError> {
    let scan = Scan {
        paths,
        usage,
        block_size,
        mark,
    };
    let mut report = ScanReport::default();
    for fs_dir in subdirs(paths.root(), |n| parse_decimal(n).is_some())? {
        for hash_dir in subdirs(&fs_dir, |n| {
            n.len() == 2 && n.bytes().all(|b| b.is_ascii_hexdigit())
        })? {
            for file_dir in subdirs(&hash_dir, |n| parse_file_dir(n).is_some())? {
                scan.file_dir(&file_dir, &mut report)?;
            }
        }
    }
    Ok(report)
}

struct Scan<'a> {
    paths: &'a Paths,
    usage: &'a Usage,
    block_size: u32,
    mark: Option<u64>,
}

impl Scan<'_> {
    fn file_dir(&self, dir: &Path, report: &mut ScanReport) -> Result<(), NsdError> {
        for (name, path) in entries(dir)? {
            match parse_entry(&name) {
                Entry::Chunk(_) => self.chunk(&path, report)?,
                Entry::Tmp(_) => {
                    fs::remove_file(&path).map_err(|e| NsdError::io(&path, "remove", e))?;
                    report.tmp_removed += 1;
                }
                Entry::Other => {
                    tracing::warn!(path = %path.display(), "unexpected file in NSD chunk tree; ignored");
                }
            }
        }
        Ok(())
    }

    fn chunk(&self, path: &Path, report: &mut ScanReport) -> Result<(), NsdError> {
        let file = fs::File::open(path).map_err(|e| NsdError::io(path, "open", e))?;
        match chunk_file::load(&file) {
            Ok(loaded) => {
                let mtime = file
                    .metadata()
                    .and_then(|m| m.modified())
                    .map_err(|e| NsdError::io(path, "stat", e))?;
                if settled::unsettled(settled::nanos(mtime), self.mark)
                    && !self.data_checks(&file, &loaded.header, path)?
                    && recover::recheck(path, self.block_size)
                        .map_err(|e| NsdError::io(path, "recover", e))?
                {
                    report.unsettled += 1;
                }
            }
            Err(ChunkIoError::Io { op, source }) => return Err(NsdError::io(path, op, source)),
            Err(ChunkIoError::Format(f)) if recover::torn_at_creation(&f) => {
                let name = set_aside_name(self.paths, path);
                recover::set_aside(path, &self.paths.damaged(), &name)
                    .map_err(|e| NsdError::io(path, "set aside", e))?;
                report.torn += 1;
                return Ok(());
            }
            Err(e) => {
                report.damaged += 1;
                tracing::error!(path = %path.display(), error = ?e, "damaged chunk found at open");
            }
        }
        let len = chunk_file::accounted_len(&file, self.block_size)
            .map_err(|e| NsdError::io(path, "read header of", e))?;
        self.usage.force(None, Some(len));
        Ok(())
    }

    /// Whether every piece of a chunk matches its checksum.
    fn data_checks(
        &self,
        file: &fs::File,
        header: &ChunkHeader,
        path: &Path,
    ) -> Result<bool, NsdError> {
        for p in 0..piece_count(header.len) {
            match chunk_file::read_piece(file, header, p) {
                Ok(_) => {}
                Err(ChunkIoError::Io { op, source }) => return Err(NsdError::io(path, op, source)),
                Err(_) => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// `fs.inode.gen.block` of a chunk file, from its place in the tree.
fn set_aside_name(paths: &Paths, path: &Path) -> String {
    // The tree is fs/xx/inode.gen/block; xx only spreads directories.
    let rel = path.strip_prefix(paths.root()).unwrap_or(path);
    let parts: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
    match &parts[..] {
        [fs, _, file, block] => format!("{fs}.{file}.{block}"),
        _ => parts.join("."),
    }
}

fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>, NsdError> {
    let rd = fs::read_dir(dir).map_err(|e| NsdError::io(dir, "list directory", e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| NsdError::io(dir, "list directory", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        out.push((name, entry.path()));
    }
    Ok(out)
}

/// Subdirectories whose name passes `want`; anything else is logged and skipped.
fn subdirs(dir: &Path, want: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>, NsdError> {
    let mut out = Vec::new();
    for (name, path) in entries(dir)? {
        let is_dir = fs::metadata(&path)
            .map(|m| m.is_dir())
            .or_else(|e| {
                if e.kind() == io::ErrorKind::NotFound {
                    Ok(false)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| NsdError::io(&path, "stat", e))?;
        if is_dir && want(&name) {
            out.push(path);
        } else {
            tracing::warn!(path = %path.display(), "unexpected entry in NSD chunk tree; ignored");
        }
    }
    Ok(out)
}
