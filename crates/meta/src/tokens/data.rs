//! Byte-range data tokens in the node's token table (see
//! [`weft_proto::token`] for what a client does with them): which client
//! may read or write which bytes of an open file, what a request for a
//! token conflicts with, and the widest range it can be granted.
//!
//! A request conflicts with another client's token on an overlapping range
//! unless both are for reading. Its conflicting part is cut out of each
//! holder's tokens at once (a read request leaves the holder a read token
//! there) and revoked (`Revoke::Data`); the request waits until each
//! holder said it released (`DataReleased`, after writing out and
//! committing), stopped polling, or [`DATA_WAIT`] passed (then the holder
//! loses every token, as a late acknowledgement does). Then it is granted
//! the widest range around the bytes asked for that conflicts with nobody:
//! the whole file when it is alone. Tokens go with the client's last close
//! of the file, when it leaves, or when it loses its tokens.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use weft_proto::token::Revoke;
use weft_proto::types::{FsId, Ino};

use super::Tokens;

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
}

fn overlaps(h: &Held, start: u64, end: u64) -> bool {
    h.start < end && start < h.end
}

/// Whether `h` conflicts with a request of `client` for `start..end`.
fn conflicts(h: &Held, client: u64, write: bool, start: u64, end: u64) -> bool {
    h.client != client && (write || h.write) && overlaps(h, start, end)
}

/// Cuts what conflicts with the request out of the other clients' tokens
/// (a read request leaves them read tokens on the range) and answers the
/// clients whose tokens were cut.
pub(super) fn cut(
    held: &mut Vec<Held>,
    client: u64,
    write: bool,
    start: u64,
    end: u64,
) -> BTreeSet<u64> {
    let mut cut_from = BTreeSet::new();
    let mut kept = Vec::with_capacity(held.len());
    for h in held.drain(..) {
        if !conflicts(&h, client, write, start, end) {
            kept.push(h);
            continue;
        }
        cut_from.insert(h.client);
        if h.start < start {
            kept.push(Held { end: start, ..h });
        }
        if end < h.end {
            kept.push(Held { start: end, ..h });
        }
        if !write {
            kept.push(Held {
                write: false,
                start: h.start.max(start),
                end: h.end.min(end),
                ..h
            });
        }
    }
    *held = kept;
    cut_from
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
/// (same mode or weaker) go, and neighbours of the same mode merge.
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
    held.push(merged);
}

