//! Opening a shard database: refuse what is not ours before writing a byte,
//! create the root directory on first use.
//!
//! An existing file is first opened read-only, which redb promises not to
//! modify, and its identity (format version, fs, shard) is checked there; so
//! a refused file stays byte-for-byte as it was. Only then is it opened for
//! writing. A file redb must repair after a crash cannot be opened read-only:
//! it is repaired by the writable open and checked right after.

use std::io::ErrorKind as IoKind;
use std::path::Path;

use redb::{
    Builder, Database, DatabaseError, Durability, ReadableDatabase, StorageError, TableError,
};
use weft_proto::config::FORMAT_VERSION;
use weft_proto::types::{Timespec, ROOT_INO};

use crate::error::MetaError;
use crate::fail::OpError;
use crate::inode::Inode;
use crate::schema::{key, DECISIONS, DIRENTS, INODES, INTENTS, META, ORPHANS, XATTRS};
use crate::spec::MetaSpec;

/// What an inspected database holds.
#[derive(Debug, PartialEq, Eq)]
enum Found {
    /// No tables at all: a new file, or one whose first commit never happened.
    Empty,
    /// A shard of this fs, shard and format.
    Ours,
}

pub(crate) fn open_database(path: &Path, spec: &MetaSpec) -> Result<Database, MetaError> {
    spec.validate()?;
    let exists = match std::fs::metadata(path) {
        Ok(m) => m.len() > 0,
        Err(e) if e.kind() == IoKind::NotFound => false,
        Err(source) => {
            return Err(MetaError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    if exists {
        match Builder::new().open_read_only(path) {
            Ok(ro) => {
                let found = inspect(&ro, path, spec);
                if let Err(e) = ro.close() {
                    tracing::warn!(path = %path.display(), error = %e, "closing the read-only view");
                }
                found?;
            }
            Err(DatabaseError::RepairAborted) => {
                tracing::warn!(path = %path.display(), "database was not closed cleanly; repairing");
            }
            Err(e) => return Err(open_error(path, e)),
        }
    }
    let db = Builder::new()
        .create(path)
        .map_err(|e| open_error(path, e))?;
    if inspect(&db, path, spec)? == Found::Empty {
        initialise(&db, spec).map_err(|e| match e {
            OpError::Storage(source) => MetaError::Storage {
                path: path.to_owned(),
                source,
            },
            other => MetaError::Corrupt {
                path: path.to_owned(),
                reason: other.to_string(),
            },
        })?;
        tracing::info!(path = %path.display(), fs = spec.fs, shard = spec.shard, "created metadata shard");
    }
    Ok(db)
}

/// Checks that the database is a shard of `spec`'s fs and shard in this format.
fn inspect(db: &impl ReadableDatabase, path: &Path, spec: &MetaSpec) -> Result<Found, MetaError> {
    let storage = |e: redb::Error| MetaError::Storage {
        path: path.to_owned(),
        source: e,
    };
    let txn = db.begin_read().map_err(|e| storage(e.into()))?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => {
            let mut tables = txn.list_tables().map_err(|e| storage(e.into()))?;
            return if tables.next().is_none() {
                Ok(Found::Empty)
            } else {
                Err(MetaError::ForeignDatabase {
                    path: path.to_owned(),
                    missing: "meta table",
                })
            };
        }
        Err(e) => return Err(storage(e.into())),
    };
    let get = |k: &'static str| -> Result<u64, MetaError> {
        meta.get(k)
            .map_err(|e| storage(e.into()))?
            .map(|g| g.value())
            .ok_or(MetaError::ForeignDatabase {
                path: path.to_owned(),
                missing: k,
            })
    };
    let found = get(key::FORMAT_VERSION)?;
    if found != u64::from(FORMAT_VERSION) {
        return Err(MetaError::IncompatibleFormat {
            path: path.to_owned(),
            found,
            expected: u64::from(FORMAT_VERSION),
        });
    }
    let (found_fs, found_shard) = (get(key::FS)?, get(key::SHARD)?);
    if found_fs != u64::from(spec.fs) || found_shard != u64::from(spec.shard) {
        return Err(MetaError::WrongShard {
            path: path.to_owned(),
            found_fs,
            found_shard,
            fs: spec.fs.into(),
            shard: spec.shard.into(),
        });
    }
    Ok(Found::Ours)
}

/// The first commit: every table, the identity, the counters and the root.
fn initialise(db: &Database, spec: &MetaSpec) -> Result<(), OpError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut meta = txn.open_table(META)?;
        for (k, v) in [
            (key::FORMAT_VERSION, u64::from(FORMAT_VERSION)),
            (key::FS, u64::from(spec.fs)),
            (key::SHARD, u64::from(spec.shard)),
            (key::NEXT_INO, 2),
            (key::NEXT_GEN, 2),
            (key::INODES_USED, u64::from(spec.shard == 0)),
            (key::INLINE_BYTES, 0),
        ] {
            meta.insert(k, v)?;
        }
        let mut inodes = txn.open_table(INODES)?;
        // The root directory lives on shard 0.
        if spec.shard == 0 {
            let mut root = Inode::new(
                weft_proto::types::FileKind::Dir,
                0o755,
                0,
                0,
                1,
                Timespec::now(),
            );
            root.nlink = 2;
            root.parent = ROOT_INO;
            inodes.insert(ROOT_INO, root.encode(ROOT_INO)?.as_slice())?;
        }
        txn.open_table(DIRENTS)?;
        txn.open_table(XATTRS)?;
        txn.open_table(ORPHANS)?;
        txn.open_table(INTENTS)?;
        txn.open_table(DECISIONS)?;
    }
    txn.commit()?;
    Ok(())
}

