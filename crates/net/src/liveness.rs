//! How a connection notices that its peer is gone, in seconds rather than
//! at the request timeout.
//!
//! A cut link or a dead host answers nothing: a request sent on it would
//! wait out [`crate::REQUEST_TIMEOUT`] (60 s), and a chain write or a
//! client's failover with it. Two kernel timers on every connection, both
//! ends, close it sooner:
//!
//! - **`TCP_USER_TIMEOUT`**: bytes sent but not acknowledged by the peer's
//!   kernel for [`UNACKED`] close the connection. The peer's kernel
//!   acknowledges a request as soon as it arrives, however long the server
//!   then takes to answer, so a slow request (a large fsync) is never cut;
//!   only a peer that receives nothing is — or one that reads nothing: a
//!   server stops reading a connection with `MAX_IN_FLIGHT` requests on it,
//!   and if none of them ends for [`UNACKED`] its window stays shut and the
//!   connection closes too (its calls fail and are resent elsewhere, as at
//!   the request timeout, only sooner).
//! - **Keepalive**: an idle connection is probed after [`IDLE`], every
//!   [`PROBE_INTERVAL`], and closed after [`PROBES`] unanswered probes.
//!
//! A closed connection fails its requests at once (`NetError::Closed`), so
//! the caller reports the disk or node and the next call opens a new
//! connection.

use std::time::Duration;

use socket2::{SockRef, TcpKeepalive};
use tokio::net::TcpStream;
use tracing::debug;

/// Longest time sent bytes may stay unacknowledged.
pub const UNACKED: Duration = Duration::from_secs(15);
/// Idle time before the first keepalive probe.
pub const IDLE: Duration = Duration::from_secs(10);
pub const PROBE_INTERVAL: Duration = Duration::from_secs(2);
pub const PROBES: u32 = 3;

/// Sets the timers (and `TCP_NODELAY`: frames go out as they are written).
/// A socket that refuses one keeps the defaults; that is logged, not fatal.
pub(crate) fn tune(stream: &TcpStream, addr: &str) {
    if let Err(e) = stream.set_nodelay(true) {
        debug!(addr, error = %e, "cannot set TCP_NODELAY");
    }
    let sock = SockRef::from(stream);
    let keepalive = TcpKeepalive::new()
        .with_time(IDLE)
        .with_interval(PROBE_INTERVAL)
        .with_retries(PROBES);
    if let Err(e) = sock.set_tcp_keepalive(&keepalive) {
        debug!(addr, error = %e, "cannot set TCP keepalive");
    }
    if let Err(e) = sock.set_tcp_user_timeout(Some(UNACKED)) {
        debug!(addr, error = %e, "cannot set TCP_USER_TIMEOUT");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn both_timers_are_set() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (client, (server, _)) = (client.unwrap(), server.unwrap());
        for s in [&client, &server] {
            tune(s, "test");
            let sock = SockRef::from(s);
            assert_eq!(sock.tcp_user_timeout().unwrap(), Some(UNACKED));
            assert!(sock.keepalive().unwrap());
            assert_eq!(sock.tcp_keepalive_time().unwrap(), IDLE);
            assert_eq!(sock.tcp_keepalive_interval().unwrap(), PROBE_INTERVAL);
            assert_eq!(sock.tcp_keepalive_retries().unwrap(), PROBES);
            assert!(s.nodelay().unwrap());
        }
    }
}
