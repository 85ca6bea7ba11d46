//! The directory tree of one NSD: where each chunk file lives.
//!
//! `<nsd>/chunks/<fs>/<xx>/<ino as 16 hex>.<gen>/<block>`, with `xx` the
//! inode number modulo 256 in two hex digits so that no directory grows
//! with the number of files. A write in progress uses
//! `.tmp.<block>.<n>` in the same directory, renamed over `<block>` when done.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use weft_proto::types::{ChunkId, FsId, Ino};

pub const LABEL_FILE: &str = "nsd.label";
pub const CHUNKS_DIR: &str = "chunks";
const TMP_PREFIX: &str = ".tmp.";

/// Paths inside one NSD.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `<nsd>/chunks`
    root: PathBuf,
}

/// What a name inside a file's directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Chunk(u64),
    /// A temporary file of a write to this block.
    Tmp(u64),
    Other,
}

impl Paths {
    pub fn new(nsd_path: &Path) -> Self {
        Paths {
            root: nsd_path.join(CHUNKS_DIR),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where chunk files torn at creation are set aside (beside `chunks/`).
    pub fn damaged(&self) -> PathBuf {
        self.root.with_file_name(crate::recover::DAMAGED_DIR)
    }

    /// The NSD's directory (holding `chunks/`).
    pub fn nsd_root(&self) -> &Path {
        self.root.parent().unwrap_or(&self.root)
    }

    pub fn fs_dir(&self, fs: FsId) -> PathBuf {
        self.root.join(fs.to_string())
    }

    pub fn file_dir(&self, fs: FsId, ino: Ino, gen: u64) -> PathBuf {
        self.fs_dir(fs)
            .join(format!("{:02x}", ino % 256))
            .join(file_dir_name(ino, gen))
    }

    pub fn chunk(&self, c: &ChunkId) -> PathBuf {
        self.file_dir(c.fs, c.ino, c.gen).join(c.block.to_string())
    }

    pub fn tmp(&self, c: &ChunkId, n: u64) -> PathBuf {
        self.file_dir(c.fs, c.ino, c.gen)
            .join(format!("{TMP_PREFIX}{}.{n}", c.block))
    }

    /// Creates a file's directory and any missing parent below the root.
    /// Returns the directories created, top first.
    ///
    /// The file's own directory is tried first: its parents nearly always
    /// exist, and a `mkdir` that fails with `EEXIST` still takes the
    /// parent's lock, which every writer of new files would queue on.
    pub fn create_file_dir(&self, fs: FsId, ino: Ino, gen: u64) -> io::Result<Vec<PathBuf>> {
        let fs_dir = self.fs_dir(fs);
        let hash_dir = fs_dir.join(format!("{:02x}", ino % 256));
        let file_dir = hash_dir.join(file_dir_name(ino, gen));
        match fs::create_dir(&file_dir) {
            Ok(()) => return Ok(vec![file_dir]),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(Vec::new()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut created = Vec::new();
        for dir in [fs_dir, hash_dir, file_dir] {
            match fs::create_dir(&dir) {
                Ok(()) => created.push(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }
}

fn file_dir_name(ino: Ino, gen: u64) -> String {
    format!("{ino:016x}.{gen}")
}

/// Parses `<ino as 16 hex>.<gen>`.
pub fn parse_file_dir(name: &str) -> Option<(Ino, u64)> {
    let (ino, gen) = name.split_once('.')?;
    if ino.len() != 16 || !ino.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((u64::from_str_radix(ino, 16).ok()?, parse_decimal(gen)?))
}

/// Parses a name inside a file's directory.
pub fn parse_entry(name: &str) -> Entry {
    if let Some(block) = parse_decimal(name) {
        return Entry::Chunk(block);
    }
    if let Some(rest) = name.strip_prefix(TMP_PREFIX) {
        if let Some(block) = rest.split_once('.').and_then(|(b, _)| parse_decimal(b)) {
            return Entry::Tmp(block);
        }
    }
    Entry::Other
}

/// A decimal number without sign or leading zeros.
pub fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_paths_round_trip() {
        let p = Paths::new(Path::new("/n"));
        let c = ChunkId {
            fs: 3,
            ino: 0x1_0000_0000_01ff,
            gen: 7,
            block: 12,
        };
        assert_eq!(
            p.chunk(&c),
            Path::new("/n/chunks/3/ff/00010000000001ff.7/12")
        );
        assert_eq!(parse_file_dir("00010000000001ff.7"), Some((c.ino, 7)));
        assert_eq!(parse_entry("12"), Entry::Chunk(12));
        let tmp = p.tmp(&c, 99);
        let name = tmp.file_name().unwrap().to_str().unwrap();
        assert_eq!(parse_entry(name), Entry::Tmp(12));
    }

    #[test]
    fn a_file_directory_creates_only_the_parents_that_are_missing() {
        let tmp = tempfile::tempdir().unwrap();
        let p = Paths::new(tmp.path());
        std::fs::create_dir(p.root()).unwrap();
        let fs_dir = p.fs_dir(3);
        let hash_dir = fs_dir.join("01");
        // The first file of the file system makes every level.
        assert_eq!(
            p.create_file_dir(3, 0x101, 1).unwrap(),
            vec![fs_dir.clone(), hash_dir.clone(), p.file_dir(3, 0x101, 1)]
        );
        // Again: nothing. Another file of the same hash: its own only.
        assert!(p.create_file_dir(3, 0x101, 1).unwrap().is_empty());
        assert_eq!(
            p.create_file_dir(3, 0x201, 1).unwrap(),
            vec![p.file_dir(3, 0x201, 1)]
        );
        // Another hash: that level and the file's.
        assert_eq!(
            p.create_file_dir(3, 0x102, 1).unwrap(),
            vec![fs_dir.join("02"), p.file_dir(3, 0x102, 1)]
        );
        // No chunk tree at all is an error, not a tree made from nothing.
        let gone = Paths::new(&tmp.path().join("absent"));
        assert!(gone.create_file_dir(3, 0x101, 1).is_err());
    }

    #[test]
    fn odd_names_are_not_chunks() {
        for n in [
            "",
            "+1",
            "01",
            "1a",
            "-1",
            ".tmp.x.1",
            "99999999999999999999999",
        ] {
            assert_eq!(parse_entry(n), Entry::Other, "{n:?}");
        }
        for n in [
            "1ff.7",
            "00010000000001ff",
            "00010000000001fg.7",
            "00010000000001ff.+7",
        ] {
            assert_eq!(parse_file_dir(n), None, "{n:?}");
        }
    }
}
