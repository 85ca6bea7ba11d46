//! End-to-end transport tests over real TCP on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weft_net::{serve, Handler, NetError, Peer, Secret};
use weft_proto::msg::{MetaRequest, NsdRequest};
use weft_proto::types::ChunkId;
use weft_proto::{ErrorKind, RemoteError, Request, Response};

/// Echoes chunk data back for nsd writes; refuses everything else (the
/// transport conformance suite's handler).
fn echo() -> Arc<dyn Handler> {
    weft_net::conformance::suite_handler()
}

async fn start(secret: Secret) -> String {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(serve(l, secret, echo()));
    addr
}

fn write(offset: u32) -> Request {
    Request::Nsd(NsdRequest::Write {
        nsd: 1,
        chunk: ChunkId {
            fs: 1,
            ino: 2,
            gen: 3,
            block: 4,
        },
        offset,
        sync: false,
        direct: false,
        chain_ver: 0,
        chain: u32::MAX,
        forward: Vec::new(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_in_flight_with_bulk_data() {
    let secret = Secret::generate();
    let addr = start(secret.clone()).await;
    let peer = Arc::new(Peer::new(&addr, secret, "test", 2));
    let mut tasks = Vec::new();
    for i in 0..64u32 {
        let peer = peer.clone();
        tasks.push(tokio::spawn(async move {
            let data = Bytes::from(vec![(i % 251) as u8; (i as usize + 1) * 65_537]);
            let (resp, back) = peer.call(write(i), data.clone()).await.unwrap();
            assert_eq!(
                resp,
                Response::ChunkRead {
                    chunk_len: i,
                    present: true
                }
            );
            assert_eq!(back, data);
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let err = peer
        .call(
            Request::Meta {
                fs: 1,
                shard: 0,
                req: MetaRequest::Counters,
                cred: None,
            },
            Bytes::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        NetError::Remote(RemoteError {
            kind: ErrorKind::Busy,
            ..
        })
    ));
}

#[tokio::test]
async fn wrong_secret_is_refused() {
    let addr = start(Secret::generate()).await;
    let peer = Peer::new(&addr, Secret::generate(), "intruder", 1);
    let err = peer.call(write(0), Bytes::new()).await.unwrap_err();
    assert!(matches!(err, NetError::Auth { .. }), "{err}");
}

#[tokio::test]
async fn garbage_closes_the_connection_and_the_server_lives_on() {
    let secret = Secret::generate();
    let addr = start(secret.clone()).await;
    for junk in [
        vec![0u8; 100],
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        vec![0xff; 36],
    ] {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(&junk).await.unwrap();
        s.shutdown().await.unwrap();
        let mut buf = Vec::new();
        // The server closes without answering.
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut buf))
            .await
            .unwrap()
            .unwrap_or(0);
        assert_eq!(n, 0);
    }
    let peer = Peer::new(&addr, secret, "test", 1);
    assert!(peer.call(write(7), Bytes::from_static(b"x")).await.is_ok());
}

#[tokio::test]
async fn no_server_is_a_connect_error() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    drop(l);
    let peer = Peer::new(&addr, Secret::generate(), "test", 1);
    let err = peer.call(write(0), Bytes::new()).await.unwrap_err();
    assert!(matches!(err, NetError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn reconnects_after_the_server_restarts() {
    let secret = Secret::generate();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let server = tokio::spawn(serve(l, secret.clone(), echo()));
    let peer = Peer::new(&addr, secret.clone(), "test", 1);
    peer.call(write(1), Bytes::new()).await.unwrap();
    server.abort();
    let _ = server.await;
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(peer.call(write(1), Bytes::new()).await.is_err());
    let l = TcpListener::bind(&addr).await.unwrap();
    tokio::spawn(serve(l, secret, echo()));
    peer.call(write(2), Bytes::new()).await.unwrap();
}

/// Answers only after the test lets it go.
struct Hung(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);

impl Handler for Hung {
    fn handle(&self, _req: Request, _data: Bytes) -> (Response, Bytes) {
        if let Ok(rx) = self.0.lock() {
            let _ = rx.recv_timeout(std::time::Duration::from_secs(10));
        }
        (Response::Unit, Bytes::new())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_is_a_timeout_not_a_wait_for_ever() {
    let (release, rx) = std::sync::mpsc::channel();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let secret = Secret::generate();
    tokio::spawn(serve(
        l,
        secret.clone(),
        Arc::new(Hung(std::sync::Mutex::new(rx))),
    ));
    let pool = weft_net::Pool::new(secret, "t", 1)
        .with_request_timeout(std::time::Duration::from_millis(300));
    let peer = pool.peer(&addr);
    let e = peer.call(write(0), Bytes::new()).await.unwrap_err();
    assert!(matches!(e, NetError::Timeout { .. }), "{e}");
    assert!(e.is_retryable());
    release.send(()).unwrap();
    // The connection is still usable for later requests.
    release.send(()).unwrap();
    assert!(peer.call(write(0), Bytes::new()).await.is_ok());
}

/// A TCP relay in front of `to` whose connections can be stalled: bytes
/// on a stalled connection are read and dropped, as a cut link does; new
/// connections flow. Answers its address.
async fn stalling_relay(
    to: String,
    stalled: Arc<std::sync::atomic::AtomicBool>,
) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = l.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let server = TcpStream::connect(&to).await.unwrap();
            // Each connection stalls from the moment the switch is set
            // while it is open, and stays stalled.
            let cut = Arc::new(AtomicBool::new(false));
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            for (mut r, mut w) in [(cr, sw), (sr, cw)].map(|(r, w)| {
                (
                    Box::new(r) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                    Box::new(w) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                )
            }) {
                let (cut, stalled) = (cut.clone(), stalled.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    loop {
                        let n = match r.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        if stalled.load(Ordering::SeqCst) {
                            cut.store(true, Ordering::SeqCst);
                        }
                        if cut.load(Ordering::SeqCst) {
                            continue;
                        }
                        if w.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    });
    (addr, accepted)
}

/// A request that timed out on a stalled connection (a cut link) leaves
/// that connection behind: later requests go on a new one, and answer as
/// soon as the path works again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_timed_out_is_not_used_again() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let secret = Secret::generate();
    let server = start(secret.clone()).await;
    let stalled = Arc::new(AtomicBool::new(false));
    let (relay, accepted) = stalling_relay(server, stalled.clone()).await;
    let pool = weft_net::Pool::new(secret, "t", 1)
        .with_request_timeout(std::time::Duration::from_millis(500));
    let peer = pool.peer(&relay);
    peer.call(write(0), Bytes::new()).await.unwrap();
    stalled.store(true, Ordering::SeqCst);
    let e = peer.call(write(1), Bytes::new()).await.unwrap_err();
    assert!(matches!(e, NetError::Timeout { .. }), "{e}");
    // The link heals; the old connection stays stalled.
    stalled.store(false, Ordering::SeqCst);
    peer.call(write(2), Bytes::new())
        .await
        .unwrap_or_else(|e| panic!("the call after the heal: {e}"));
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "a second connection");
}

#[tokio::test]
async fn a_node_of_another_wire_version_is_refused_by_name() {
    use weft_proto::frame::{decode_frame, encode_frame};
    use weft_proto::msg::{Hello, HelloReply};
    use weft_proto::{FrameHeader, FrameKind, WIRE_VERSION};
    let secret = Secret::generate();
    let addr = start(secret.clone()).await;
    let old = WIRE_VERSION - 1;
    let hello = Hello {
        min_version: old,
        max_version: old,
        peer_name: "old-node".into(),
        nonce: [1; 32],
        client_id: 1,
        join: None,
    };
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&encode_frame(FrameKind::Handshake, 0, &hello, &[]).unwrap())
        .await
        .unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(5), s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let (_, reply, _): (FrameHeader, HelloReply, &[u8]) = decode_frame(&buf).unwrap();
    match reply {
        HelloReply::Reject { reason } => {
            assert!(
                reason.contains(&format!("wire version {WIRE_VERSION}"))
                    && reason.contains(&format!("{old}..={old}"))
                    && reason.contains("upgrade"),
                "{reason}"
            );
        }
        other => panic!("accepted a node of wire version {old}: {other:?}"),
    }
}

/// A network in memory: addresses to handlers, nothing else reachable.
struct Sim(std::collections::HashMap<String, Arc<dyn Handler>>);

impl weft_net::Transport for Sim {
    fn call<'a>(
        &'a self,
        addr: &'a str,
        req: Request,
        data: Bytes,
    ) -> weft_net::BoxFuture<'a, Result<(Response, Bytes), NetError>> {
        Box::pin(async move {
            match self.0.get(addr) {
                Some(h) => match h.handle(req, data) {
                    (Response::Error(e), _) => Err(NetError::Remote(e)),
                    ok => Ok(ok),
                },
                None => Err(NetError::Closed {
                    addr: addr.to_string(),
                    reason: "no such node in the simulated network".into(),
                }),
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_passes_the_conformance_suite() {
    use weft_net::conformance::{run_all, suite_handler};
    // TCP.
    let secret = Secret::generate();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap().to_string();
    tokio::spawn(serve(l, secret.clone(), suite_handler()));
    let free = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let unserved = free.local_addr().unwrap().to_string();
    drop(free);
    let tcp = weft_net::Pool::new(secret.clone(), "suite", 2);
    run_all(&tcp, &addr, &unserved).await.unwrap();
    // A node's own roles, without the network.
    let local = weft_net::Pool::new(secret.clone(), "suite", 2);
    local.set_local("self:1", suite_handler());
    run_all(&local, "self:1", &unserved).await.unwrap();
    // A simulated network handed to a pool: the pool's peers use it.
    let mut nodes = std::collections::HashMap::new();
    nodes.insert("sim:1".to_string(), suite_handler());
    let sim = Arc::new(Sim(nodes));
    run_all(sim.as_ref(), "sim:1", "sim:2").await.unwrap();
    let through = weft_net::Pool::new(secret, "suite", 1).with_transport(sim);
    run_all(&through, "sim:1", "sim:2").await.unwrap();
}
