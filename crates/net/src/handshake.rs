//! Frame I/O on a stream and the connection handshake.
//!
//! ```text
//! client → Hello{versions, nonce_c}
//! server → Accept{version, nonce_s, proof_s = HMAC(secret, "weft-server" | nonce_c | nonce_s)}
//! client → Auth{proof_c = HMAC(secret, "weft-client" | nonce_s | nonce_c)}
//! server → AuthReply::Ok
//! ```

use bytes::{Bytes, BytesMut};
use hmac::{Hmac, Mac};
use serde::{de::DeserializeOwned, Serialize};
use sha2::Sha256;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use weft_proto::frame::{decode_body, encode_frame};
use weft_proto::iobuf::IoBuf;
use weft_proto::msg::{Auth, AuthReply, Hello, HelloReply, JoinClaim};
use weft_proto::{FrameHeader, FrameKind, ProtoError, HEADER_LEN, WIRE_VERSION};

use crate::{NetError, Secret};

/// One frame as read from the wire, checksums verified.
pub(crate) struct RawFrame {
    pub header: FrameHeader,
    pub body: Bytes,
    pub data: Bytes,
}

/// Reads one frame; `Ok(None)` at a clean end of stream before a header.
pub(crate) async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    addr: &str,
) -> Result<Option<RawFrame>, NetError> {
    let mut hb = [0u8; HEADER_LEN];
    match r.read_exact(&mut hb).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(io(addr, e)),
    }
    let header = FrameHeader::decode(&hb).map_err(|e| proto(addr, e))?;
    if header.version != WIRE_VERSION && header.kind != FrameKind::Handshake {
        return Err(proto(
            addr,
            ProtoError::VersionMismatch {
                peer: header.version,
                ours: WIRE_VERSION,
            },
        ));
    }
    let (body_len, data_len) = (header.body_len as usize, header.data_len as usize);
    if data_len < POOLED_DATA_MIN {
        // Filled by reads straight into spare capacity: no memset of large frames.
        let mut buf = BytesMut::with_capacity(body_len + data_len);
        read_into(r, &mut buf, body_len + data_len, addr).await?;
        let mut body = buf.freeze();
        let data = body.split_off(body_len);
        header.verify(&body, &data).map_err(|e| proto(addr, e))?;
        return Ok(Some(RawFrame { header, body, data }));
    }
    // A block's bytes go into a recycled, aligned buffer: no fresh pages
    // to fault in, and an NSD writes a whole block from it as it is.
    let mut buf = BytesMut::with_capacity(body_len);
    read_into(r, &mut buf, body_len, addr).await?;
    let body = buf.freeze();
    let mut pooled = IoBuf::take(data_len);
    r.read_exact(pooled.as_mut_slice())
        .await
        .map_err(|e| io(addr, e))?;
    let data = pooled.into_bytes();
    header.verify(&body, &data).map_err(|e| proto(addr, e))?;
    Ok(Some(RawFrame { header, body, data }))
}

/// Bulk data of at least this many bytes is read into a recycled buffer.
const POOLED_DATA_MIN: usize = 64 << 10;

/// Reads `len` bytes into the spare capacity of `buf`.
async fn read_into<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    len: usize,
    addr: &str,
) -> Result<(), NetError> {
    while buf.len() < len {
        let n = (&mut *r)
            .take((len - buf.len()) as u64)
            .read_buf(buf)
            .await
            .map_err(|e| io(addr, e))?;
        if n == 0 {
            return Err(io(addr, std::io::ErrorKind::UnexpectedEof.into()));
        }
    }
    Ok(())
}

pub(crate) async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    kind: FrameKind,
    id: u64,
    msg: &T,
    data: &[u8],
    addr: &str,
) -> Result<(), NetError> {
    let head = encode_frame(kind, id, msg, data).map_err(|e| proto(addr, e))?;
    w.write_all(&head).await.map_err(|e| io(addr, e))?;
    if !data.is_empty() {
        w.write_all(data).await.map_err(|e| io(addr, e))?;
    }
    Ok(())
}

pub(crate) fn decode<T: DeserializeOwned>(f: &RawFrame, addr: &str) -> Result<T, NetError> {
    decode_body(&f.body).map_err(|e| proto(addr, e))
}

pub(crate) fn io(addr: &str, source: std::io::Error) -> NetError {
    NetError::Io {
        addr: addr.to_string(),
        source,
    }
}

pub(crate) fn proto(addr: &str, source: ProtoError) -> NetError {
    NetError::Proto {
        addr: addr.to_string(),
        source,
    }
}

fn proof(secret: &Secret, label: &[u8], a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match <Hmac<Sha256> as Mac>::new_from_slice(&secret.0) {
        Ok(m) => m,
        Err(_) => return [0; 32],
    };
    mac.update(label);
    mac.update(a);
    mac.update(b);
    mac.finalize().into_bytes().into()
}

fn verify_proof(
    secret: &Secret,
    label: &[u8],
    a: &[u8; 32],
    b: &[u8; 32],
    given: &[u8; 32],
) -> bool {
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(&secret.0) else {
        return false;
    };
    mac.update(label);
    mac.update(a);
    mac.update(b);
    mac.verify_slice(given).is_ok()
}

async fn expect_handshake<R: AsyncRead + Unpin>(
    r: &mut R,
    addr: &str,
) -> Result<RawFrame, NetError> {
    match read_frame(r, addr).await? {
        Some(f) if f.header.kind == FrameKind::Handshake => Ok(f),
        Some(_) => Err(NetError::Handshake {
            addr: addr.into(),
            reason: "peer sent a request before completing the handshake".into(),
        }),
        None => Err(NetError::Closed {
            addr: addr.into(),
            reason: "closed during handshake".into(),
        }),
    }
}

