//! Tests of the token table.

use super::*;
use std::sync::Arc;

const FS: FsId = 1;

#[test]
fn a_change_waits_for_the_holder_and_spares_the_changer() {
    let t = Arc::new(Tokens::new(Duration::from_secs(5)));
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Attr(10), Grant::Entry(1, b"a".to_vec())]);
    t.poll(FS, 8, 0, Duration::ZERO);
    t.grant(FS, 8, &[Grant::Attr(10)]);
    let holder = {
        let t = t.clone();
        std::thread::spawn(move || {
            let got = t.poll(FS, 7, 0, Duration::from_secs(5));
            assert_eq!(got.items, vec![Revoke::Inode(10)]);
            std::thread::sleep(Duration::from_millis(100));
            let acked_at = Instant::now();
            t.poll(FS, 7, got.seq, Duration::ZERO);
            acked_at
        })
    };
    let r = t.revoke(FS, 8, &[Revoke::Inode(10)]);
    let returned = Instant::now();
    let acked_at = holder.join().unwrap();
    assert!(returned >= acked_at, "the change returned before the ack");
    assert_eq!(r.clients, 1);
    assert_eq!(r.lost, 0);
    // Revoked once: a second change finds no token.
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]), Revoked::default());
}

#[test]
fn a_silent_holder_loses_its_tokens_after_the_wait() {
    let t = Tokens::new(Duration::from_millis(100));
    // Not polling yet: no tokens.
    t.grant(FS, 7, &[Grant::Attr(10)]);
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]), Revoked::default());
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Attr(10), Grant::Attr(11)]);
    let start = Instant::now();
    let r = t.revoke(FS, 8, &[Revoke::Inode(10)]);
    assert!(start.elapsed() >= Duration::from_millis(100));
    assert_eq!(r.lost, 1);
    // Its other token went too, and it gets none until it polls.
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(11)]), Revoked::default());
    t.grant(FS, 7, &[Grant::Attr(12)]);
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(12)]), Revoked::default());
    let got = t.poll(FS, 7, 0, Duration::ZERO);
    assert!(got.reset && got.items.is_empty());
    t.grant(FS, 7, &[Grant::Attr(12)]);
    let waiter = std::thread::spawn(move || t.revoke(FS, 8, &[Revoke::Inode(12)]));
    let r = waiter.join().unwrap();
    assert_eq!(r.lost, 1, "a token after the reset is revoked again");
}

#[test]
fn a_client_that_leaves_is_not_waited_for() {
    let t = Arc::new(Tokens::new(Duration::from_secs(5)));
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Attr(10)]);
    let change = {
        let t = t.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            (t.revoke(FS, 8, &[Revoke::Inode(10)]), start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    t.leave(FS, 7);
    let (r, took) = change.join().unwrap();
    assert_eq!((r.clients, r.lost), (1, 0));
    assert!(took < Duration::from_secs(2), "{took:?}");
    t.grant(FS, 7, &[Grant::Attr(10)]);
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]), Revoked::default());
}

#[test]
fn an_open_file_keeps_its_token_until_closed() {
    let t = Arc::new(Tokens::new(Duration::from_millis(50)));
    t.poll(FS, 7, 0, Duration::ZERO);
    // Opened twice (a client's opens count once), closed once.
    t.grant(FS, 7, &[Grant::Open(10)]);
    t.grant(FS, 7, &[Grant::Open(10)]);
    let poller = {
        let t = t.clone();
        std::thread::spawn(move || {
            let mut acked = 0;
            let mut seen = 0;
            while seen < 2 {
                let got = t.poll(FS, 7, acked, Duration::from_secs(2));
                seen += got.items.len();
                acked = got.seq;
            }
            t.poll(FS, 7, acked, Duration::ZERO);
        })
    };
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]).lost, 0);
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]).lost, 0);
    poller.join().unwrap();
    t.grant(FS, 7, &[Grant::Close(10)]);
    std::thread::sleep(Duration::from_millis(10));
    let mut st = t.lock();
    st.swept = None;
    st.sweep(Instant::now() + HOLD);
    assert!(st.grants.is_empty(), "{:?}", st.grants);
}

