//! Which clients have which files of this shard open, and the decisions the
//! shard makes from it (memory only, like the lock table):
//!
//! - an unlinked file is handed back for freeing only when no client
//!   anywhere has it open — the last close anywhere (or the lease expiry of
//!   the clients that had it open) frees it;
//! - a truncation by one client marks the other clients' opens of the file
//!   stale, so their next size commit (a late write-back) cannot re-extend
//!   the file past the truncation.
//!
//! A client not heard from (open, close, commit, lease renewal) for a whole
//! lease loses its opens. The clock is passed in, so the rules are tested
//! without waiting.
//!
//! A replica that takes a replicated shard over, or a cluster node's shard
//! opening again, knows no opens: clients elsewhere may still hold its files
//! open. For one *grace* (a lease, or [`DEFAULT_GRACE`] without one) it
//! hands no unlinked file out for freeing, and the lease answers ask each
//! client once for its open files (`Reopen`); past the grace, the opens it
//! was told are the truth again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_proto::types::Ino;

/// A client counts once however many times it has the file open: it
/// registers at its first open and unregisters at its last close.
#[derive(Default)]
struct Opens {
    /// client → stale since another client truncated.
    clients: HashMap<u64, bool>,
}

/// How long opens are asked for again when there is no lease: longer than
/// the pause between a client's renewals without one.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(15);

#[derive(Default)]
struct State {
    inodes: HashMap<Ino, Opens>,
    heard: HashMap<u64, Instant>,
    grace: Option<Grace>,
}

/// Opens being told again after a take-over.
struct Grace {
    until: Instant,
    /// Clients that sent their opens.
    told: HashSet<u64>,
}

pub(crate) struct OpenTable {
    lease: Option<Duration>,
    state: Mutex<State>,
}

impl State {
    /// Whether opens are still being told again (ends the grace once past).
    fn in_grace(&mut self, now: Instant) -> bool {
        match &self.grace {
            Some(g) if now < g.until => true,
            Some(_) => {
                self.grace = None;
                false
            }
            None => false,
        }
    }

    fn alive(&self, client: u64, now: Instant, lease: Option<Duration>) -> bool {
        match (lease, self.heard.get(&client)) {
            (None, _) => true,
            (Some(l), Some(t)) => now.saturating_duration_since(*t) < l,
            (Some(_), None) => false,
        }
    }
}

