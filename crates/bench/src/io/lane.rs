//! One thread's part of a data test ([`Lane`]): which file, how many
//! records, where its offsets fall in each pattern, and the loop that moves
//! them and times each call.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};

use super::{IoSpec, Op, Pattern};
use crate::aligned::AlignedBuf;
use crate::backend::BenchFile;
use crate::error::io_err;
use crate::latency::Latencies;
use crate::BenchError;

/// One thread's part of the test.
#[derive(Debug, Clone, Copy)]
pub(super) struct Lane {
    /// Index into the test's files.
    pub(super) file: usize,
    /// Records this thread moves.
    pub(super) ops: u64,
    /// First record of a sequential lane.
    pub(super) first: u64,
    /// This thread's rank among the threads sharing the file.
    pub(super) index: u64,
    pub(super) sharers: u64,
    /// Records in the region offsets range over.
    pub(super) file_records: u64,
}

/// The offset of a lane's k-th record.
pub(super) fn offset(spec: &IoSpec, lane: &Lane, k: u64, rng: &mut rand::rngs::StdRng) -> u64 {
    let rec = spec.record;
    match spec.pattern {
        Pattern::Seq => (lane.first + k) * rec,
        Pattern::Rand => rng.gen_range(0..lane.file_records) * rec,
        Pattern::Strided => {
            let stride = spec.stride.unwrap_or(lane.sharers * rec);
            let region = lane.file_records * rec;
            let rank = (lane.index + spec.rank_shift) % lane.sharers.max(1);
            let off = (rank * rec + k * stride) % region;
            off.min(region - rec)
        }
    }
}

pub(super) fn worker(
    spec: &IoSpec,
    lane: &Lane,
    thread: u64,
    file: &dyn BenchFile,
    path: &Path,
    done: &AtomicU64,
    deadline: Option<Instant>,
) -> Result<(Latencies, Duration), BenchError> {
    let rec = spec.record as usize;
    let mut buf = AlignedBuf::new(rec).ok_or_else(|| BenchError::Invalid {
        what: "-r",
        reason: format!("cannot allocate a {rec}-byte buffer"),
    })?;
    let mut rng =
        rand::rngs::StdRng::seed_from_u64(spec.seed ^ thread.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    rng.fill(buf.as_mut_slice(rec));
    let mut lat = Latencies::default();
    let mut busy = Duration::ZERO;
    for k in 0..lane.ops {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let off = offset(spec, lane, k, &mut rng);
        let write = match spec.op {
            Op::Create | Op::Write => true,
            Op::Read => false,
            Op::Rw => rng.gen_bool(0.5),
        };
        let t0 = Instant::now();
        let r = if write {
            file.write_all_at(buf.as_slice(rec), off)
        } else {
            file.read_exact_at(buf.as_mut_slice(rec), off)
        };
        let dt = t0.elapsed();
        r.map_err(io_err(path))?;
        lat.record(dt);
        busy += dt;
        done.fetch_add(spec.record, Ordering::Relaxed);
    }
    if spec.file_per_thread && spec.fsync && spec.op != Op::Read {
        let t0 = Instant::now();
        file.sync().map_err(io_err(path))?;
        busy += t0.elapsed();
    }
    Ok((lat, busy))
}
