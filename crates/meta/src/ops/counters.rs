//! `Counters`: inode use and inline bytes of this shard, for statfs and df.

use weft_proto::types::FsCounters;

use super::Ctx;
use crate::fail::OpError;
use crate::schema::key;
use crate::store::Reader;

pub(crate) fn counters(r: &impl Reader, ctx: &Ctx<'_>) -> Result<FsCounters, OpError> {
    Ok(FsCounters {
        inodes_used: r.counter(key::INODES_USED)?,
        inodes_max: ctx.spec.max_inodes,
        inline_bytes: r.counter(key::INLINE_BYTES)?,
    })
}

#[cfg(test)]
mod tests {
    use crate::testutil::Fx;
    use weft_proto::msg::MetaRequest;
    use weft_proto::types::{FsCounters, ROOT_INO};

    #[test]
    fn counts_follow_creates_and_removals() {
        let fx = Fx::with(|s| {
            s.max_inodes = 1000;
            s.data_in_inode = true;
        });
        assert_eq!(
            fx.counters(),
            FsCounters {
                inodes_used: 1,
                inodes_max: 1000,
                inline_bytes: 0
            }
        );
        let a = fx.file(ROOT_INO, "a");
        fx.mkdir(ROOT_INO, "d");
        fx.call_data(
            MetaRequest::WriteInline {
                ino: a.ino,
                offset: 0,
            },
            b"0123456789",
        );
        assert_eq!(
            fx.counters(),
            FsCounters {
                inodes_used: 3,
                inodes_max: 1000,
                inline_bytes: 10
            }
        );
        fx.rmdir(ROOT_INO, "d").unwrap();
        fx.unlink(ROOT_INO, "a").unwrap();
        assert_eq!(
            fx.counters().inodes_used,
            2,
            "an orphan still holds its record"
        );
        fx.unit(MetaRequest::Reclaim { inos: vec![a.ino] });
        assert_eq!(
            fx.counters(),
            FsCounters {
                inodes_used: 1,
                inodes_max: 1000,
                inline_bytes: 0
            }
        );
    }
}