impl OpenTable {
    pub(crate) fn with_lease(lease: Option<Duration>) -> OpenTable {
        OpenTable {
            lease,
            state: Mutex::default(),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        match self.state.lock() {
            Ok(mut m) => f(&mut m),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// Forgets every open and starts a grace (see the module header).
    pub(crate) fn start_grace(&self, now: Instant) {
        let len = self.lease.unwrap_or(DEFAULT_GRACE);
        self.with(|st| {
            st.inodes.clear();
            st.heard.clear();
            st.grace = Some(Grace {
                until: now + len,
                told: HashSet::new(),
            });
        });
    }

    /// Whether unlinked files are kept whatever the opens say (a grace).
    pub(crate) fn in_grace(&self, now: Instant) -> bool {
        self.with(|st| st.in_grace(now))
    }

    /// Whether `client` is to send its opens again (a grace, and it has not).
    pub(crate) fn wants_reopen(&self, client: u64, now: Instant) -> bool {
        self.with(|st| {
            st.in_grace(now) && st.grace.as_ref().is_some_and(|g| !g.told.contains(&client))
        })
    }

    /// `client` has exactly `inos` of this shard open (a `Reopen`).
    pub(crate) fn reopen(&self, client: u64, inos: &[Ino], now: Instant) {
        self.with(|st| {
            st.heard.insert(client, now);
            for o in st.inodes.values_mut() {
                o.clients.remove(&client);
            }
            for ino in inos {
                st.inodes
                    .entry(*ino)
                    .or_default()
                    .clients
                    .insert(client, false);
            }
            st.inodes.retain(|_, o| !o.clients.is_empty());
            if let Some(g) = st.grace.as_mut() {
                g.told.insert(client);
            }
        });
    }

    /// A client's sign of life.
    pub(crate) fn heard(&self, client: u64, now: Instant) {
        self.with(|st| {
            st.heard.insert(client, now);
        });
    }

    pub(crate) fn open(&self, ino: Ino, client: u64, now: Instant) {
        self.with(|st| {
            st.heard.insert(client, now);
            st.inodes
                .entry(ino)
                .or_default()
                .clients
                .entry(client)
                .or_insert(false);
        });
    }

    /// `client` closed the file for the last time; true when nobody
    /// (alive) has it open any more.
    pub(crate) fn close(&self, ino: Ino, client: u64, now: Instant) -> bool {
        self.with(|st| {
            st.heard.insert(client, now);
            if let Some(o) = st.inodes.get_mut(&ino) {
                o.clients.remove(&client);
            }
            Self::unused(st, ino, now, self.lease)
        })
    }

    /// Whether no live client has `ino` open (dead clients' opens go).
    pub(crate) fn is_unused(&self, ino: Ino, now: Instant) -> bool {
        self.with(|st| Self::unused(st, ino, now, self.lease))
    }

    fn unused(st: &mut State, ino: Ino, now: Instant, lease: Option<Duration>) -> bool {
        if st.in_grace(now) {
            return false;
        }
        let Some(o) = st.inodes.get(&ino) else {
            return true;
        };
        let live: Vec<u64> = o
            .clients
            .keys()
            .copied()
            .filter(|c| st.alive(*c, now, lease))
            .collect();
        if live.is_empty() {
            st.inodes.remove(&ino);
            return true;
        }
        if let Some(o) = st.inodes.get_mut(&ino) {
            o.clients.retain(|c, _| live.contains(c));
        }
        false
    }

    /// `by` truncated `ino`: every other client's open of it is stale.
    pub(crate) fn truncated(&self, ino: Ino, by: u64) {
        self.with(|st| {
            if let Some(o) = st.inodes.get_mut(&ino) {
                for (c, stale) in o.clients.iter_mut() {
                    if *c != by {
                        *stale = true;
                    }
                }
            }
        });
    }

    /// Whether `client`'s size commit may extend `ino`: false once after
    /// another client truncated it under this client's open.
    pub(crate) fn may_extend(&self, ino: Ino, client: u64, now: Instant) -> bool {
        self.with(|st| {
            st.heard.insert(client, now);
            match st
                .inodes
                .get_mut(&ino)
                .and_then(|o| o.clients.get_mut(&client))
            {
                Some(stale) if *stale => {
                    *stale = false;
                    false
                }
                _ => true,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_unused_after_the_last_close_anywhere_or_its_holders_lease() {
        let t0 = Instant::now();
        let t = OpenTable::with_lease(Some(Duration::from_secs(10)));
        t.open(7, 1, t0);
        t.open(7, 2, t0);
        t.open(7, 2, t0);
        assert!(!t.close(7, 1, t0));
        assert!(t.close(7, 2, t0), "a client counts once");
        t.open(8, 3, t0);
        assert!(!t.is_unused(8, t0 + Duration::from_secs(5)));
        assert!(t.is_unused(8, t0 + Duration::from_secs(11)));
    }

    #[test]
    fn after_a_take_over_nothing_is_unused_until_the_grace_ends() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let t = OpenTable::with_lease(Some(10 * s));
        t.open(7, 1, t0);
        t.start_grace(t0);
        assert!(!t.is_unused(9, t0), "nobody said it is open, but grace");
        assert!(t.wants_reopen(1, t0) && t.wants_reopen(2, t0));
        t.reopen(1, &[7, 8], t0 + s);
        assert!(!t.wants_reopen(1, t0 + s), "asked once");
        assert!(t.wants_reopen(2, t0 + s));
        assert!(!t.close(8, 1, t0 + 2 * s), "closed in the grace: kept");
        // Past the grace: what was told is the truth again.
        let after = t0 + 10 * s;
        assert!(!t.in_grace(after));
        assert!(!t.wants_reopen(2, after));
        assert!(!t.is_unused(7, after), "client 1 said it has 7 open");
        assert!(t.is_unused(8, after), "closed");
        assert!(t.is_unused(9, after));
        // A reopen replaces the client's whole set.
        t.reopen(1, &[], after);
        assert!(t.is_unused(7, after));
        let none = OpenTable::with_lease(None);
        none.start_grace(t0);
        assert!(none.in_grace(t0 + DEFAULT_GRACE - s));
        assert!(!none.in_grace(t0 + DEFAULT_GRACE));
    }

    #[test]
    fn another_clients_truncation_stops_one_late_extension() {
        let t0 = Instant::now();
        let t = OpenTable::with_lease(None);
        t.open(7, 1, t0);
        t.open(7, 2, t0);
        t.truncated(7, 1);
        assert!(t.may_extend(7, 1, t0), "the truncating client itself");
        assert!(!t.may_extend(7, 2, t0));
        assert!(t.may_extend(7, 2, t0), "only the commit that was in flight");
    }
}

#[cfg(test)]
mod server_tests {
    use crate::testutil::Fx;
    use weft_proto::msg::{MetaRequest, Response};
    use weft_proto::types::{SetAttr, Timespec, ROOT_INO};

    #[test]
    fn a_file_unlinked_while_open_elsewhere_is_freed_at_the_last_close_anywhere() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "f");
        fx.attr(MetaRequest::Opened {
            ino: a.ino,
            client: 2,
            kept: false,
        });
        assert_eq!(fx.unlink(ROOT_INO, "f").unwrap(), None, "open on client 2");
        match fx.call(MetaRequest::Closed {
            ino: a.ino,
            client: 2,
            keep: false,
            dropped: Vec::new(),
        }) {
            Response::Unlinked { orphan: Some(o) } => assert_eq!(o.ino, a.ino),
            other => panic!("{other:?}"),
        }
        let b = fx.file(ROOT_INO, "g");
        fx.attr(MetaRequest::Opened {
            ino: b.ino,
            client: 2,
            kept: false,
        });
        assert_eq!(
            fx.call(MetaRequest::Closed {
                ino: b.ino,
                client: 2,
                keep: false,
                dropped: Vec::new(),
            }),
            Response::Unlinked { orphan: None },
            "still linked"
        );
    }

    /// The kernel's create-and-open registers the open with the create: an
    /// unlink elsewhere keeps the file until that client closes it.
    #[test]
    fn a_file_created_open_is_kept_until_its_close() {
        let fx = Fx::new();
        let a = fx.attr(MetaRequest::CreateMasked {
            parent: ROOT_INO,
            name: b"f".to_vec(),
            node: weft_proto::types::NewNode::File,
            mode: 0o644,
            umask: 0o022,
            uid: 1,
            gid: 1,
            open_by: Some(2),
        });
        assert_eq!(fx.unlink(ROOT_INO, "f").unwrap(), None, "open on client 2");
        match fx.call(MetaRequest::Closed {
            ino: a.ino,
            client: 2,
            keep: false,
            dropped: Vec::new(),
        }) {
            Response::Unlinked { orphan: Some(o) } => assert_eq!(o.ino, a.ino),
            other => panic!("{other:?}"),
        }
    }

    /// An orphan is handed out to free once; if its `Reclaim` does not come
    /// (the client died freeing it), a renewal hands it out again after two
    /// leases, and a `Reclaim` ends it.
    #[test]
    fn an_orphan_whose_freeing_stopped_is_handed_out_again() {
        let fx = Fx::with(|s| s.lock_lease_ms = 200);
        let a = fx.file(ROOT_INO, "f");
        let orphan = fx.unlink(ROOT_INO, "f").unwrap().expect("not open");
        assert_eq!(orphan.ino, a.ino);
        let swept = |client| match fx.call(MetaRequest::RenewLease {
            ino: ROOT_INO,
            client,
        }) {
            Response::Lease { free, .. } => free.iter().map(|o| o.ino).collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        assert!(swept(3).is_empty(), "being freed by the unlink's client");
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert_eq!(swept(3), vec![a.ino], "its freeing stopped: again");
        assert!(swept(4).is_empty(), "once");
        assert_eq!(
            fx.call(MetaRequest::Reclaim { inos: vec![a.ino] }),
            Response::Unit
        );
        std::thread::sleep(std::time::Duration::from_millis(1100));
        assert!(swept(4).is_empty(), "reclaimed");
    }

    /// The kernel sends a close (FUSE release) without waiting for it, so
    /// an unlink right after a close races with it: exactly one of them
    /// must get the orphan to free (both did, and the second `Reclaim`
    /// failed the unlink with ENOENT).
    #[test]
    fn an_unlink_racing_the_last_close_leaves_the_orphan_to_exactly_one() {
        let fx = Fx::new();
        let both = std::sync::Barrier::new(2);
        for i in 0..2000u64 {
            let name = format!("f{i}");
            let a = fx.file(ROOT_INO, &name);
            fx.attr(MetaRequest::Opened {
                ino: a.ino,
                client: 2,
                kept: false,
            });
            let (unlinked, closed) = std::thread::scope(|s| {
                let unlink = s.spawn(|| {
                    both.wait();
                    fx.unlink(ROOT_INO, &name).unwrap()
                });
                both.wait();
                // Start the close a little later each time, 0–200 µs, to
                // sweep it across the unlink's commit.
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_micros(i % 50 * 4) {
                    std::hint::spin_loop();
                }
                let closed = fx.call(MetaRequest::Closed {
                    ino: a.ino,
                    client: 2,
                    keep: false,
                    dropped: Vec::new(),
                });
                (unlink.join().unwrap(), closed)
            });
            let closed = match closed {
                Response::Unlinked { orphan } => orphan,
                other => panic!("{other:?}"),
            };
            assert_eq!(
                usize::from(unlinked.is_some()) + usize::from(closed.is_some()),
                1,
                "round {i}: the unlink got {unlinked:?}, the close {closed:?}"
            );
        }
    }

    /// A client's last close and its next open of the same file cross (the
    /// kernel sends the close without waiting): the close is handed the
    /// file, unlinked meanwhile, to free, which the client declines as it
    /// has the file open again, registering that open anew. The open takes
    /// the hand-out back, so the true last close is handed the file again
    /// (it was refused as "being freed", and the space stayed).
    #[test]
    fn an_orphan_declined_by_a_client_that_opened_it_again_goes_to_its_last_close() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "f");
        let opened = || {
            fx.attr(MetaRequest::Opened {
                ino: a.ino,
                client: 2,
                kept: false,
            })
        };
        let closed = || match fx.call(MetaRequest::Closed {
            ino: a.ino,
            client: 2,
            keep: false,
            dropped: Vec::new(),
        }) {
            Response::Unlinked { orphan } => orphan.map(|o| o.ino),
            other => panic!("{other:?}"),
        };
        opened();
        assert_eq!(fx.unlink(ROOT_INO, "f").unwrap(), None, "open on client 2");
        assert_eq!(closed(), Some(a.ino), "handed to the crossing close");
        opened();
        assert_eq!(closed(), Some(a.ino), "the hand-out was taken back");
    }

    #[test]
    fn a_late_commit_does_not_re_extend_a_file_another_client_truncated() {
        let fx = Fx::new();
        let a = fx.file(ROOT_INO, "f");
        let commit = |end, client| MetaRequest::Written {
            ino: a.ino,
            end,
            mtime: Timespec { secs: 1, nanos: 0 },
            allocated: 0,
            client,
            synced: false,
        };
        fx.attr(MetaRequest::Opened {
            ino: a.ino,
            client: 1,
            kept: false,
        });
        fx.attr(MetaRequest::Opened {
            ino: a.ino,
            client: 2,
            kept: false,
        });
        assert_eq!(fx.attr(commit(8192, 2)).size, 8192);
        let set = SetAttr {
            size: Some(0),
            ..SetAttr::default()
        };
        fx.attr(MetaRequest::SetAttr {
            ino: a.ino,
            set,
            client: 1,
        });
        assert_eq!(fx.attr(commit(8192, 2)).size, 0, "client 2's late commit");
        assert_eq!(
            fx.attr(commit(4096, 2)).size,
            4096,
            "its later writes extend"
        );
        assert_eq!(fx.attr(commit(100, 1)).size, 4096);
    }
}
