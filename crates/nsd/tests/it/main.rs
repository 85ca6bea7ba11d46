//! Integration tests of the nsd role through `NsdServer::handle`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod concurrency;
mod conformance;
mod corruption;
mod engine;
mod labels;
mod model;
mod nospace;
mod recovery;
mod reopen;
mod roundtrip;
