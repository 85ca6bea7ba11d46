//! Tokens: which client caches what, and revoking that before a change is
//! answered (see [`weft_proto::token`] for what a client does with them).
//!
//! One [`Tokens`] table serves every shard of a node. A shard notes a token
//! for the client it answers: on a directory entry (look-up, creation, each
//! name of a listing), on an inode's attributes (any answer carrying them; a
//! shard that reads another shard's inode for a client asks for the token
//! there), and on an open file's data (until its close). Attribute and
//! entry tokens last as long as the client's kernel may cache what they
//! cover ([`HOLD`]); data tokens as long as the file is open, or, when its
//! client keeps a closed file cached (`Grant::Keep`), until a change
//! revokes them or the client gives the file up (`Grant::Drop`).
//!
//! After a shard commits a change it revokes every other client's tokens on
//! what the change touched: the revocation goes into each holder's queue,
//! which the holder collects with a long poll (`MetaRequest::Tokens`) and
//! acknowledges with its next one. The change is answered once every holder
//! acknowledged, or after [`REVOKE_WAIT`]; a holder that did not answer by
//! then loses all its tokens (it is told to drop everything when it next
//! polls, and gets no tokens until then), so one dead client delays a change
//! by at most that wait, once.
//!
//! Byte-range data tokens of open files live in the same table (`data`).

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use weft_proto::token::{Revocations, Revoke};
use weft_proto::types::{FsId, Ino};

use crate::kv::Space;

/// How long an attribute or entry token lasts: the kernel's attribute
/// timeout (1 s) with a margin for the answer's way to the client.
pub const HOLD: Duration = Duration::from_secs(2);
/// How long a change waits for the holders to acknowledge a revocation.
pub const REVOKE_WAIT: Duration = Duration::from_secs(2);
/// The longest long poll a client may ask for.
pub const MAX_POLL: Duration = Duration::from_secs(5);
/// A client not heard of for this long is forgotten.
const FORGET: Duration = Duration::from_secs(600);
/// A client that has not polled for this long (and is not polling) is
/// gone: its tokens go at the next change without waiting for it.
const GONE: Duration = Duration::from_secs(3);
/// Revocations queued for one client beyond which it is reset instead.
const MAX_QUEUE: usize = 65_536;

/// What a token covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Covers {
    Attr(FsId, Ino),
    Entry(FsId, Ino, Vec<u8>),
}

/// A token an answer gives its client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    /// The attributes of an inode.
    Attr(Ino),
    /// One entry of a directory, present or not.
    Entry(Ino, Vec<u8>),
    /// The file is open: its attributes and data are cached until `Close`.
    Open(Ino),
    Close(Ino),
    /// A last close that keeps the file's data cached: the token stays
    /// until a change revokes it or the client gives it up (`Drop`).
    Keep(Ino),
    /// The client gives up a closed file it kept.
    Drop(Ino),
}

#[derive(Debug)]
struct Holder {
    client: u64,
    until: Instant,
    /// The client has the file open (the shard counts a client's opens
    /// once, until its last close).
    open: bool,
    /// The client closed the file and keeps its data cached: the token
    /// lasts until revoked or dropped.
    kept: bool,
}

impl Holder {
    fn live(&self, now: Instant) -> bool {
        self.open || self.kept || self.until > now
    }
}

#[derive(Debug)]
struct Queue {
    next_seq: u64,
    acked: u64,
    items: VecDeque<(u64, Revoke)>,
    /// The last poll's start or end.
    heard: Instant,
    /// Polls under way.
    polling: u32,
    /// Lost its tokens; told so at its next poll.
    reset: bool,
}

impl Queue {
    fn new(now: Instant) -> Queue {
        Queue {
            next_seq: 1,
            acked: 0,
            items: VecDeque::new(),
            heard: now,
            polling: 0,
            reset: false,
        }
    }

    fn live(&self, now: Instant) -> bool {
        !self.reset && (self.polling > 0 || now.saturating_duration_since(self.heard) < GONE)
    }
}

#[derive(Default)]
struct State {
    grants: HashMap<Covers, Vec<Holder>>,
    clients: HashMap<(FsId, u64), Queue>,
    swept: Option<Instant>,
    /// Data tokens of open files (see `data`).
    data: HashMap<(FsId, Ino), Vec<data::Held>>,
    /// The last data token's sequence number or revocation id given.
    next_id: u64,
    /// Data revocations (fs, client, id) not released yet.
    unreleased: HashSet<(FsId, u64, u64)>,
}

impl State {
    /// Drops expired tokens and forgotten clients, at most once per `HOLD`.
    fn sweep(&mut self, now: Instant) {
        if self.swept.is_some_and(|t| now.duration_since(t) < HOLD) {
            return;
        }
        self.swept = Some(now);
        self.grants.retain(|_, hs| {
            hs.retain(|h| h.live(now));
            !hs.is_empty()
        });
        self.clients
            .retain(|_, q| now.duration_since(q.heard) < FORGET);
    }