/// Client side of the handshake.
///
/// With `join`, `secret` is the join key a token carries (see
/// [`Secret::join_key`]) and the server derives the same key.
pub(crate) async fn client<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    secret: &Secret,
    name: &str,
    addr: &str,
    join: Option<&JoinClaim>,
    client_id: u64,
) -> Result<(), NetError> {
    let nonce_c: [u8; 32] = rand::random();
    let hello = Hello {
        min_version: WIRE_VERSION,
        max_version: WIRE_VERSION,
        peer_name: name.to_string(),
        nonce: nonce_c,
        client_id,
        join: join.cloned(),
    };
    write_frame(s, FrameKind::Handshake, 0, &hello, &[], addr).await?;
    let reply: HelloReply = decode(&expect_handshake(s, addr).await?, addr)?;
    let nonce_s = match reply {
        HelloReply::Reject { reason } => {
            return Err(NetError::Handshake {
                addr: addr.into(),
                reason,
            })
        }
        HelloReply::Accept {
            nonce, proof: p, ..
        } => {
            if !verify_proof(secret, b"weft-server", &nonce_c, &nonce, &p) {
                return Err(NetError::Auth { addr: addr.into() });
            }
            nonce
        }
    };
    let auth = Auth {
        proof: client_proof(secret, &nonce_s, &nonce_c, client_id),
    };
    write_frame(s, FrameKind::Handshake, 0, &auth, &[], addr).await?;
    match decode::<AuthReply>(&expect_handshake(s, addr).await?, addr)? {
        AuthReply::Ok => Ok(()),
        AuthReply::Refused { reason } => Err(NetError::Handshake {
            addr: addr.into(),
            reason,
        }),
    }
}

/// Who the server authenticated: the peer's name, the client it speaks for,
/// and for a node joining with a token, the claim it proved.
pub(crate) struct Authenticated {
    pub name: String,
    pub client_id: u64,
    pub join: Option<JoinClaim>,
}

/// The client's proof: over both nonces and the client id it speaks for.
fn client_proof(
    secret: &Secret,
    nonce_s: &[u8; 32],
    nonce_c: &[u8; 32],
    client_id: u64,
) -> [u8; 32] {
    mac(
        &secret.0,
        &[b"weft-client", nonce_s, nonce_c, &client_id.to_le_bytes()],
    )
}

/// Server side of the handshake.
pub(crate) async fn server<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    secret: &Secret,
    addr: &str,
) -> Result<Authenticated, NetError> {
    let hello: Hello = decode(&expect_handshake(s, addr).await?, addr)?;
    let join_key;
    let secret = match &hello.join {
        None => secret,
        Some(claim) => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(u64::MAX);
            if claim.expires < now {
                let reason = format!(
                    "the join token expired {} s ago: make a new one with `weft cluster token` on a quorum node",
                    now - claim.expires
                );
                let reply = HelloReply::Reject {
                    reason: reason.clone(),
                };
                let _ = write_frame(s, FrameKind::Handshake, 0, &reply, &[], addr).await;
                return Err(NetError::Handshake {
                    addr: addr.into(),
                    reason,
                });
            }
            join_key = secret.join_key(claim);
            &join_key
        }
    };
    if hello.min_version > WIRE_VERSION || hello.max_version < WIRE_VERSION {
        let reason = format!(
            "this node speaks wire version {WIRE_VERSION}, the peer {}..={}: upgrade the older node",
            hello.min_version, hello.max_version
        );
        let reply = HelloReply::Reject {
            reason: reason.clone(),
        };
        // Best effort: the peer learns why before the connection closes.
        let _ = write_frame(s, FrameKind::Handshake, 0, &reply, &[], addr).await;
        return Err(NetError::Handshake {
            addr: addr.into(),
            reason,
        });
    }
    let nonce_s: [u8; 32] = rand::random();
    let reply = HelloReply::Accept {
        version: WIRE_VERSION,
        nonce: nonce_s,
        proof: proof(secret, b"weft-server", &hello.nonce, &nonce_s),
    };
    write_frame(s, FrameKind::Handshake, 0, &reply, &[], addr).await?;
    let auth: Auth = decode(&expect_handshake(s, addr).await?, addr)?;
    let id = hello.client_id.to_le_bytes();
    let parts: [&[u8]; 4] = [b"weft-client", &nonce_s, &hello.nonce, &id];
    if !verify_mac(&secret.0, &parts, &auth.proof) {
        let reason = if hello.join.is_some() {
            "authentication failed: the join token is not one of this cluster's"
        } else {
            "authentication failed: the cluster secret does not match"
        };
        let reply = AuthReply::Refused {
            reason: reason.into(),
        };
        let _ = write_frame(s, FrameKind::Handshake, 0, &reply, &[], addr).await;
        return Err(NetError::Auth { addr: addr.into() });
    }
    write_frame(s, FrameKind::Handshake, 0, &AuthReply::Ok, &[], addr).await?;
    Ok(Authenticated {
        name: hello.peer_name,
        client_id: hello.client_id,
        join: hello.join,
    })
}

/// Whether `given` is the HMAC-SHA256 of `parts` under `key` (constant time).
fn verify_mac(key: &[u8; 32], parts: &[&[u8]], given: &[u8; 32]) -> bool {
    let Ok(mut m) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return false;
    };
    for p in parts {
        m.update(p);
    }
    m.verify_slice(given).is_ok()
}

/// HMAC-SHA256 of `parts` under `key`.
pub(crate) fn mac(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let Ok(mut m) = <Hmac<Sha256> as Mac>::new_from_slice(key) else {
        return [0; 32];
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}
