//! The usage answer of every NSD served here (`weft disk list`): what each
//! store reports, free space split among NSDs on one local file system, and
//! how far the resync of each NSD is ([`Resync`]).

use weft_proto::types::NsdId;

use super::NsdServer;

/// How far the resync of one NSD is, and what resyncs copied onto it.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Resync {
    /// The running resync: (chunks its pass still has to do, bytes copied).
    current: Option<(u64, u64)>,
    /// Bytes every resync since the server started copied.
    total: u64,
}

impl NsdServer {
    /// Usage of every NSD; NSDs sharing one local file system split its free space.
    pub(super) fn stats(&self) -> Vec<weft_proto::msg::NsdStat> {
        let devices: Vec<Option<u64>> = self.stores.iter().map(|s| s.device()).collect();
        let resyncs = match self.resyncs.read() {
            Ok(m) => m.clone(),
            Err(p) => p.into_inner().clone(),
        };
        self.stores
            .iter()
            .zip(&devices)
            .map(|(store, dev)| {
                let sharing = match dev {
                    Some(d) => devices.iter().filter(|o| **o == Some(*d)).count() as u64,
                    None => 1,
                };
                let mut stat = store.stat(sharing);
                if let Some(r) = resyncs.get(&stat.nsd) {
                    if let Some((left, bytes)) = r.current {
                        stat.to_sync = left;
                        stat.synced_bytes = bytes;
                    }
                    stat.resynced_total = r.total;
                }
                stat
            })
            .collect()
    }

    /// Records how far the resync of `nsd` is (`None`: not resyncing), for
    /// the usage answer (`weft disk list`).
    pub fn set_resync_progress(&self, nsd: NsdId, progress: Option<(u64, u64)>) {
        let mut map = match self.resyncs.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        let r = map.entry(nsd).or_default();
        if let Some((_, bytes)) = progress {
            // A new resync counts from zero again.
            let before = r.current.map_or(0, |(_, b)| b);
            r.total += bytes.checked_sub(before).unwrap_or(bytes);
        }
        r.current = progress;
    }
}
