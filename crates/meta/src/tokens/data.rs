//! Byte-range data tokens in the node's token table (see
//! [`weft_proto::token`] for what a client does with them): which client
//! may read or write which bytes of an open file, what a request for a
//! token conflicts with, and the widest range it can be granted.
//!
//! A request conflicts with another client's token on an overlapping range
//! unless both are for reading. The conflicting token is cut at once (a
//! read request leaves the holder a read token there) and what was cut is
//! revoked (`Revoke::Data`); the request waits until each holder said it
//! released (`DataReleased`, after writing out and committing), stopped
//! polling, or [`DATA_WAIT`] passed (then the holder loses every token, as
//! a late acknowledgement does). Then it is granted the widest range around
//! the bytes asked for that conflicts with nobody: the whole file when it
//! is alone. Tokens go with the client's last close of the file, when it
//! leaves, or when it loses its tokens.
//!
//! **How much is cut** ([`cut_range`]), as GPFS's token manager splits a
//! byte range between a required and a desired part: each token remembers
//! where its client was last known to work (the start of the range it last
//! asked for), and clients are taken to move upward through a file. A
//! holder that works below the bytes asked for gives up everything from
//! them upward; one that works above them gives up everything below where
//! it works; one that works inside them gives up just those bytes. So two
//! nodes writing a segment each of one file (IOR's shared file) split it
//! once, where cutting only the bytes asked for took the range back record
//! by record (each pass a write-out and a commit of the holder). Writers of
//! interleaved records still pass the range back and forth: each wants the
//! bytes right after the other's.

use std::time::{Duration, Instant};

use weft_proto::token::Revoke;
use weft_proto::types::{FsId, Ino};

use super::{Revoked, Tokens};

/// How long a request for a data token waits for the holders it revoked:
/// they write out what they buffered first, which may be a pagepool's
/// worth of dirty blocks.
pub const DATA_WAIT: Duration = Duration::from_secs(30);

/// Grants a request gives up on when every round found a new conflict
/// (other clients taking the range back meanwhile), as `Busy`.
const ROUNDS: u32 = 64;

/// One data token of one client: `start..end` of a file (`end` exclusive,
/// `u64::MAX` for the end of any file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub client: u64,
    pub write: bool,
    pub start: u64,
    pub end: u64,
    /// Where the client was last known to work in the file: the start of
    /// the range it last asked for (0 for a token given at open).
    pub at: u64,
}

/// What a request for a data token got: the range granted and its
/// sequence number (`None` when other clients kept taking the range back),
/// and the revocations sent for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataAnswer {
    pub granted: Option<(u64, u64, u64)>,
    pub revoked: Revoked,
}

/// A range cut out of a client's token, to revoke from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Cut {
    pub client: u64,
    pub start: u64,
    pub end: u64,
}

fn overlaps(h: &Held, start: u64, end: u64) -> bool {
    h.start < end && start < h.end
}

/// Whether `h` conflicts with a request of `client` for `start..end`.
fn conflicts(h: &Held, client: u64, write: bool, start: u64, end: u64) -> bool {
    h.client != client && (write || h.write) && overlaps(h, start, end)
}

/// What a request for `start..end` cuts out of the conflicting token `h`
/// (see the module header): from the request upward when `h`'s client
/// works below it, everything below where it works when it works above,
/// the request's bytes when it works inside them; always within `h`.
pub(super) fn cut_range(h: &Held, start: u64, end: u64) -> (u64, u64) {
    let (lo, hi) = if h.at < start {
        (start, h.end)
    } else if h.at >= end {
        (h.start, h.at)
    } else {
        (start, end)
    };
    (lo.max(h.start), hi.min(h.end))
}

/// Cuts what conflicts with the request out of the other clients' tokens
/// (a read request leaves them read tokens there) and answers the ranges
/// cut, to revoke.
pub(super) fn cut(
    held: &mut Vec<Held>,
    client: u64,
    write: bool,
    start: u64,
    end: u64,
) -> Vec<Cut> {
    let mut cuts = Vec::new();
    let mut kept = Vec::with_capacity(held.len());
    for h in held.drain(..) {
        if !conflicts(&h, client, write, start, end) {
            kept.push(h);
            continue;
        }
        let (lo, hi) = cut_range(&h, start, end);
        cuts.push(Cut {
            client: h.client,
            start: lo,
            end: hi,
        });
        if h.start < lo {
            kept.push(Held { end: lo, ..h });
        }
        if hi < h.end {
            kept.push(Held { start: hi, ..h });
        }
        if !write {
            kept.push(Held {
                write: false,
                start: lo,
                end: hi,
                ..h
            });
        }
    }
    *held = kept;
    cuts
}