    /// Queues `item` for `client` if it takes part (polls, is live); the
    /// sequence number its acknowledgement must reach.
    fn enqueue(&mut self, fs: FsId, client: u64, item: &Revoke, now: Instant) -> Option<u64> {
        let q = self.clients.get_mut(&(fs, client))?;
        if q.reset {
            return None;
        }
        if !q.live(now) {
            tracing::debug!(
                fs,
                client = format_args!("{client:016x}"),
                "a client that stopped polling loses its tokens"
            );
            self.reset(fs, client);
            return None;
        }
        let seq = q.next_seq;
        q.next_seq += 1;
        q.items.push_back((seq, item.clone()));
        if q.items.len() > MAX_QUEUE {
            self.reset(fs, client);
            return None;
        }
        Some(seq)
    }

    fn noted_kept(&self, fs: FsId, client: u64, ino: Ino) -> bool {
        self.grants
            .get(&Covers::Attr(fs, ino))
            .is_some_and(|hs| hs.iter().any(|h| h.client == client && h.kept))
    }

    /// Takes every token of `client`: it did not answer in time.
    fn reset(&mut self, fs: FsId, client: u64) {
        for (covers, hs) in self.grants.iter_mut() {
            let (Covers::Attr(f, _) | Covers::Entry(f, _, _)) = covers;
            if *f == fs {
                hs.retain(|h| h.client != client);
            }
        }
        self.data.retain(|(f, _), held| {
            if *f == fs {
                held.retain(|h| h.client != client);
            }
            !held.is_empty()
        });
        self.unreleased
            .retain(|(f, c, _)| !(*f == fs && *c == client));
        if let Some(q) = self.clients.get_mut(&(fs, client)) {
            q.reset = true;
            q.items.clear();
            q.acked = q.next_seq - 1;
        }
    }
}

/// The token table of a node (see the module header).
pub struct Tokens {
    state: Mutex<State>,
    wake: Condvar,
    wait: Duration,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens::new(REVOKE_WAIT)
    }
}

/// What revoking did, for metrics and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Revoked {
    /// Clients sent a revocation.
    pub clients: usize,
    /// Clients that did not acknowledge in time and lost their tokens.
    pub lost: usize,
}

