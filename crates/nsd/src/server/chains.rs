//! What the server knows of each NSD's chains ([`ChainState`]: its disk
//! status and the newest chain-table version holding it), as the
//! configuration last told, and the check that refuses a change routed by
//! an older table or sent to an NSD that takes no writes.

use weft_proto::config::DiskStatus;
use weft_proto::types::NsdId;

use super::NsdServer;
use crate::error::RequestError;

/// What the server knows of one NSD's chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainState {
    pub status: DiskStatus,
    /// The newest version of the chain tables holding the NSD.
    pub version: u64,
}

impl NsdServer {
    /// Tells the server the chain states of its NSDs from the newest
    /// configuration: writes under an older chain-table version, and
    /// writes to an NSD that takes none, are refused from now on.
    pub fn set_chain_states(&self, states: impl IntoIterator<Item = (NsdId, ChainState)>) {
        let mut map = match self.chains.write() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        for (nsd, st) in states {
            map.insert(nsd, st);
        }
    }

    /// The chain state last told for `nsd`.
    pub fn chain_state(&self, nsd: NsdId) -> Option<ChainState> {
        match self.chains.read() {
            Ok(m) => m.get(&nsd).copied(),
            Err(p) => p.into_inner().get(&nsd).copied(),
        }
    }

    /// Refuses a change sent under chain-table version `chain_ver` when the
    /// NSD takes no writes or a newer table is known (0: not checked).
    pub(super) fn check_chain(&self, nsd: NsdId, chain_ver: u64) -> Result<(), RequestError> {
        let Some(st) = self.chain_state(nsd) else {
            return Ok(());
        };
        if !st.status.takes_writes() {
            return Err(RequestError::ChainChanged {
                nsd,
                reason: format!(
                    "the NSD is {} in chain table version {}",
                    st.status.as_str(),
                    st.version
                ),
            });
        }
        if chain_ver != 0 && chain_ver < st.version {
            return Err(RequestError::ChainChanged {
                nsd,
                reason: format!(
                    "sent under chain table version {chain_ver}, the NSD's chains are at version {}",
                    st.version
                ),
            });
        }
        Ok(())
    }
}
