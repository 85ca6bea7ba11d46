//! What the mount asks of the kernel at FUSE init: write and read-ahead
//! sizes, background requests, and the capabilities it uses when offered.

use fuser::{InitFlags, KernelConfig};

/// Largest read-ahead the adapter asks the kernel for at init. The kernel
/// caps it at what it offered (128 KiB); the mount raises it afterwards
/// through sysfs.
const MAX_READAHEAD: u32 = 1 << 20;
/// Background requests (read-ahead, async direct I/O) the kernel may have in
/// flight: enough to keep every NSD of a wide stripe busy.
const MAX_BACKGROUND: u16 = 64;
const CONGESTION_THRESHOLD: u16 = 48;

/// What the kernel may do on our behalf, when it can.
const WANTED_CAPABILITIES: [(InitFlags, &str); 14] = [
    (InitFlags::FUSE_ASYNC_READ, "async reads"),
    (InitFlags::FUSE_BIG_WRITES, "big writes"),
    (InitFlags::FUSE_MAX_PAGES, "max_pages"),
    // O_TRUNC arrives with open, so the client truncates as it opens.
    (InitFlags::FUSE_ATOMIC_O_TRUNC, "atomic O_TRUNC"),
    (
        InitFlags::FUSE_PARALLEL_DIROPS,
        "parallel directory operations",
    ),
    (InitFlags::FUSE_DO_READDIRPLUS, "readdirplus"),
    (InitFlags::FUSE_READDIRPLUS_AUTO, "adaptive readdirplus"),
    // Cached pages are dropped when another node changes size or mtime.
    (
        InitFlags::FUSE_AUTO_INVAL_DATA,
        "automatic page-cache invalidation",
    ),
    (InitFlags::FUSE_ASYNC_DIO, "asynchronous direct I/O"),
    // Files are opened in direct-I/O mode (the pagepool caches); mmap still works.
    (
        InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP,
        "mmap of direct-I/O files",
    ),
    // fcntl and flock locks go to the meta role (see `locks.rs`).
    (InitFlags::FUSE_POSIX_LOCKS, "remote POSIX locks"),
    (InitFlags::FUSE_FLOCK_LOCKS, "remote flock locks"),
    // The kernel enforces POSIX ACLs read from `system.posix_acl_*`.
    (InitFlags::FUSE_POSIX_ACL, "POSIX ACLs"),
    // The umask arrives apart from the mode: a default ACL replaces it.
    (
        InitFlags::FUSE_DONT_MASK,
        "umask applied by the file system",
    ),
];

/// Sets `config` for a session whose writes may be up to `max_write` bytes.
pub(crate) fn negotiate(config: &mut KernelConfig, max_write: u32) {
    if let Err(nearest) = config.set_max_write(max_write) {
        tracing::info!(wanted = max_write, nearest, "FUSE max_write capped");
        let _ = config.set_max_write(nearest);
    }
    if let Err(nearest) = config.set_max_readahead(MAX_READAHEAD) {
        // The usual case: the kernel offers 128 KiB at init.
        let _ = config.set_max_readahead(nearest);
    }
    let _ = config.set_max_background(MAX_BACKGROUND);
    let _ = config.set_congestion_threshold(CONGESTION_THRESHOLD);
    for (flag, what) in WANTED_CAPABILITIES {
        if config.add_capabilities(flag).is_err() {
            tracing::debug!(
                capability = what,
                "the kernel does not offer this FUSE capability"
            );
        }
    }
    tracing::debug!(kernel_abi = ?config.kernel_abi(), "FUSE session initialised");
}
