//! A replicated shard's snapshot: every record of the shard's tables in one
//! file, written and read as a stream (never the whole shard in memory).
//!
//! ```text
//! "WEFTSNAP"  u32 LE format (RAFT_FORMAT)  u32 LE length  JSON SnapshotMeta
//! records:    u8 table  u32 LE key length  key  u32 LE value length  value
//! end:        u8 0xFF
//! ```
//!
//! Tables: 0–4 the KV spaces (inodes, dirents, xattrs, orphans, meta, in
//! the KV seam's encodings), 5 intents, 6 decisions, 7 locks.

use std::io::{BufReader, BufWriter, Read, Write};

use redb::{ReadTransaction, ReadableTable};
use weft_raft::RAFT_FORMAT;

use crate::fail::OpError;
use crate::kv::{KvRead, RedbRead, Space};
use crate::schema::{DECISIONS, INTENTS, LOCKS};
use crate::txn::{Change, Table};

const MAGIC: &[u8; 8] = b"WEFTSNAP";
const END: u8 = 0xFF;
/// Records read per page while walking a table.
const PAGE: usize = 1024;

pub(crate) type Meta = openraft::SnapshotMeta<u64, openraft::BasicNode>;

const SPACES: [Space; 5] = [
    Space::Inodes,
    Space::Dirents,
    Space::Xattrs,
    Space::Orphans,
    Space::Meta,
];

fn tag(t: Table) -> u8 {
    match t {
        Table::Kv(Space::Inodes) => 0,
        Table::Kv(Space::Dirents) => 1,
        Table::Kv(Space::Xattrs) => 2,
        Table::Kv(Space::Orphans) => 3,
        Table::Kv(Space::Meta) => 4,
        Table::Intents => 5,
        Table::Decisions => 6,
        Table::Locks => 7,
    }
}

fn table_of(tag: u8) -> Option<Table> {
    Some(match tag {
        0..=4 => Table::Kv(SPACES[usize::from(tag)]),
        5 => Table::Intents,
        6 => Table::Decisions,
        7 => Table::Locks,
        _ => return None,
    })
}

fn bad(reason: impl Into<String>) -> OpError {
    OpError::BadRecord {
        what: "shard snapshot".into(),
        reason: reason.into(),
    }
}

fn io(e: std::io::Error) -> OpError {
    bad(e.to_string())
}

/// Calls `f` with every record of the shard as `txn` sees it, a page at a
/// time.
pub(crate) fn for_each_record(
    txn: &ReadTransaction,
    mut f: impl FnMut(Change) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let kv = RedbRead::open(txn)?;
    for space in SPACES {
        let mut from = Vec::new();
        let mut exclusive = false;
        loop {
            let page = kv.scan(space, &[], &from, exclusive, PAGE)?;
            let full = page.len() == PAGE;
            for (key, value) in page {
                from.clone_from(&key);
                f(Change {
                    table: Table::Kv(space),
                    key,
                    value: Some(value),
                })?;
            }
            if !full {
                break;
            }
            exclusive = true;
        }
    }
    for (table, def) in [
        (Table::Intents, INTENTS),
        (Table::Decisions, DECISIONS),
        (Table::Locks, LOCKS),
    ] {
        let t = match txn.open_table(def) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => continue,
            Err(e) => return Err(e.into()),
        };
        for item in t.iter()? {
            let (k, v) = item?;
            f(Change {
                table,
                key: k.value().to_be_bytes().to_vec(),
                value: Some(v.value().to_vec()),
            })?;
        }
    }
    Ok(())
}

fn put_len(w: &mut impl Write, n: usize) -> Result<(), OpError> {
    let n = u32::try_from(n).map_err(|_| bad("a record over 4 GiB"))?;
    w.write_all(&n.to_le_bytes()).map_err(io)
}

/// Writes the snapshot of what `txn` sees, described by `meta`, to `out`
/// (without `records`, the header alone: a witness's).
pub(crate) fn write(
    txn: &ReadTransaction,
    meta: &Meta,
    out: std::fs::File,
    records: bool,
) -> Result<std::fs::File, OpError> {
    let mut w = BufWriter::new(out);
    w.write_all(MAGIC).map_err(io)?;
    w.write_all(&RAFT_FORMAT.to_le_bytes()).map_err(io)?;
    let head = serde_json::to_vec(meta).map_err(|e| bad(e.to_string()))?;
    put_len(&mut w, head.len())?;
    w.write_all(&head).map_err(io)?;
    for_each_record(txn, |c| {
        if !records {
            return Ok(());
        }
        let value = c.value.unwrap_or_default();
        w.write_all(&[tag(c.table)]).map_err(io)?;
        put_len(&mut w, c.key.len())?;
        w.write_all(&c.key).map_err(io)?;
        put_len(&mut w, value.len())?;
        w.write_all(&value).map_err(io)
    })?;
    w.write_all(&[END]).map_err(io)?;
    let file = w.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    Ok(file)
}

fn get_u32(r: &mut impl Read) -> Result<usize, OpError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b).map_err(io)?;
    Ok(u32::from_le_bytes(b) as usize)
}

fn get_bytes(r: &mut impl Read, n: usize) -> Result<Vec<u8>, OpError> {
    let mut v = Vec::new();
    r.by_ref().take(n as u64).read_to_end(&mut v).map_err(io)?;
    if v.len() != n {
        return Err(bad("ends inside a record"));
    }
    Ok(v)
}

/// Reads a snapshot's header: its meta, and the reader positioned at the
/// first record.
pub(crate) fn read_head(file: std::fs::File) -> Result<(Meta, BufReader<std::fs::File>), OpError> {
    let mut r = BufReader::new(file);
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic).map_err(io)?;
    if &magic != MAGIC {
        return Err(bad("not a Weft shard snapshot"));
    }
    let format = get_u32(&mut r)?;
    if format != RAFT_FORMAT as usize {
        return Err(bad(format!(
            "format {format}, this node reads {RAFT_FORMAT}: upgrade the older node"
        )));
    }
    let n = get_u32(&mut r)?;
    let head = get_bytes(&mut r, n)?;
    let meta = serde_json::from_slice(&head).map_err(|e| bad(e.to_string()))?;
    Ok((meta, r))
}

/// Calls `f` with the snapshot's records, `PAGE` at a time.
pub(crate) fn read_records(
    r: &mut impl Read,
    mut f: impl FnMut(&[Change]) -> Result<(), OpError>,
) -> Result<(), OpError> {
    let mut batch = Vec::with_capacity(PAGE);
    loop {
        let mut t = [0u8; 1];
        r.read_exact(&mut t).map_err(io)?;
        if t[0] == END {
            break;
        }
        let table = table_of(t[0]).ok_or_else(|| bad(format!("unknown table {}", t[0])))?;
        let n = get_u32(r)?;
        let key = get_bytes(r, n)?;
        let n = get_u32(r)?;
        let value = Some(get_bytes(r, n)?);
        batch.push(Change { table, key, value });
        if batch.len() == PAGE {
            f(&batch)?;
            batch.clear();
        }
    }
    if !batch.is_empty() {
        f(&batch)?;
    }
    Ok(())
}