impl Tokens {
    /// Grants `client` a data token on `start..end` of `ino` (`write` or
    /// read), first revoking what conflicts from the other clients and
    /// waiting until they released it (see the module header). Answers the
    /// range granted and its sequence number; `None` when other clients
    /// kept taking the range back for [`ROUNDS`] rounds. A client that does
    /// not poll is granted the whole file and noted nowhere: nothing it
    /// caches is ever revoked.
    pub fn acquire_data(
        &self,
        fs: FsId,
        client: u64,
        ino: Ino,
        write: bool,
        start: u64,
        end: u64,
    ) -> Option<(u64, u64, u64)> {
        let end = end.max(start.saturating_add(1));
        for _ in 0..ROUNDS {
            let now = Instant::now();
            let mut st = self.lock();
            st.next_id += 1;
            let seq = st.next_id;
            match st.clients.get(&(fs, client)) {
                Some(q) if !q.reset => {}
                _ => return Some((0, u64::MAX, seq)),
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
                    },
                );
                return Some((lo, hi, seq));
            }
            let victims = cut(held, client, write, start, end);
            let mut waiting = Vec::new();
            for victim in victims {
                st.next_id += 1;
                let id = st.next_id;
                let item = Revoke::Data {
                    ino,
                    start,
                    end,
                    keep_read: !write,
                    id,
                };
                if st.enqueue(fs, victim, &item, now).is_some() {
                    st.unreleased.insert((fs, victim, id));
                    waiting.push((victim, id));
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
        None
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

    fn h(client: u64, write: bool, start: u64, end: u64) -> Held {
        Held {
            client,
            write,
            start,
            end,
        }
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
    fn a_write_request_cuts_the_range_out_of_every_other_token() {
        let mut held = vec![
            h(1, true, 0, u64::MAX),
            h(2, false, 0, 50),
            h(3, true, 0, 10),
        ];
        let victims = cut(&mut held, 3, true, 100, 200);
        assert_eq!(victims, BTreeSet::from([1]));
        held.sort_by_key(|h| (h.client, h.start));
        assert_eq!(
            held,
            vec![
                h(1, true, 0, 100),
                h(1, true, 200, u64::MAX),
                h(2, false, 0, 50),
                h(3, true, 0, 10)
            ]
        );
        assert_eq!(widest(&held, 3, true, 100, 200), Some((100, 200)));
    }

    #[test]
    fn a_read_request_leaves_writers_a_read_token() {
        let mut held = vec![h(1, true, 0, 1000)];
        assert_eq!(cut(&mut held, 2, false, 100, 200), BTreeSet::from([1]));
        held.sort_by_key(|h| h.start);
        assert_eq!(
            held,
            vec![
                h(1, true, 0, 100),
                h(1, false, 100, 200),
                h(1, true, 200, 1000)
            ]
        );
        assert_eq!(widest(&held, 2, false, 100, 200), Some((100, 200)));
    }

    #[test]
    fn a_grant_absorbs_the_clients_own_tokens() {
        let mut held = vec![h(1, false, 0, 10), h(1, true, 10, 20), h(2, false, 0, 5)];
        note(&mut held, h(1, true, 20, 30));
        held.sort_by_key(|h| (h.client, h.start));
        assert_eq!(
            held,
            vec![h(1, false, 0, 10), h(1, true, 10, 30), h(2, false, 0, 5)]
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
        let (lo, hi, _) = t.acquire_data(FS, 7, 10, true, 0, 4096).unwrap();
        assert_eq!((lo, hi), (0, u64::MAX), "alone, the whole file");
        // Another reader of the file is not waited for by a reader.
        let holder = {
            let t = t.clone();
            std::thread::spawn(move || {
                let got = t.poll(FS, 7, 0, Duration::from_secs(5));
                let [Revoke::Data {
                    ino: 10,
                    start: 8192,
                    end: 12288,
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
        let (lo, hi, seq) = t.acquire_data(FS, 8, 10, false, 8192, 12288).unwrap();
        let granted_at = Instant::now();
        assert!(
            granted_at >= holder.join().unwrap(),
            "granted before the release"
        );
        // The holder keeps writing below and above, and reads the range.
        assert_eq!((lo, hi), (8192, 12288));
        assert!(seq > 0);
        let (lo, hi, _) = t.acquire_data(FS, 7, 10, false, 8192, 8193).unwrap();
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
        t.acquire_data(FS, 7, 10, true, 0, 1).unwrap();
        // 7 never polls again: after the gone time it is not waited for.
        let start = Instant::now();
        let (lo, hi, _) = t.acquire_data(FS, 8, 10, true, 0, 1).unwrap();
        assert!(start.elapsed() < DATA_WAIT);
        assert_eq!((lo, hi), (0, u64::MAX), "its tokens all went");
    }

    #[test]
    fn a_client_that_does_not_poll_gets_the_file_and_blocks_nobody() {
        let t = Tokens::default();
        t.poll(FS, 8, 0, Duration::ZERO);
        assert_eq!(t.acquire_data(FS, 7, 10, true, 5, 6).unwrap().1, u64::MAX);
        assert_eq!(t.acquire_data(FS, 8, 10, true, 5, 6).unwrap().0, 0);
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
        let (lo, hi, _) = t.acquire_data(FS, 7, 10, true, 100, 200).unwrap();
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
        t.acquire_data(FS, 7, 10, true, 0, 1).unwrap();
        t.close_data(FS, 7, 10);
        let start = Instant::now();
        assert_eq!(t.acquire_data(FS, 8, 10, true, 0, 1).unwrap().1, u64::MAX);
        assert!(start.elapsed() < Duration::from_secs(1));
    }
}
