//! What a change of a shard's leader does to the token table of the node
//! that takes the shard over.
//!
//! The table belongs to the node, not to the shard's replicated state: a
//! replica that takes a shard over cannot know what the leaders between its
//! terms granted. So at a take-over ([`Tokens::take_over`]) it forgets
//! what it noted of the shard's inodes and entries, and tells every client
//! that polls it to drop what it caches of that shard (`Revoke::Shard`;
//! each gets tokens again as it asks), waiting until each acknowledged
//! before the shard serves. Tokens of the node's other shards stand. A
//! client that does not acknowledge within the revocation wait loses all
//! its tokens here and gets none until it polls again; one that cannot
//! reach a node at all drops what it caches of every shard that node holds
//! (see the client's `tokens`). A client that reopens a file it kept since its close says so,
//! and is made to drop what it cached of it unless this table still notes
//! it kept ([`Tokens::confirm_kept`]).

use std::collections::HashMap;
use std::time::Instant;

use weft_proto::token::Revoke;
use weft_proto::types::{ino_shard, FsId, Ino, ShardId};

use super::{Covers, Revoked, State, Tokens};

impl Tokens {
    /// Whether `client` still keeps closed file `ino` as far as this table
    /// knows (see [`Tokens::confirm_kept`]); never waits.
    pub fn noted_kept(&self, fs: FsId, client: u64, ino: Ino) -> bool {
        self.lock().noted_kept(fs, client, ino)
    }

    /// `client` reopens `ino`, which it kept since its last close, and is
    /// about to use what it cached. Unless this table still notes it kept
    /// (no change revoked it, the client was not reset, and this node's
    /// table was not emptied by a take-over), the client is first made to
    /// drop what it cached of the file: a revocation sent to it alone and
    /// waited for as a change's is (after its pending reset, if any, which
    /// drops everything anyway). `None` when the client could not be made
    /// to within the revocation wait (it is not polling this node, or did
    /// not acknowledge): the reopen must not be answered yet.
    pub fn confirm_kept(&self, fs: FsId, client: u64, ino: Ino) -> Option<Revoked> {
        let now = Instant::now();
        let mut st = self.lock();
        if st.noted_kept(fs, client, ino) {
            return Some(Revoked::default());
        }
        let deadline = now + self.wait;
        loop {
            let pending_reset = st.clients.get(&(fs, client))?.reset;
            if !pending_reset {
                if let Some(seq) = st.enqueue(fs, client, &Revoke::Inode(ino), now) {
                    let targets = HashMap::from([(client, seq)]);
                    let r = self.await_acks(st, fs, targets, now);
                    return (r.lost == 0).then_some(r);
                }
                // Not live: it was reset; wait for it to take that.
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            st = match self.wake.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Forgets every token on inodes and entries of `shard` (a reopen of
    /// a kept file then finds it not noted), as a take-over does first.
    #[cfg(test)]
    pub(super) fn forget_shard(&self, fs: FsId, shard: ShardId) {
        self.lock().forget_shard(fs, shard);
    }

    /// This node's replica takes `shard` over in a later term: forgets
    /// what was noted of the shard and tells every live client of `fs`
    /// that polls this node to drop what it caches of the shard
    /// (`Revoke::Shard`), waiting (up to the revocation wait) until each
    /// acknowledged. What a client cached under an earlier leader's
    /// tokens, of files it keeps open too, is dropped before the new leader
    /// answers a change; what it caches of other shards stays. A client
    /// that does not acknowledge in time loses all its tokens here.
    pub fn take_over(&self, fs: FsId, shard: ShardId) -> Revoked {
        let now = Instant::now();
        let mut st = self.lock();
        st.forget_shard(fs, shard);
        let live: Vec<u64> = st
            .clients
            .iter()
            .filter(|((f, _), q)| *f == fs && q.live(now))
            .map(|((_, c), _)| *c)
            .collect();
        let mut targets = HashMap::new();
        for c in live {
            if let Some(seq) = st.enqueue(fs, c, &Revoke::Shard(shard), now) {
                targets.insert(c, seq);
            }
        }
        self.await_acks(st, fs, targets, now)
    }
}

impl State {
    /// [`Tokens::forget_shard`] under the table's lock.
    fn forget_shard(&mut self, fs: FsId, shard: ShardId) {
        let on = |ino: Ino| ino_shard(ino) == shard;
        self.grants.retain(|c, _| match c {
            Covers::Attr(f, ino) | Covers::Entry(f, ino, _) => !(*f == fs && on(*ino)),
        });
        self.data.retain(|(f, ino), _| !(*f == fs && on(*ino)));
    }
}