#[test]
fn a_kept_closed_file_is_revoked_once_and_given_up_by_a_drop() {
    let t = Arc::new(Tokens::new(Duration::from_secs(2)));
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Open(10), Grant::Open(11)]);
    t.grant(FS, 7, &[Grant::Keep(10), Grant::Keep(11)]);
    // Past the hold of attribute tokens, the kept files' tokens stay.
    {
        let mut st = t.lock();
        st.swept = None;
        st.sweep(Instant::now() + HOLD * 2);
        assert_eq!(st.grants.len(), 2, "{:?}", st.grants);
    }
    // A change revokes a kept file's token (the holder drops its cache),
    // and the token goes with it: a second change finds none.
    let poller = {
        let t = t.clone();
        std::thread::spawn(move || {
            let got = t.poll(FS, 7, 0, Duration::from_secs(2));
            assert_eq!(got.items, vec![Revoke::Inode(10)]);
            t.poll(FS, 7, got.seq, Duration::ZERO);
        })
    };
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]).clients, 1);
    poller.join().unwrap();
    assert_eq!(t.revoke(FS, 8, &[Revoke::Inode(10)]), Revoked::default());
    // Given up: the other one expires like any attribute token.
    t.grant(FS, 7, &[Grant::Drop(11), Grant::Drop(12)]);
    let mut st = t.lock();
    st.swept = None;
    st.sweep(Instant::now() + HOLD * 2);
    assert!(st.grants.is_empty(), "{:?}", st.grants);
}

#[test]
fn a_reopen_of_a_file_no_longer_noted_kept_first_drops_its_cache() {
    let t = Arc::new(Tokens::new(Duration::from_secs(2)));
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Open(10), Grant::Keep(10)]);
    // Still noted: nothing to drop, nobody waited for.
    assert_eq!(t.confirm_kept(FS, 7, 10), Some(Revoked::default()));
    // A take-over of the inode's shard forgets what this node noted, so
    // the reopen has the client drop its cache and acknowledge first.
    t.forget_shard(FS, weft_proto::types::ino_shard(10));
    let poller = {
        let t = t.clone();
        std::thread::spawn(move || {
            let got = t.poll(FS, 7, 0, Duration::from_secs(2));
            let acked_at = Instant::now();
            t.poll(FS, 7, got.seq, Duration::ZERO);
            (got.items, acked_at)
        })
    };
    let r = t.confirm_kept(FS, 7, 10).unwrap();
    let returned = Instant::now();
    let (items, acked_at) = poller.join().unwrap();
    assert_eq!(items, vec![Revoke::Inode(10)]);
    assert_eq!((r.clients, r.lost), (1, 0));
    assert!(
        returned >= acked_at,
        "answered before the client dropped its cache"
    );
    // Another shard's records are untouched by the take-over.
    let other = weft_proto::types::make_ino(weft_proto::types::ino_shard(10) + 1, 5);
    t.grant(FS, 7, &[Grant::Open(other), Grant::Keep(other)]);
    t.forget_shard(FS, weft_proto::types::ino_shard(10));
    assert_eq!(t.confirm_kept(FS, 7, other), Some(Revoked::default()));
}

#[test]
fn a_take_over_drops_the_shard_at_the_polling_clients_and_waits_for_them() {
    let t = Arc::new(Tokens::new(Duration::from_millis(400)));
    let shard = weft_proto::types::ino_shard(10);
    let other = weft_proto::types::make_ino(shard + 1, 5);
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Attr(10), Grant::Open(10), Grant::Keep(10)]);
    t.grant(
        FS,
        7,
        &[Grant::Attr(other), Grant::Open(other), Grant::Keep(other)],
    );
    // Client 8 polled once and stays silent; client 9 polls another fs.
    t.poll(FS, 8, 0, Duration::ZERO);
    t.grant(FS, 8, &[Grant::Attr(other)]);
    t.poll(FS + 1, 9, 0, Duration::ZERO);
    t.grant(FS + 1, 9, &[Grant::Attr(10)]);
    let poller = {
        let t = t.clone();
        std::thread::spawn(move || {
            // Already waiting when the take-over queues the shard.
            let got = t.poll(FS, 7, 0, Duration::from_secs(5));
            let at = Instant::now();
            t.poll(FS, 7, got.seq, Duration::ZERO);
            (got, at)
        })
    };
    std::thread::sleep(Duration::from_millis(50));
    let r = t.take_over(FS, shard);
    let returned = Instant::now();
    let (got, taken_at) = poller.join().unwrap();
    assert!(!got.reset, "the client was reset, not told the shard");
    assert_eq!(got.items, vec![Revoke::Shard(shard)]);
    assert!(returned >= taken_at, "the take-over did not wait for it");
    assert_eq!((r.clients, r.lost), (2, 1), "client 8 never acknowledged");
    // Nothing of the shard is noted any more; the other shard's tokens of
    // client 7 stand, client 8 (late) lost all of its own.
    assert!(!t.noted_kept(FS, 7, 10));
    assert!(t.noted_kept(FS, 7, other));
    let holders: Vec<u64> = t.lock().grants[&Covers::Attr(FS, other)]
        .iter()
        .map(|h| h.client)
        .collect();
    assert_eq!(holders, vec![7]);
    assert!(t.poll(FS, 8, 0, Duration::ZERO).reset);
    // The other file system's client is untouched.
    let holder = {
        let t = t.clone();
        std::thread::spawn(move || {
            let got = t.poll(FS + 1, 9, 0, Duration::from_secs(5));
            t.poll(FS + 1, 9, got.seq, Duration::ZERO);
            got.items
        })
    };
    assert_eq!(t.revoke(FS + 1, 8, &[Revoke::Inode(10)]).lost, 0);
    assert_eq!(holder.join().unwrap(), vec![Revoke::Inode(10)]);
    // Client 7 gets tokens on the shard again as it asks.
    t.grant(FS, 7, &[Grant::Attr(10)]);
    let holders: Vec<u64> = t.lock().grants[&Covers::Attr(FS, 10)]
        .iter()
        .map(|h| h.client)
        .collect();
    assert_eq!(holders, vec![7]);
}