fn open_error(path: &Path, e: DatabaseError) -> MetaError {
    let path = path.to_owned();
    match e {
        DatabaseError::DatabaseAlreadyOpen => MetaError::InUse { path },
        DatabaseError::Storage(StorageError::Io(io)) if io.kind() == IoKind::InvalidData => {
            MetaError::NotADatabase {
                path,
                reason: io.to_string(),
            }
        }
        DatabaseError::Storage(StorageError::Corrupted(reason)) => {
            MetaError::NotADatabase { path, reason }
        }
        source => MetaError::Open { path, source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{spec, Fx};
    use crate::MetaServer;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{NewNode, RenameMode, XattrMode};

    #[test]
    fn everything_survives_a_reopen() {
        let fx = Fx::with(|s| {
            s.durable = true;
            s.data_in_inode = true;
        });
        let d = fx.mkdir(ROOT_INO, "d");
        let f = fx.file(d.ino, "f");
        let l = fx.make(
            ROOT_INO,
            "l",
            NewNode::Symlink {
                target: b"d/f".to_vec(),
            },
            0,
        );
        fx.call_data(
            MetaRequest::WriteInline {
                ino: f.ino,
                offset: 0,
            },
            b"data",
        );
        fx.unit(MetaRequest::SetXattr {
            ino: f.ino,
            name: b"user.k".to_vec(),
            value: b"v".to_vec(),
            mode: XattrMode::Any,
        });
        let gone = fx.file(ROOT_INO, "gone");
        fx.unlink(ROOT_INO, "gone").unwrap();
        let before = (
            fx.names(ROOT_INO),
            fx.names(d.ino),
            fx.getattr(ROOT_INO),
            fx.getattr(d.ino),
            fx.getattr(f.ino),
            fx.getattr(l.ino),
            fx.orphans(),
            fx.counters(),
        );
        let fx = fx.reopen();
        let after = (
            fx.names(ROOT_INO),
            fx.names(d.ino),
            fx.getattr(ROOT_INO),
            fx.getattr(d.ino),
            fx.getattr(f.ino),
            fx.getattr(l.ino),
            fx.orphans(),
            fx.counters(),
        );
        assert_eq!(before, after);
        assert_eq!(after.6[0].ino, gone.ino);
        assert_eq!(
            fx.call(MetaRequest::GetXattr {
                ino: f.ino,
                name: b"user.k".to_vec()
            }),
            weft_proto::msg::Response::Xattr(b"v".to_vec())
        );
        assert_eq!(
            &fx.srv
                .handle(MetaRequest::ReadInline { ino: f.ino }, bytes::Bytes::new())
                .1[..],
            b"data"
        );
        // Numbers keep counting from where they were: no reuse after reopen.
        let g = fx.file(ROOT_INO, "g");
        assert!(g.ino > gone.ino && g.gen > gone.gen);
        fx.rename(ROOT_INO, "g", d.ino, "g", RenameMode::Replace)
            .unwrap();
    }

    #[test]
    fn non_durable_commits_survive_a_clean_close() {
        let fx = Fx::with(|s| s.durable = false);
        let a = fx.file(ROOT_INO, "a");
        let fx = fx.reopen();
        assert_eq!(fx.lookup(ROOT_INO, "a"), Ok(a));
    }

    #[test]
    fn another_format_version_is_refused_untouched() {
        let fx = Fx::new();
        fx.file(ROOT_INO, "a");
        let txn = fx.srv.db.begin_write().unwrap();
        txn.open_table(META)
            .unwrap()
            .insert(key::FORMAT_VERSION, 99)
            .unwrap();
        txn.commit().unwrap();
        let Fx { dir, srv, spec } = fx;
        drop(srv);
        let path = dir.path().join("shard.redb");
        let bytes = std::fs::read(&path).unwrap();
        let err = MetaServer::open(&path, spec.clone()).err().unwrap();
        match &err {
            MetaError::IncompatibleFormat {
                path: p,
                found,
                expected,
            } => {
                assert_eq!(
                    (p, *found, *expected),
                    (&path, 99, u64::from(FORMAT_VERSION))
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(err.to_string().contains("99"), "{err}");
        assert!(
            std::fs::read(&path).unwrap() == bytes,
            "the refused file changed"
        );
    }

    #[test]
    fn another_shard_is_refused_untouched() {
        let fx = Fx::new();
        let Fx { dir, srv, spec } = fx;
        drop(srv);
        let path = dir.path().join("shard.redb");
        let bytes = std::fs::read(&path).unwrap();
        let other = MetaSpec {
            shard: 9,
            ..spec.clone()
        };
        assert!(matches!(
            MetaServer::open(&path, other),
            Err(MetaError::WrongShard {
                found_shard: 0,
                shard: 9,
                ..
            })
        ));
        let other = MetaSpec { fs: 8, ..spec };
        assert!(matches!(
            MetaServer::open(&path, other),
            Err(MetaError::WrongShard {
                found_fs: 7,
                fs: 8,
                ..
            })
        ));
        assert!(std::fs::read(&path).unwrap() == bytes);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        let text = b"these are not the records you are looking for\n".repeat(200);
        std::fs::write(&path, &text).unwrap();
        let err = MetaServer::open(&path, spec()).err().unwrap();
        assert!(matches!(err, MetaError::NotADatabase { .. }), "{err:?}");
        assert!(err.to_string().contains("notes.txt"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), text);
        std::fs::write(&path, b"x").unwrap();
        assert!(matches!(
            MetaServer::open(&path, spec()),
            Err(MetaError::NotADatabase { .. })
        ));
    }

    #[test]
    fn a_foreign_redb_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("other.redb");
        {
            let db = Database::create(&path).unwrap();
            let txn = db.begin_write().unwrap();
            txn.open_table(redb::TableDefinition::<u64, u64>::new("theirs"))
                .unwrap()
                .insert(1, 2)
                .unwrap();
            txn.commit().unwrap();
        }
        assert!(matches!(
            MetaServer::open(&path, spec()),
            Err(MetaError::ForeignDatabase { .. })
        ));
    }

    #[test]
    fn an_empty_file_becomes_a_shard() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty");
        std::fs::write(&path, b"").unwrap();
        let srv = MetaServer::open(&path, spec()).unwrap();
        let (r, _) = srv.handle(MetaRequest::GetAttr { ino: ROOT_INO }, bytes::Bytes::new());
        assert!(matches!(r, weft_proto::msg::Response::Attr(_)));
    }

    #[test]
    fn one_server_per_database() {
        let fx = Fx::new();
        assert!(matches!(
            MetaServer::open(&fx.path(), fx.spec.clone()),
            Err(MetaError::InUse { .. })
        ));
    }

    #[test]
    fn a_missing_directory_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no/such/dir/shard.redb");
        let err = MetaServer::open(&path, spec()).err().unwrap();
        assert!(err.to_string().contains("no/such/dir"), "{err}");
    }

    #[test]
    fn a_bad_spec_is_refused_before_touching_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("shard.redb");
        let bad = MetaSpec {
            block_size: 0,
            ..spec()
        };
        assert!(matches!(
            MetaServer::open(&path, bad),
            Err(MetaError::BadSpec { .. })
        ));
        assert!(!path.exists());
    }
}
