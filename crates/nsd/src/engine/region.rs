//! The engine's index lives inside its own device: a redb database over a
//! fixed area of it, through this [`redb::StorageBackend`].
//!
//! The area's first unit holds the database's current length (redb grows
//! and shrinks its file); the database's bytes follow. Growth past the area
//! is refused with an error naming the area's size.
//!
//! ```text
//! offset  size  field (in the area's first unit)
//! 0       4     magic b"WIDX"
//! 4       8     database length (u64 LE)
//! 12      4     CRC32C of bytes 0..12
//! ```

use std::io;
use std::sync::{Arc, Mutex};

use super::disk::Disk;
use super::superblock::UNIT;

const MAGIC: [u8; 4] = *b"WIDX";

#[derive(Debug)]
pub struct Region {
    disk: Arc<dyn Disk>,
    /// Where the length unit is; the database starts one unit later.
    offset: u64,
    /// Room for the database.
    room: u64,
    len: Mutex<u64>,
}

impl Region {
    /// Opens the area at `offset` of `len` bytes; a fresh area (zeros)
    /// holds an empty database.
    pub fn open(disk: Arc<dyn Disk>, offset: u64, len: u64) -> io::Result<Region> {
        let mut head = [0u8; 16];
        disk.read_at(&mut head, offset)?;
        let db_len = if head == [0u8; 16] {
            0
        } else {
            let crc = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
            if head[..4] != MAGIC || crc != crc32c::crc32c(&head[..12]) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the index area's length record is damaged",
                ));
            }
            let mut l = [0u8; 8];
            l.copy_from_slice(&head[4..12]);
            u64::from_le_bytes(l)
        };
        let room = len.saturating_sub(UNIT);
        if db_len > room {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the index claims {db_len} bytes, its area holds {room}"),
            ));
        }
        Ok(Region {
            disk,
            offset,
            room,
            len: Mutex::new(db_len),
        })
    }

    fn base(&self) -> u64 {
        self.offset + UNIT
    }

    fn write_len(&self, len: u64) -> io::Result<()> {
        let mut head = [0u8; 16];
        head[..4].copy_from_slice(&MAGIC);
        head[4..12].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c(&head[..12]);
        head[12..].copy_from_slice(&crc.to_le_bytes());
        self.disk.write_at(&head, self.offset)
    }

    fn current(&self) -> u64 {
        *self.len.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl redb::StorageBackend for Region {
    fn len(&self) -> Result<u64, io::Error> {
        Ok(self.current())
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), io::Error> {
        let end = offset.saturating_add(out.len() as u64);
        if end > self.current() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("index read at {offset} passes its end"),
            ));
        }
        self.disk.read_at(out, self.base() + offset)
    }

    fn set_len(&self, len: u64) -> Result<(), io::Error> {
        let mut cur = self.len.lock().unwrap_or_else(|e| e.into_inner());
        if len > self.room {
            return Err(io::Error::new(
                io::ErrorKind::StorageFull,
                format!(
                    "the index needs {len} bytes, its area on the device holds {}; \
                     move the NSD's files to a larger NSD",
                    self.room
                ),
            ));
        }
        if len > *cur {
            // New bytes must read as zeros; earlier contents may linger.
            let zeros = vec![0u8; 1 << 20];
            let mut at = *cur;
            while at < len {
                let n = (len - at).min(zeros.len() as u64) as usize;
                self.disk.write_at(&zeros[..n], self.base() + at)?;
                at += n as u64;
            }
        }
        self.write_len(len)?;
        *cur = len;
        Ok(())
    }

    fn sync_data(&self) -> Result<(), io::Error> {
        self.disk.sync()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), io::Error> {
        let end = offset.saturating_add(data.len() as u64);
        if end > self.current() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("index write at {offset} passes its end"),
            ));
        }
        self.disk.write_at(data, self.base() + offset)
    }
}
