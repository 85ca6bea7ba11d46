//! `weft nsd check PATH… [--repair] [--json]` (like an offline `mmfsck` of
//! the disks): every chunk of each NSD read and checked against its
//! checksums; on chunk-engine NSDs also the allocator's bitmap against the
//! index, leaks and unmarked units fixed with `--repair`. The NSD's node
//! must be stopped (an engine NSD is refused while one serves it).
//!
//! `weft nsd chunks PATH [--ino N] --json`: where each chunk of an engine
//! NSD lies on its device, page by page (repair tools and tests).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use weft_nsd::engine::CheckReport;
use weft_nsd::{Engine, NsdKind, Store};

#[derive(clap::Args)]
pub struct CheckArgs {
    /// NSD paths: directories, files or block devices.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Free leaked units and mark unmarked ones (chunk-engine NSDs).
    #[arg(long)]
    repair: bool,
    /// One JSON object per NSD, one per line.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct ChunksArgs {
    /// A chunk-engine NSD: a file or block device.
    path: PathBuf,
    /// Only the chunks of this inode.
    #[arg(long)]
    ino: Option<u64>,
}

fn check_one(path: &Path, repair: bool) -> Result<(String, CheckReport)> {
    match NsdKind::of(path) {
        NsdKind::Dir => {
            if !path.is_dir() {
                bail!(
                    "{}: no such NSD (not a directory, file or block device)",
                    path.display()
                );
            }
            if repair {
                bail!(
                    "{}: --repair applies to chunk-engine NSDs; a damaged chunk of a directory NSD is rebuilt from a replica (weft restripe -r) or removed with its file",
                    path.display()
                );
            }
            let store = Store::open_offline(path)?;
            let report = weft_nsd::verify_chunks(&store)?;
            Ok((store.spec().name.clone(), report))
        }
        NsdKind::File | NsdKind::Device => {
            let engine = Engine::open_offline(path)?;
            let report = engine.check(repair)?;
            Ok((engine.superblock().name.clone(), report))
        }
    }
}

pub fn check(args: CheckArgs) -> Result<()> {
    let mut dirty = 0;
    for path in &args.paths {
        let (name, r) = check_one(path, args.repair)
            .with_context(|| format!("cannot check {}", path.display()))?;
        if args.json {
            let v = serde_json::json!({ "nsd": name, "path": path, "report": r, "clean": r.is_clean() });
            println!("{v}");
        } else {
            println!(
                "{name} ({}): {} chunks, {} pages checked, {} damaged, {} bad records, {} leaked units, {} unmarked units, {} shared units{}",
                path.display(),
                r.chunks,
                r.pages_checked,
                r.bad_pages.len(),
                r.bad_records,
                r.leaked_units,
                r.unmarked_units,
                r.shared_units,
                if r.repaired { " (bitmap repaired)" } else { "" }
            );
            for (c, page) in &r.bad_pages {
                println!(
                    "  damaged: fs {} inode {:#x} gen {} block {} piece {}: read the file from another replica or rewrite it",
                    c.fs, c.ino, c.gen, c.block, page
                );
            }
        }
        let fixed =
            r.repaired && r.bad_pages.is_empty() && r.bad_records == 0 && r.shared_units == 0;
        if !r.is_clean() && !fixed {
            dirty += 1;
        }
    }
    if dirty > 0 {
        bail!("{dirty} NSD(s) not clean (see above)");
    }
    Ok(())
}

pub fn chunks(args: ChunksArgs) -> Result<()> {
    if NsdKind::of(&args.path) == NsdKind::Dir {
        bail!(
            "{} is not a chunk-engine NSD: a directory NSD keeps each chunk in its own file under chunks/",
            args.path.display()
        );
    }
    let engine = Engine::open_offline(&args.path)
        .with_context(|| format!("cannot open {}", args.path.display()))?;
    for place in engine.chunk_places(args.ino)? {
        println!("{}", serde_json::to_string(&place)?);
    }
    Ok(())
}