/// The widest range around `start..end` that conflicts with no other
/// client's token; `None` while something conflicts with `start..end`.
pub(super) fn widest(
    held: &[Held],
    client: u64,
    write: bool,
    start: u64,
    end: u64,
) -> Option<(u64, u64)> {
    let mut lo = 0;
    let mut hi = u64::MAX;
    for h in held {
        if h.client == client || !(write || h.write) {
            continue;
        }
        if overlaps(h, start, end) {
            return None;
        }
        if h.end <= start {
            lo = lo.max(h.end);
        } else {
            hi = hi.min(h.start);
        }
    }
    Some((lo, hi))
}

/// Notes a token granted to `client`: its own tokens the new one covers
/// (same mode or weaker) go, and neighbours of the same mode merge; all of
/// them now say the client works where the new one does.
pub(super) fn note(held: &mut Vec<Held>, new: Held) {
    let mut merged = new;
    held.retain(|h| {
        if h.client != new.client {
            return true;
        }
        let inside = h.start >= new.start && h.end <= new.end;
        if inside && (new.write || !h.write) {
            return false;
        }
        let touches = h.start <= merged.end && merged.start <= h.end;
        if touches && h.write == new.write {
            merged.start = merged.start.min(h.start);
            merged.end = merged.end.max(h.end);
            return false;
        }
        true
    });
    for h in held.iter_mut().filter(|h| h.client == new.client) {
        h.at = new.at;
    }
    held.push(merged);
}

impl Tokens {
    /// Grants `client` a data token on `start..end` of `ino` (`write` or
    /// read), first revoking what conflicts from the other clients and
    /// waiting until they released it (see the module header). Answers the
    /// range granted and its sequence number (none when other clients
    /// kept taking the range back for [`ROUNDS`] rounds), and what was
    /// revoked for it. A client that does not poll is granted the whole
    /// file and noted nowhere: nothing it caches is ever revoked.
    pub fn acquire_data(
        &self,
        fs: FsId,
        client: u64,
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    ) -> DataAnswer {
        let end = end.max(start.saturating_add(1));
        let mut revoked = Revoked::default();
        for _ in 0..ROUNDS {
            let now = Instant::now();
            let mut st = self.lock();
            st.next_id += 1;
            let seq = st.next_id;
            match st.clients.get(&(fs, client)) {
                Some(q) if !q.reset => {}
                _ => {
                    return DataAnswer {
                        granted: Some((0, u64::MAX, seq)),
                        revoked,
                    }
                }
            }
            let held = st.data.entry((fs, ino)).or_default();
            if let Some((lo, hi)) = widest(held, client, write, start, end) {
                note(
                    held,
                    Held {
                        client,
                        write,
                        start: lo,
                        end: hi,
                        at: start,
                    },
                );
                return DataAnswer {
                    granted: Some((lo, hi, seq)),
                    revoked,
                };
            }
            let mut waiting = Vec::new();
            for c in cut(held, client, write, start, end) {
                st.next_id += 1;
                let id = st.next_id;
                let item = Revoke::Data {
                    ino,
                    start: c.start,
                    end: c.end,
                    keep_read: !write,
                    id,
                };
                if st.enqueue(fs, c.client, &item, now).is_some() {
                    st.unreleased.insert((fs, c.client, id));
                    waiting.push((c.client, id));
                    revoked.clients += 1;
                }
            }
            self.wake.notify_all();
            let deadline = now + DATA_WAIT;
            loop {
                let now = Instant::now();
                let mut late = Vec::new();
                waiting.retain(|&(victim, id)| {
                    if !st.unreleased.contains(&(fs, victim, id)) {
                        return false;
                    }
                    let live = st.clients.get(&(fs, victim)).is_some_and(|q| q.live(now));
                    if !live || now >= deadline {
                        late.push(victim);
                        return false;
                    }
                    true
                });
                for victim in late {
                    revoked.lost += 1;
                    tracing::warn!(
                        fs,
                        ino,
                        client = format_args!("{victim:016x}"),
                        "a client did not release a data token in time; it loses its tokens"
                    );
                    st.reset(fs, victim);
                }
                if waiting.is_empty() {
                    break;
                }
                // Woken by releases; looks again at least once a second
                // for holders that stopped polling.
                let left = deadline
                    .saturating_duration_since(now)
                    .min(Duration::from_secs(1));
                st = match self.wake.wait_timeout(st, left) {
                    Ok((g, _)) => g,
                    Err(p) => p.into_inner().0,
                };
            }
        }
        DataAnswer {
            granted: None,
            revoked,
        }
    }