#[test]
fn a_reopen_is_not_confirmed_to_a_client_that_does_not_take_its_revocation() {
    let t = Tokens::new(Duration::from_millis(100));
    // Never polled this node: it cannot be told to drop anything.
    assert_eq!(t.confirm_kept(FS, 7, 10), None);
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Open(10), Grant::Keep(10)]);
    t.forget_shard(FS, weft_proto::types::ino_shard(10));
    // Polls, but does not acknowledge within the wait: not confirmed, and
    // reset; once it took the reset, a reopen waits for its acknowledgement.
    assert_eq!(t.confirm_kept(FS, 7, 10), None);
    assert!(t.poll(FS, 7, 0, Duration::ZERO).reset);
    assert_eq!(t.confirm_kept(FS, 7, 10), None, "still no acknowledgement");
}

#[test]
fn changed_keys_name_inodes_and_entries() {
    let (dir, file) = (5u64.to_be_bytes(), 9u64.to_be_bytes());
    let entry = [&dir[..], b"a"].concat();
    let xattr = [&file[..], b"user.x"].concat();
    let got = revokes_of([
        (Space::Inodes, &dir[..]),
        (Space::Inodes, &file[..]),
        (Space::Dirents, &entry[..]),
        (Space::Xattrs, &xattr[..]),
        (Space::Meta, b"next_ino"),
    ]);
    // The directory's own record changed with its entries: not revoked.
    assert_eq!(
        got,
        vec![
            Revoke::Entry {
                parent: 5,
                name: b"a".to_vec()
            },
            Revoke::Inode(9),
        ]
    );
    assert_eq!(
        revokes_of([(Space::Inodes, &dir[..])]),
        vec![Revoke::Inode(5)]
    );
}

#[test]
fn entry_tokens_are_per_name() {
    let t = Tokens::new(Duration::from_millis(50));
    t.poll(FS, 7, 0, Duration::ZERO);
    t.grant(FS, 7, &[Grant::Entry(1, b"a".to_vec())]);
    let other = Revoke::Entry {
        parent: 1,
        name: b"b".to_vec(),
    };
    assert_eq!(t.revoke(FS, 8, &[other]), Revoked::default());
    let same = Revoke::Entry {
        parent: 1,
        name: b"a".to_vec(),
    };
    assert_eq!(t.revoke(FS, 8, &[same]).clients, 1);
}

#[test]
fn a_look_at_a_file_open_elsewhere_waits_for_its_writer_to_commit() {
    let t = Arc::new(Tokens::new(Duration::from_secs(5)));
    for c in [7, 8, 9] {
        t.poll(FS, c, 0, Duration::ZERO);
    }
    t.grant(FS, 7, &[Grant::Open(10)]);
    // 9 caches the attributes but does not have the file open.
    t.grant(FS, 9, &[Grant::Attr(10)]);
    let writer = {
        let t = t.clone();
        std::thread::spawn(move || {
            let got = t.poll(FS, 7, 0, Duration::from_secs(5));
            assert_eq!(got.items, vec![Revoke::Flush(10)]);
            std::thread::sleep(Duration::from_millis(100));
            let committed = Instant::now();
            t.poll(FS, 7, got.seq, Duration::ZERO);
            committed
        })
    };
    let r = t.flush_elsewhere(FS, 8, 10);
    let answered = Instant::now();
    assert!(
        answered >= writer.join().unwrap(),
        "answered before the commit"
    );
    assert_eq!((r.clients, r.lost), (1, 0));
    // Nobody else has it open: nothing to wait for; the writer itself is
    // not asked.
    assert_eq!(t.flush_elsewhere(FS, 7, 10), Revoked::default());
    assert_eq!(t.flush_elsewhere(FS, 8, 11), Revoked::default());
    // The open token stays.
    t.grant(FS, 7, &[Grant::Close(10)]);
}
