//! Golden entries of the handshake messages (`Hello`, `HelloReply`, `Auth`,
//! `AuthReply`) and of a request frame's `Traced` wrapper.

use crate::msg::{Auth, AuthReply, Hello, HelloReply, JoinClaim, NsdRequest, Request, Traced};

use super::samples::*;
use super::Entry;

/// The handshake part of [`super::table`], in table order.
pub(super) fn entries() -> Vec<Entry> {
    vec![
        // Handshake.
        (
            "Hello",
            Sample::Hello(Hello {
                min_version: 2,
                max_version: 3,
                peer_name: "node-a".into(),
                nonce: bytes32(0x10),
                client_id: 0x0123_4567_89ab_cdef,
                join: Some(JoinClaim {
                    token_id: bytes16(0x80),
                    expires: 1_700_000_000,
                }),
            }),
            "0203066e6f64652d61101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2fef9bafcdf8acd1910101808182838485868788898a8b8c8d8e8f80e2cfaa06",
        ),
        (
            "HelloReply::Accept",
            Sample::HelloReply(HelloReply::Accept {
                version: 3,
                nonce: bytes32(0x30),
                proof: bytes32(0x50),
            }),
            "0003303132333435363738393a3b3c3d3e3f404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f606162636465666768696a6b6c6d6e6f",
        ),
        (
            "HelloReply::Reject",
            Sample::HelloReply(HelloReply::Reject {
                reason: "version".into(),
            }),
            "010776657273696f6e",
        ),
        (
            "Auth",
            Sample::Auth(Auth {
                proof: bytes32(0x70),
            }),
            "707172737475767778797a7b7c7d7e7f808182838485868788898a8b8c8d8e8f",
        ),
        ("AuthReply::Ok", Sample::AuthReply(AuthReply::Ok), "00"),
        (
            "AuthReply::Refused",
            Sample::AuthReply(AuthReply::Refused {
                reason: "bad proof".into(),
            }),
            "01096261642070726f6f66",
        ),
        // A request frame's body: the request with its trace id.
        (
            "Traced",
            Sample::Traced(Traced {
                trace: 0x0102_0304_0506_0708,
                msg: Request::Nsd(NsdRequest::Stats),
            }),
            "888e98a8c0e08081010005",
        ),
    ]
}