impl Tokens {
    /// A table whose changes wait `wait` for acknowledgements.
    pub fn new(wait: Duration) -> Tokens {
        Tokens {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            wait,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Notes the tokens an answer to `client` gives. Only clients that poll
    /// get tokens (one that never polls caches nothing a change must wait
    /// for); one that lost its tokens gets none until it has polled again.
    pub fn grant(&self, fs: FsId, client: u64, grants: &[Grant]) {
        if client == 0 || grants.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut st = self.lock();
        st.sweep(now);
        match st.clients.get(&(fs, client)) {
            Some(q) if !q.reset => {}
            _ => return,
        }
        for g in grants {
            // The open and kept flags an open, a close or a drop sets.
            let (covers, open, kept) = match g {
                Grant::Attr(ino) => (Covers::Attr(fs, *ino), None, None),
                Grant::Entry(dir, name) => (Covers::Entry(fs, *dir, name.clone()), None, None),
                Grant::Open(ino) => (Covers::Attr(fs, *ino), Some(true), Some(false)),
                Grant::Close(ino) => (Covers::Attr(fs, *ino), Some(false), Some(false)),
                Grant::Keep(ino) => (Covers::Attr(fs, *ino), Some(false), Some(true)),
                Grant::Drop(ino) => (Covers::Attr(fs, *ino), None, Some(false)),
            };
            let hs = st.grants.entry(covers).or_default();
            match hs.iter_mut().find(|h| h.client == client) {
                Some(h) => {
                    h.until = h.until.max(now + HOLD);
                    h.open = open.unwrap_or(h.open);
                    h.kept = kept.unwrap_or(h.kept);
                }
                // Nothing to give up.
                None if matches!(g, Grant::Drop(_)) => {}
                None => hs.push(Holder {
                    client,
                    until: now + HOLD,
                    open: open.unwrap_or(false),
                    kept: kept.unwrap_or(false),
                }),
            }
        }
    }

    /// Whether a change by `client` may have to wait for another client
    /// (some other client of `fs` holds tokens here).
    pub fn others_hold(&self, fs: FsId, client: u64) -> bool {
        let now = Instant::now();
        self.lock()
            .clients
            .iter()
            .any(|(&(f, c), q)| f == fs && c != client && q.live(now))
    }

    /// Whether [`Tokens::revoke`] of `items` would ask another client than
    /// `except` for anything (and so wait for it).
    pub fn would_revoke(&self, fs: FsId, except: u64, items: &[Revoke]) -> bool {
        if items.is_empty() {
            return false;
        }
        let now = Instant::now();
        let st = self.lock();
        items.iter().any(|item| {
            let covers = match item {
                Revoke::Inode(ino) | Revoke::Flush(ino) => Covers::Attr(fs, *ino),
                Revoke::Entry { parent, name } => Covers::Entry(fs, *parent, name.clone()),
                Revoke::Data { .. } | Revoke::Shard(_) => return false,
            };
            st.grants
                .get(&covers)
                .is_some_and(|hs| hs.iter().any(|h| h.live(now) && h.client != except))
        })
    }

    /// Revokes every token but `except`'s on what `items` name and waits
    /// (up to the revocation wait) for the holders to acknowledge.
    pub fn revoke(&self, fs: FsId, except: u64, items: &[Revoke]) -> Revoked {
        if items.is_empty() {
            return Revoked::default();
        }
        let now = Instant::now();
        let mut st = self.lock();
        let mut targets: HashMap<u64, u64> = HashMap::new();
        for item in items {
            let covers = match item {
                Revoke::Inode(ino) | Revoke::Flush(ino) => Covers::Attr(fs, *ino),
                Revoke::Entry { parent, name } => Covers::Entry(fs, *parent, name.clone()),
                // Revoked by `acquire_data` and `take_over` alone.
                Revoke::Data { .. } | Revoke::Shard(_) => continue,
            };
            let Some(hs) = st.grants.get_mut(&covers) else {
                continue;
            };
            let mut to = Vec::new();
            hs.retain(|h| {
                let live = h.live(now);
                if live && h.client != except {
                    to.push(h.client);
                }
                // An open file's token stays: the file is still open there.
                // A kept closed file's goes: its client drops what it cached.
                h.open || (live && h.client == except)
            });
            if hs.is_empty() {
                st.grants.remove(&covers);
            }
            for client in to {
                if let Some(seq) = st.enqueue(fs, client, item, now) {
                    targets.insert(client, seq);
                }
            }
        }
        self.await_acks(st, fs, targets, now)
    }

    /// Asks every other client that has `ino` open to write out what it
    /// wrote to it and commit the size and mtime (`Revoke::Flush`), and
    /// waits (up to the revocation wait) until they have: `client` is about
    /// to be told the file's attributes. Tokens stay.
    pub fn flush_elsewhere(&self, fs: FsId, client: u64, ino: Ino) -> Revoked {
        let now = Instant::now();
        let mut st = self.lock();
        let writers: Vec<u64> = match st.grants.get(&Covers::Attr(fs, ino)) {
            Some(hs) => hs
                .iter()
                .filter(|h| h.open && h.client != client)
                .map(|h| h.client)
                .collect(),
            None => return Revoked::default(),
        };
        let mut targets = HashMap::new();
        for w in writers {
            if let Some(seq) = st.enqueue(fs, w, &Revoke::Flush(ino), now) {
                targets.insert(w, seq);
            }
        }
        self.await_acks(st, fs, targets, now)
    }

    /// Waits on the table until `pending` is false or `deadline` has
    /// passed; `pending` is asked first and after every change.
    fn wait_while<'a>(
        &self,
        mut st: MutexGuard<'a, State>,
        deadline: Instant,
        mut pending: impl FnMut(&State) -> bool,
    ) -> MutexGuard<'a, State> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !pending(&st) || left.is_zero() {
                return st;
            }
            st = match self.wake.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Waits until each target acknowledged its sequence number or the
    /// revocation wait is over; the late ones lose their tokens.
    fn await_acks(
        &self,
        mut st: MutexGuard<'_, State>,
        fs: FsId,
        mut targets: HashMap<u64, u64>,
        now: Instant,
    ) -> Revoked {
        if targets.is_empty() {
            return Revoked::default();
        }
        self.wake.notify_all();
        let sent = targets.len();
        st = self.wait_while(st, now + self.wait, |st| {
            targets.retain(|client, seq| {
                st.clients
                    .get(&(fs, *client))
                    .is_some_and(|q| !q.reset && q.acked < *seq)
            });
            !targets.is_empty()
        });
        let lost = targets.len();
        for client in targets.keys() {
            tracing::warn!(
                fs,
                client = format_args!("{client:016x}"),
                wait_ms = self.wait.as_millis() as u64,
                "a client did not acknowledge a revocation in time; it loses its tokens"
            );
            st.reset(fs, *client);
        }
        Revoked {
            clients: sent,
            lost,
        }
    }

