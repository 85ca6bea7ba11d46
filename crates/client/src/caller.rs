//! Who a metadata request is made for. The FUSE adapter runs each request's
//! future inside [`as_caller`] with the credentials of the process behind
//! it; every metadata request sent from within carries them, so the meta
//! role checks POSIX permissions itself. Requests made outside any caller
//! (background write-back, freeing orphans, admin commands, `weft perf
//! --native`) carry none and are the node's own.

use std::future::Future;

use weft_proto::types::Cred;

tokio::task_local! {
    static CALLER: Cred;
}

/// Runs `fut` on behalf of `cred`.
pub fn as_caller<F: Future>(cred: Cred, fut: F) -> impl Future<Output = F::Output> {
    CALLER.scope(cred, fut)
}

/// The caller of the request being served, if any.
pub(crate) fn current() -> Option<Cred> {
    CALLER.try_with(|c| c.clone()).ok()
}
