//! [`LockTable`]: the POSIX byte-range locks (fcntl `F_SETLK`/`F_GETLK`) of
//! the inodes of one shard, held in the meta role's memory so that every
//! client of the file system sees the same locks.
//!
//! Semantics of POSIX record locks: a holder is `(client, owner)` (one
//! process, for fcntl locks); a holder's own locks never conflict with each
//! other — a new lock replaces whatever the holder had on its range (an
//! upgrade, downgrade or split), and adjacent or overlapping locks of one
//! holder and kind merge; two holders conflict where their ranges overlap
//! and one of the locks is a write lock. Ranges are inclusive
//! (`start..=end`).
//!
//! On a shard with one copy locks are not persistent: a restart of the meta
//! role drops them, as a reboot drops a local file system's locks. On a
//! replicated shard every change is also written to the shard's `locks`
//! table through its Raft group before it is answered, and a replica that
//! starts leading loads them back ([`LockTable::restore`]), so locks survive
//! a failover.
//!
//! Leases: with a lease time, every lock request of a client and its
//! `RenewLease` requests (sent every third of the lease while it lives)
//! count as signs of life; the locks of a client not heard from for a whole
//! lease are dropped, so a client that vanished (crash, lost node) does not
//! block the others for ever — GPFS's failure detection time plays the
//! same part. Not yet: deadlock detection (`EDEADLK`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use weft_proto::types::{ByteLock, Ino, LockKind, LockReply};
use weft_proto::ErrorKind;

use crate::fail::{refuse, OpError};

#[derive(Default)]
pub(crate) struct LockTable {
    /// How long a client's locks outlive its last sign of life; `None`:
    /// for ever.
    lease: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    inodes: HashMap<Ino, Vec<ByteLock>>,
    /// When each client was last heard from.
    seen: HashMap<u64, Instant>,
}

impl State {
    /// Notes a sign of life of `client`, then drops the locks of every
    /// client whose lease ran out.
    fn heard(&mut self, client: u64, now: Instant, lease: Option<Duration>) {
        self.seen.insert(client, now);
        let Some(lease) = lease else {
            return;
        };
        let gone: Vec<u64> = self
            .seen
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) > lease)
            .map(|(c, _)| *c)
            .collect();
        if gone.is_empty() {
            return;
        }
        for c in &gone {
            self.seen.remove(c);
        }
        let mut dropped = 0usize;
        self.inodes.retain(|_, held| {
            let before = held.len();
            held.retain(|h| !gone.contains(&h.client));
            dropped += before - held.len();
            !held.is_empty()
        });
        if dropped > 0 {
            tracing::warn!(clients = ?gone, locks = dropped, lease_ms = lease.as_millis() as u64, "dropped the locks of clients not heard from within the lease");
        }
    }
}

fn same_holder(a: &ByteLock, b: &ByteLock) -> bool {
    a.client == b.client && a.owner == b.owner
}

fn overlap(a: &ByteLock, b: &ByteLock) -> bool {
    a.start <= b.end && b.start <= a.end
}

fn conflicts(held: &ByteLock, want: &ByteLock) -> bool {
    !same_holder(held, want)
        && overlap(held, want)
        && (held.kind == LockKind::Write || want.kind == LockKind::Write)
}

fn check_range(l: &ByteLock) -> Result<(), OpError> {
    if l.start > l.end {
        return Err(refuse(
            ErrorKind::Invalid,
            format!("lock range {}..={} is empty", l.start, l.end),
        ));
    }
    Ok(())
}

impl LockTable {
    /// A table whose clients' locks go after `lease` without a sign of life.
    pub(crate) fn with_lease(lease: Option<Duration>) -> LockTable {
        LockTable {
            lease,
            state: Mutex::default(),
        }
    }