    /// A client that goes: its tokens and queue are dropped, and changes
    /// waiting for it go on. Ignored while a poll of the same id is under
    /// way: a new client of the same process (a remount) took its place.
    /// The names of directory `dir` any client holds an entry token on
    /// (present or absent names): what a split revokes, as the names'
    /// changes are revoked by their buckets' shards from then on.
    pub fn entry_names(&self, fs: FsId, dir: Ino) -> Vec<Vec<u8>> {
        self.lock()
            .grants
            .keys()
            .filter_map(|c| match c {
                Covers::Entry(f, d, name) if *f == fs && *d == dir => Some(name.clone()),
                _ => None,
            })
            .collect()
    }

    pub fn leave(&self, fs: FsId, client: u64) {
        let mut st = self.lock();
        if st.clients.get(&(fs, client)).is_some_and(|q| q.polling > 0) {
            return;
        }
        st.reset(fs, client);
        st.clients.remove(&(fs, client));
        self.wake.notify_all();
    }

    /// A client's long poll: acknowledges up to `acked`, then answers what
    /// is queued for it, waiting up to `wait` (at most [`MAX_POLL`]) for
    /// something when nothing is.
    pub fn poll(&self, fs: FsId, client: u64, acked: u64, wait: Duration) -> Revocations {
        let wait = wait.min(MAX_POLL);
        let start = Instant::now();
        let mut st = self.lock();
        st.sweep(start);
        let q = st
            .clients
            .entry((fs, client))
            .or_insert_with(|| Queue::new(start));
        q.heard = start;
        q.polling += 1;
        let out = self.poll_locked(st, fs, client, acked, start, wait);
        let mut st = self.lock();
        if let Some(q) = st.clients.get_mut(&(fs, client)) {
            q.polling = q.polling.saturating_sub(1);
            q.heard = Instant::now();
        }
        out
    }

    fn poll_locked(
        &self,
        mut st: MutexGuard<'_, State>,
        fs: FsId,
        client: u64,
        acked: u64,
        start: Instant,
        wait: Duration,
    ) -> Revocations {
        let Some(q) = st.clients.get_mut(&(fs, client)) else {
            return Revocations::default();
        };
        if acked > q.acked && acked < q.next_seq {
            q.acked = acked;
            while q.items.front().is_some_and(|(s, _)| *s <= acked) {
                q.items.pop_front();
            }
        }
        self.wake.notify_all();
        loop {
            let Some(q) = st.clients.get_mut(&(fs, client)) else {
                return Revocations::default();
            };
            // Reset before or while this poll waited.
            if q.reset {
                q.reset = false;
                self.wake.notify_all();
                return Revocations {
                    seq: q.acked,
                    reset: true,
                    items: Vec::new(),
                };
            }
            if let Some((seq, _)) = q.items.back() {
                return Revocations {
                    seq: *seq,
                    reset: q.reset,
                    items: q.items.iter().map(|(_, r)| r.clone()).collect(),
                };
            }
            let left = wait.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Revocations {
                    seq: q.acked,
                    reset: false,
                    items: Vec::new(),
                };
            }
            st = match self.wake.wait_timeout(st, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// What a change to these keys (inode records, directory entries, extended
/// attributes) makes clients drop; other key spaces are nobody's cache.
///
/// A directory whose entries the change adds or removes is not revoked for
/// that: its own attributes (times, size, link count) follow its entries,
/// and other clients see them within the attribute timeout. Otherwise two
/// nodes creating in one directory would wait for each other at every
/// create. A change to a directory's attributes alone (mode, owner, times
/// set) is revoked like any inode's.
pub(crate) fn revokes_of<'a>(keys: impl IntoIterator<Item = (Space, &'a [u8])>) -> Vec<Revoke> {
    let ino_of =
        |k: &[u8]| -> Option<Ino> { Some(u64::from_be_bytes(k.get(..8)?.try_into().ok()?)) };
    let keys: Vec<(Space, &[u8])> = keys.into_iter().collect();
    let listed: BTreeSet<Ino> = keys
        .iter()
        .filter(|(space, _)| *space == Space::Dirents)
        .filter_map(|(_, k)| ino_of(k))
        .collect();
    let mut out = BTreeSet::new();
    for (space, key) in keys {
        match space {
            Space::Inodes => {
                if let Some(ino) = ino_of(key).filter(|i| !listed.contains(i)) {
                    out.insert((ino, None));
                }
            }
            Space::Xattrs => {
                if let Some(ino) = ino_of(key) {
                    out.insert((ino, None));
                }
            }
            Space::Dirents => {
                if let Some(parent) = ino_of(key) {
                    out.insert((parent, Some(key[8..].to_vec())));
                }
            }
            Space::Orphans | Space::Meta => {}
        }
    }
    out.into_iter()
        .map(|(ino, name)| match name {
            None => Revoke::Inode(ino),
            Some(name) => Revoke::Entry { parent: ino, name },
        })
        .collect()
}

mod data;
pub use data::{DataAnswer, DATA_WAIT};
mod leaders;

#[cfg(test)]
mod tests;