    /// A read token on the whole of `ino` for `client` opening it, when no
    /// other client holds a write token on any of it (an open waits for
    /// nobody); its sequence number. None for a client that does not poll.
    pub fn read_whole(&self, fs: FsId, client: u64, ino: Ino) -> Option<u64> {
        let mut st = self.lock();
        match st.clients.get(&(fs, client)) {
            Some(q) if !q.reset => {}
            _ => return None,
        }
        st.next_id += 1;
        let seq = st.next_id;
        let held = st.data.entry((fs, ino)).or_default();
        widest(held, client, false, 0, u64::MAX)?;
        note(
            held,
            Held {
                client,
                write: false,
                start: 0,
                end: u64::MAX,
                at: 0,
            },
        );
        Some(seq)
    }

    /// `client` released what revocation `id` asked for.
    pub fn data_released(&self, fs: FsId, client: u64, id: u64) {
        let mut st = self.lock();
        if st.unreleased.remove(&(fs, client, id)) {
            self.wake.notify_all();
        }
    }

    /// `client` closed `ino` for the last time: its data tokens on it go.
    pub fn close_data(&self, fs: FsId, client: u64, ino: Ino) {
        let mut st = self.lock();
        if let Some(held) = st.data.get_mut(&(fs, ino)) {
            held.retain(|h| h.client != client);
            if held.is_empty() {
                st.data.remove(&(fs, ino));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token of a client that works where it starts.
    fn h(client: u64, write: bool, start: u64, end: u64) -> Held {
        Held {
            client,
            write,
            start,
            end,
            at: start,
        }
    }

    fn cuts(v: &[(u64, u64, u64)]) -> Vec<Cut> {
        v.iter()
            .map(|&(client, start, end)| Cut { client, start, end })
            .collect()
    }

    #[test]
    fn readers_share_and_a_writer_conflicts() {
        let held = vec![h(1, false, 0, u64::MAX)];
        assert_eq!(widest(&held, 2, false, 10, 20), Some((0, u64::MAX)));
        assert_eq!(widest(&held, 2, true, 10, 20), None);
        // Its own tokens never conflict.
        assert_eq!(widest(&held, 1, true, 10, 20), Some((0, u64::MAX)));
    }

    #[test]
    fn the_grant_stops_at_the_nearest_conflicting_tokens() {
        let held = vec![
            h(1, true, 0, 100),
            h(3, true, 500, 600),
            h(4, false, 50, 400),
        ];
        // A writer conflicts with the reader at 50..400 too.
        assert_eq!(widest(&held, 2, true, 400, 450), Some((400, 500)));
        // A reader does not.
        assert_eq!(widest(&held, 2, false, 200, 300), Some((100, 500)));
        assert_eq!(widest(&held, 2, false, 650, 700), Some((600, u64::MAX)));
    }

    #[test]
    fn a_holder_working_below_gives_up_everything_from_the_request_upward() {
        let mut held = vec![
            h(1, true, 0, u64::MAX),
            h(2, false, 0, 50),
            h(3, true, 0, 10),
        ];
        let got = cut(&mut held, 3, true, 100, 200);
        assert_eq!(got, cuts(&[(1, 100, u64::MAX)]));
        held.sort_by_key(|h| (h.client, h.start));
        assert_eq!(
            held,
            vec![h(1, true, 0, 100), h(2, false, 0, 50), h(3, true, 0, 10)]
        );
        assert_eq!(widest(&held, 3, true, 100, 200), Some((100, u64::MAX)));
    }

    #[test]
    fn a_holder_working_above_gives_up_everything_below_where_it_works() {
        let mut held = vec![Held {
            at: 1000,
            ..h(1, true, 0, u64::MAX)
        }];
        assert_eq!(cut(&mut held, 2, true, 0, 10), cuts(&[(1, 0, 1000)]));
        assert_eq!(
            held,
            vec![Held {
                at: 1000,
                ..h(1, true, 1000, u64::MAX)
            }]
        );
        assert_eq!(widest(&held, 2, true, 0, 10), Some((0, 1000)));
    }

    #[test]
    fn a_holder_working_inside_the_request_gives_up_just_its_bytes() {
        let mut held = vec![Held {
            at: 150,
            ..h(1, true, 0, u64::MAX)
        }];
        assert_eq!(cut(&mut held, 2, true, 100, 200), cuts(&[(1, 100, 200)]));
        held.sort_by_key(|h| h.start);
        let ranges: Vec<_> = held.iter().map(|h| (h.start, h.end)).collect();
        assert_eq!(ranges, vec![(0, 100), (200, u64::MAX)]);
        assert_eq!(widest(&held, 2, true, 100, 200), Some((100, 200)));
    }

    #[test]
    fn a_cut_stays_inside_the_token() {
        // Works below a token that starts above the request.
        let t = Held {
            at: 10,
            ..h(1, true, 500, 600)
        };
        assert_eq!(cut_range(&t, 400, 550), (500, 600));
        // Works far above a token that ends below where it works.
        let t = Held {
            at: 10_000,
            ..h(1, true, 500, 600)
        };
        assert_eq!(cut_range(&t, 520, 530), (500, 600));
    }

    #[test]
    fn a_read_request_leaves_writers_a_read_token() {
        let mut held = vec![h(1, true, 0, 1000)];
        assert_eq!(cut(&mut held, 2, false, 100, 200), cuts(&[(1, 100, 1000)]));
        held.sort_by_key(|h| h.start);
        let read_above = Held {
            at: 0,
            ..h(1, false, 100, 1000)
        };
        assert_eq!(held, vec![h(1, true, 0, 100), read_above]);
        assert_eq!(widest(&held, 2, false, 100, 200), Some((100, u64::MAX)));
    }

    /// Two clients write `records` records of `len` bytes each, in turns,
    /// asking for a write token on a record only when their own tokens do
    /// not cover it; answers how many ranges were cut.
    fn cuts_of_two_writers(offset: impl Fn(u64, u64) -> u64, records: u64, len: u64) -> usize {
        let mut held: Vec<Held> = Vec::new();
        let mut cut_count = 0;
        for i in 0..records {
            for client in [1, 2] {
                let start = offset(client, i);
                let end = start + len;
                let covered = held
                    .iter()
                    .any(|t| t.client == client && t.write && t.start <= start && end <= t.end);
                if covered {
                    continue;
                }
                cut_count += cut(&mut held, client, true, start, end).len();
                let (lo, hi) = widest(&held, client, true, start, end).unwrap();
                note(
                    &mut held,
                    Held {
                        client,
                        write: true,
                        start: lo,
                        end: hi,
                        at: start,
                    },
                );
            }
        }
        cut_count
    }

    #[test]
    fn writers_of_a_segment_each_split_the_file_once() {
        let (records, len) = (64, 1 << 18);
        let seg = records * len;
        // Client 1's segment first in the file, and the reverse.
        let first_below = cuts_of_two_writers(|c, i| (c - 1) * seg + i * len, records, len);
        let first_above = cuts_of_two_writers(|c, i| (2 - c) * seg + i * len, records, len);
        assert_eq!((first_below, first_above), (1, 1));
        // Interleaved records still pass the range back and forth.
        let interleaved = cuts_of_two_writers(|c, i| (2 * i + c - 1) * len, records, len);
        assert!(interleaved as u64 >= records, "{interleaved} cuts");
    }

    #[test]
    fn a_grant_absorbs_the_clients_own_tokens() {
        let mut held = vec![h(1, false, 0, 10), h(1, true, 10, 20), h(2, false, 0, 5)];
        note(&mut held, h(1, true, 20, 30));
        held.sort_by_key(|h| (h.client, h.start));
        // The client's tokens all say it now works where it asked last.
        let at_20 = |t: Held| Held { at: 20, ..t };
        assert_eq!(
            held,
            vec![
                at_20(h(1, false, 0, 10)),
                at_20(h(1, true, 10, 30)),
                h(2, false, 0, 5)
            ]
        );
        note(&mut held, h(1, true, 0, u64::MAX));
        held.sort_by_key(|h| (h.client, h.start));
        assert_eq!(held, vec![h(1, true, 0, u64::MAX), h(2, false, 0, 5)]);
    }

    const FS: FsId = 1;

    #[test]
    fn a_request_waits_until_the_holder_released() {
        let t = std::sync::Arc::new(Tokens::default());
        t.poll(FS, 7, 0, Duration::ZERO);
        t.poll(FS, 8, 0, Duration::ZERO);
        let (lo, hi, _) = t.acquire_data(FS, 7, 10, true, 0, 4096).granted.unwrap();
        assert_eq!((lo, hi), (0, u64::MAX), "alone, the whole file");
        // Another reader of the file is not waited for by a reader.
        let holder = {
            let t = t.clone();
            std::thread::spawn(move || {
                let got = t.poll(FS, 7, 0, Duration::from_secs(5));
                let [Revoke::Data {
                    ino: 10,
                    start: 8192,
                    end: u64::MAX,
                    keep_read: true,
                    id,
                }] = got.items[..]
                else {
                    panic!("unexpected revocations {:?}", got.items);
                };
                std::thread::sleep(Duration::from_millis(100));
                let released_at = Instant::now();
                t.data_released(FS, 7, id);
                released_at
            })
        };
        let answer = t.acquire_data(FS, 8, 10, false, 8192, 12288);
        let granted_at = Instant::now();
        assert!(
            granted_at >= holder.join().unwrap(),
            "granted before the release"
        );
        assert_eq!(answer.revoked.clients, 1);
        // The holder works below: it keeps writing there, and reads from
        // the range asked for upward, where the reader now reads.
        let (lo, hi, seq) = answer.granted.unwrap();
        assert_eq!((lo, hi), (8192, u64::MAX));
        assert!(seq > 0);
        let (lo, hi, _) = t
            .acquire_data(FS, 7, 10, false, 8192, 8193)
            .granted
            .unwrap();
        assert_eq!(
            (lo, hi),
            (0, u64::MAX),
            "a reader beside a reader reads the whole file"
        );
    }

    #[test]
    fn a_holder_that_stops_polling_loses_its_tokens() {
        let t = Tokens::default();
        t.poll(FS, 7, 0, Duration::ZERO);
        t.poll(FS, 8, 0, Duration::ZERO);
        t.acquire_data(FS, 7, 10, true, 0, 1).granted.unwrap();
        // 7 never polls again: after the gone time it is not waited for.
        let start = Instant::now();
        let (lo, hi, _) = t.acquire_data(FS, 8, 10, true, 0, 1).granted.unwrap();
        assert!(start.elapsed() < DATA_WAIT);
        assert_eq!((lo, hi), (0, u64::MAX), "its tokens all went");
    }

    #[test]
    fn a_client_that_does_not_poll_gets_the_file_and_blocks_nobody() {
        let t = Tokens::default();
        t.poll(FS, 8, 0, Duration::ZERO);
        assert_eq!(
            t.acquire_data(FS, 7, 10, true, 5, 6).granted.unwrap().1,
            u64::MAX
        );
        assert_eq!(t.acquire_data(FS, 8, 10, true, 5, 6).granted.unwrap().0, 0);
    }

    #[test]
    fn an_open_reads_the_whole_file_unless_another_client_writes_it() {
        let t = Tokens::default();
        t.poll(FS, 7, 0, Duration::ZERO);
        t.poll(FS, 8, 0, Duration::ZERO);
        assert!(t.read_whole(FS, 7, 10).is_some());
        assert!(t.read_whole(FS, 8, 10).is_some(), "readers share");
        // A writer elsewhere, on any range: the open gets no token.
        t.close_data(FS, 8, 10);
        let (lo, hi, _) = t.acquire_data(FS, 7, 10, true, 100, 200).granted.unwrap();
        assert_eq!((lo, hi), (0, u64::MAX));
        assert_eq!(t.read_whole(FS, 8, 10), None);
        // Not polling: none.
        assert_eq!(t.read_whole(FS, 9, 11), None);
    }

    #[test]
    fn a_last_close_gives_the_tokens_up() {
        let t = Tokens::default();
        t.poll(FS, 7, 0, Duration::ZERO);
        t.poll(FS, 8, 0, Duration::ZERO);
        t.acquire_data(FS, 7, 10, true, 0, 1).granted.unwrap();
        t.close_data(FS, 7, 10);
        let start = Instant::now();
        assert_eq!(
            t.acquire_data(FS, 8, 10, true, 0, 1).granted.unwrap().1,
            u64::MAX
        );
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