    /// The lease time, or zero when locks never expire.
    pub(crate) fn lease(&self) -> Duration {
        self.lease.unwrap_or_default()
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        // The maps stay consistent whatever a panicking holder did: every
        // change below is a single push/retain/replace.
        match self.state.lock() {
            Ok(mut m) => f(&mut m),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    /// `F_GETLK`: the first lock of another holder that conflicts with `want`.
    pub(crate) fn get(&self, ino: Ino, want: &ByteLock) -> Result<LockReply, OpError> {
        self.get_at(ino, want, Instant::now())
    }

    fn get_at(&self, ino: Ino, want: &ByteLock, now: Instant) -> Result<LockReply, OpError> {
        check_range(want)?;
        if want.kind == LockKind::Unlock {
            return Err(refuse(ErrorKind::Invalid, "F_GETLK of an unlock"));
        }
        Ok(self.with(|st| {
            st.heard(want.client, now, self.lease);
            st.inodes
                .get(&ino)
                .and_then(|held| held.iter().find(|h| conflicts(h, want)).copied())
                .map_or(LockReply::Granted, LockReply::Conflict)
        }))
    }

    /// `F_SETLK`: takes or releases `req` unless another holder conflicts.
    pub(crate) fn set(&self, ino: Ino, req: &ByteLock) -> Result<LockReply, OpError> {
        self.set_at(ino, req, Instant::now())
    }

    fn set_at(&self, ino: Ino, req: &ByteLock, now: Instant) -> Result<LockReply, OpError> {
        check_range(req)?;
        Ok(self.with(|st| {
            st.heard(req.client, now, self.lease);
            let m = &mut st.inodes;
            let held = m.entry(ino).or_default();
            if req.kind != LockKind::Unlock {
                if let Some(c) = held.iter().find(|h| conflicts(h, req)) {
                    return LockReply::Conflict(*c);
                }
            }
            carve(held, req);
            if req.kind != LockKind::Unlock {
                held.push(*req);
                merge(held, req);
            }
            if held.is_empty() {
                m.remove(&ino);
            }
            LockReply::Granted
        }))
    }

    /// Drops every lock of `(client, owner)` on `ino`.
    pub(crate) fn release(&self, ino: Ino, client: u64, owner: u64) {
        self.with(|st| {
            st.heard(client, Instant::now(), self.lease);
            if let Some(held) = st.inodes.get_mut(&ino) {
                held.retain(|h| !(h.client == client && h.owner == owner));
                if held.is_empty() {
                    st.inodes.remove(&ino);
                }
            }
        });
    }

    /// A client's sign of life: its locks live for another lease.
    pub(crate) fn renew(&self, client: u64) {
        self.renew_at(client, Instant::now());
    }

    fn renew_at(&self, client: u64, now: Instant) {
        self.with(|st| st.heard(client, now, self.lease));
    }

    /// Locks held on every inode of the shard.
    pub(crate) fn count(&self) -> usize {
        self.with(|st| st.inodes.values().map(Vec::len).sum())
    }

    /// Every lock held on `ino`.
    pub(crate) fn held(&self, ino: Ino) -> Vec<ByteLock> {
        self.with(|st| st.inodes.get(&ino).cloned().unwrap_or_default())
    }

    /// Replaces every lock with `locks` (a replica taking over its shard);
    /// their holders' leases start now.
    pub(crate) fn restore(&self, locks: Vec<(Ino, Vec<ByteLock>)>) {
        let now = Instant::now();
        self.with(|st| {
            st.inodes.clear();
            for (ino, held) in locks {
                for h in &held {
                    st.seen.insert(h.client, now);
                }
                if !held.is_empty() {
                    st.inodes.insert(ino, held);
                }
            }
        });
    }
}

/// Removes the range of `req` from its holder's locks, splitting those that
/// stick out on either side.
fn carve(held: &mut Vec<ByteLock>, req: &ByteLock) {
    let mut kept = Vec::with_capacity(held.len() + 1);
    for h in held.drain(..) {
        if !same_holder(&h, req) || !overlap(&h, req) {
            kept.push(h);
            continue;
        }
        if h.start < req.start {
            kept.push(ByteLock {
                end: req.start - 1,
                ..h
            });
        }
        if h.end > req.end {
            kept.push(ByteLock {
                start: req.end + 1,
                ..h
            });
        }
    }
    *held = kept;
}

/// Merges the holder's locks of one kind that overlap or touch `req`'s
/// range into one.
fn merge(held: &mut Vec<ByteLock>, req: &ByteLock) {
    let touches = |a: &ByteLock, b: &ByteLock| {
        a.start <= b.end.saturating_add(1) && b.start <= a.end.saturating_add(1)
    };
    let mut merged = *req;
    loop {
        let before = held.len();
        held.retain(|h| {
            if same_holder(h, &merged) && h.kind == merged.kind && touches(h, &merged) {
                merged.start = merged.start.min(h.start);
                merged.end = merged.end.max(h.end);
                false
            } else {
                true
            }
        });
        if held.len() == before {
            break;
        }
    }
    held.push(merged);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const EOF: u64 = i64::MAX as u64;

    fn lk(owner: u64, kind: LockKind, start: u64, end: u64) -> ByteLock {
        ByteLock {
            client: 1,
            owner,
            pid: owner as u32 + 100,
            kind,
            start,
            end,
        }
    }

    fn granted(t: &LockTable, l: ByteLock) {
        assert_eq!(t.set(9, &l).unwrap(), LockReply::Granted, "{l:?}");
    }

    #[test]
    fn conflicts_follow_posix() {
        let t = LockTable::default();
        granted(&t, lk(1, LockKind::Write, 0, 99));
        let c = t.set(9, &lk(2, LockKind::Write, 50, 59)).unwrap();
        assert_eq!(c, LockReply::Conflict(lk(1, LockKind::Write, 0, 99)));
        assert_eq!(
            t.get(9, &lk(2, LockKind::Read, 99, 200)).unwrap(),
            LockReply::Conflict(lk(1, LockKind::Write, 0, 99))
        );
        granted(&t, lk(2, LockKind::Read, 100, EOF));
        // Readers share.
        granted(&t, lk(3, LockKind::Read, 150, 160));
        assert!(matches!(
            t.set(9, &lk(1, LockKind::Write, 155, 155)).unwrap(),
            LockReply::Conflict(_)
        ));
        // Another client with the same owner number is another holder.
        let mut other = lk(1, LockKind::Write, 0, 9);
        other.client = 2;
        assert!(matches!(t.set(9, &other).unwrap(), LockReply::Conflict(_)));
        // Other inodes are independent.
        assert_eq!(t.set(10, &other).unwrap(), LockReply::Granted);
    }

    #[test]
    fn own_locks_split_merge_and_convert() {
        let t = LockTable::default();
        granted(&t, lk(1, LockKind::Write, 0, 99));
        granted(&t, lk(1, LockKind::Unlock, 40, 59));
        let mut h = t.held(9);
        h.sort_by_key(|l| l.start);
        assert_eq!(
            h,
            [
                lk(1, LockKind::Write, 0, 39),
                lk(1, LockKind::Write, 60, 99)
            ]
        );
        assert_eq!(
            t.get(9, &lk(2, LockKind::Write, 40, 59)).unwrap(),
            LockReply::Granted
        );
        // Downgrade the middle of a range: three pieces.
        granted(&t, lk(1, LockKind::Write, 40, 59));
        assert_eq!(t.held(9), [lk(1, LockKind::Write, 0, 99)], "merged back");
        granted(&t, lk(1, LockKind::Read, 10, 19));
        let mut h = t.held(9);
        h.sort_by_key(|l| l.start);
        assert_eq!(
            h,
            [
                lk(1, LockKind::Write, 0, 9),
                lk(1, LockKind::Read, 10, 19),
                lk(1, LockKind::Write, 20, 99)
            ]
        );
        granted(&t, lk(2, LockKind::Read, 12, 15));
        t.release(9, 1, 1);
        assert_eq!(t.held(9), [lk(2, LockKind::Read, 12, 15)]);
        t.release(9, 1, 2);
        assert!(t.held(9).is_empty());
    }

    #[test]
    fn locks_of_a_silent_client_go_after_the_lease() {
        let lease = Duration::from_secs(10);
        let t = LockTable::with_lease(Some(lease));
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut a = lk(1, LockKind::Write, 0, 9);
        a.client = 7;
        let mut b = lk(2, LockKind::Write, 0, 9);
        b.client = 8;
        let mut c = lk(3, LockKind::Write, 100, 109);
        c.client = 9;
        assert_eq!(t.set_at(9, &a, t0).unwrap(), LockReply::Granted);
        assert_eq!(t.set_at(9, &c, t0).unwrap(), LockReply::Granted);
        // Client 9 keeps renewing; client 7 falls silent.
        t.renew_at(9, at(8));
        assert_eq!(t.set_at(9, &b, at(9)).unwrap(), LockReply::Conflict(a));
        assert_eq!(
            t.set_at(9, &b, at(11)).unwrap(),
            LockReply::Granted,
            "7 expired"
        );
        assert_eq!(t.held(9).len(), 2);
        t.renew_at(9, at(16));
        assert_eq!(
            t.get_at(9, &lk(4, LockKind::Read, 100, 100), at(20))
                .unwrap(),
            LockReply::Conflict(c),
            "the renewing client keeps its lock"
        );
        // Without a lease nothing ever expires.
        let forever = LockTable::default();
        assert_eq!(forever.set_at(9, &a, t0).unwrap(), LockReply::Granted);
        let late = t0 + Duration::from_secs(1_000_000);
        assert_eq!(forever.set_at(9, &b, late).unwrap(), LockReply::Conflict(a));
        assert_eq!(forever.lease(), Duration::ZERO);
    }

    #[test]
    fn bad_ranges_are_invalid() {
        let t = LockTable::default();
        assert!(t.set(9, &lk(1, LockKind::Write, 5, 4)).is_err());
        assert!(t.get(9, &lk(1, LockKind::Unlock, 0, 4)).is_err());
    }

    proptest! {
        /// Whatever the sequence, no two holders ever hold conflicting locks,
        /// and every byte a holder locked last is held with that kind.
        #[test]
        fn never_conflicting(ops in proptest::collection::vec(
            (0u64..3, 0u8..3, 0u64..40, 0u64..40), 1..60)) {
            let t = LockTable::default();
            let mut model: HashMap<(u64, u64), LockKind> = HashMap::new();
            for (owner, kind, a, b) in ops {
                let kind = [LockKind::Read, LockKind::Write, LockKind::Unlock][kind as usize];
                let (start, end) = (a.min(b), a.max(b));
                let l = lk(owner, kind, start, end);
                if t.set(9, &l).unwrap() == LockReply::Granted {
                    for x in start..=end {
                        if kind == LockKind::Unlock {
                            model.remove(&(owner, x));
                        } else {
                            model.insert((owner, x), kind);
                        }
                    }
                }
                let held = t.held(9);
                for (i, x) in held.iter().enumerate() {
                    for y in &held[i + 1..] {
                        prop_assert!(!conflicts(x, y), "{x:?} vs {y:?}");
                        if same_holder(x, y) {
                            prop_assert!(!overlap(x, y), "own locks overlap: {x:?} {y:?}");
                        }
                    }
                }
                for x in 0..40u64 {
                    for o in 0..3u64 {
                        let got = held
                            .iter()
                            .find(|h| h.owner == o && h.start <= x && x <= h.end)
                            .map(|h| h.kind);
                        prop_assert_eq!(got, model.get(&(o, x)).copied());
                    }
                }
            }
        }
    }
}
