//! The node's HTTP listener (`--http`, loopback by default): Prometheus
//! metrics on `/metrics`, the health findings of `weft health` as JSON on
//! `/health`, and the dashboard — `/` with its assets from the binary, fed
//! by `/api/overview` (cluster, file systems, nodes, NSDs, health) and
//! `/api/history` (rates once a second for ten minutes). Anything else is
//! 404; a malformed request closes only its own connection.

mod assets;
mod history;
mod view;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{NodeError, Result};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use weft_client::Cluster;
use weft_net::{Handler, Secret};

use crate::health::{gather, Gathered};
use crate::router::Node;
use history::History;

/// The default `--http` address.
pub const DEFAULT_HTTP: &str = "127.0.0.1:9191";
/// A cluster view is reused for this long (several dashboards, one look).
const FRESH: Duration = Duration::from_secs(1);
/// How long reaching the cluster may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How the listener reaches the cluster for its views.
pub enum Connect {
    /// Through this process's own roles (`weft up`).
    Local {
        addr: String,
        handler: Arc<dyn Handler>,
        secret: Secret,
    },
    /// Through any of these quorum nodes.
    Quorum { addrs: Vec<String>, secret: Secret },
}

/// What the listener shows of its node.
pub struct Source {
    pub node: Arc<Node>,
    /// This node's name and address, for the page's header.
    pub name: String,
    pub addr: String,
    pub connect: Connect,
}

struct App {
    source: Source,
    started: Instant,
    history: Arc<History>,
    cluster: tokio::sync::Mutex<Option<Arc<Cluster>>>,
    view: tokio::sync::Mutex<Option<(Instant, Arc<Gathered>)>>,
}

/// `--http` parsed: `None` for `none` (no listener).
pub fn parse(addr: &str) -> Result<Option<SocketAddr>> {
    if addr == "none" {
        return Ok(None);
    }
    addr.parse().map(Some).map_err(|_| {
        NodeError::invalid(format!(
            "--http {addr:?} is not an address:port (e.g. --http 127.0.0.1:9191, or --http none)"
        ))
    })
}

/// Binds the listener now, so a taken address fails the start.
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => NodeError::invalid(format!(
            "cannot serve metrics and the dashboard on {addr}: the address is in use \
             (another Weft node?) — give another with --http ADDR, or --http none"
        )),
        _ => NodeError::invalid(format!(
            "cannot serve metrics and the dashboard on {addr}: {e} — give another with --http ADDR"
        )),
    })?;
    l.set_nonblocking(true)
        .map_err(|source| NodeError::System {
            action: "make the HTTP listener non-blocking",
            source,
        })?;
    Ok(l)
}

/// Serves `listener` on `rt` until the runtime stops; returns its address.
pub fn start(
    listener: std::net::TcpListener,
    source: Source,
    rt: &tokio::runtime::Handle,
) -> Result<SocketAddr> {
    let local = listener.local_addr().map_err(|source| NodeError::System {
        action: "read the HTTP listener's address",
        source,
    })?;
    let listener = {
        let _in = rt.enter();
        tokio::net::TcpListener::from_std(listener).map_err(|source| NodeError::System {
            action: "serve the HTTP listener",
            source,
        })?
    };
    let history = Arc::new(History::default());
    rt.spawn(history.clone().run());
    let app = Arc::new(App {
        source,
        started: Instant::now(),
        history,
        cluster: tokio::sync::Mutex::new(None),
        view: tokio::sync::Mutex::new(None),
    });
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/api/overview", get(overview))
        .route("/api/history", get(samples))
        .route("/", get(index))
        .route("/assets/{file}", get(asset))
        .fallback(not_found)
        .with_state(app);
    rt.spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::error!(error = %e, "the HTTP listener stopped");
        }
    });
    Ok(local)
}

fn json(v: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(v) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn unavailable(why: String) -> Response {
    let body = serde_json::json!({ "error": why });
    (StatusCode::SERVICE_UNAVAILABLE, json(&body)).into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let node = app.source.node.clone();
    // Gauges read from the roles; statfs may touch the disks.
    let text = tokio::task::spawn_blocking(move || {
        if let Some(nsd) = node.nsd_server() {
            nsd.sample_metrics();
        }
        for meta in node.meta_servers() {
            meta.sample_metrics();
        }
        weft_metrics::global().encode()
    })
    .await;
    match text {
        Ok(t) => ([(header::CONTENT_TYPE, weft_metrics::CONTENT_TYPE)], t).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

impl App {
    async fn cluster(&self) -> Result<Arc<Cluster>> {
        let mut c = self.cluster.lock().await;
        if let Some(c) = &*c {
            return Ok(c.clone());
        }
        let name = "weft-http";
        let connected = match &self.source.connect {
            Connect::Local {
                addr,
                handler,
                secret,
            } => {
                let go = Cluster::connect_local(addr, handler.clone(), secret.clone(), name);
                tokio::time::timeout(CONNECT_TIMEOUT, go)
                    .await
                    .map_err(|_| NodeError::Unreachable {
                        who: "this node".into(),
                    })??
            }
            Connect::Quorum { addrs, secret } => {
                let mut last = NodeError::invalid("no quorum node is known");
                let mut found = None;
                for a in addrs {
                    let go = Cluster::connect(a, secret.clone(), name);
                    match tokio::time::timeout(CONNECT_TIMEOUT, go).await {
                        Ok(Ok(c)) => {
                            found = Some(c);
                            break;
                        }
                        Ok(Err(e)) => last = NodeError::from(e).during(format!("quorum node {a}")),
                        Err(_) => {
                            last = NodeError::Unreachable {
                                who: format!("quorum node {a}"),
                            }
                        }
                    }
                }
                found.ok_or(last)?
            }
        };
        *c = Some(connected.clone());
        Ok(connected)
    }

    async fn gathered(&self) -> Result<Arc<Gathered>> {
        let mut v = self.view.lock().await;
        if let Some((at, g)) = &*v {
            if at.elapsed() < FRESH {
                return Ok(g.clone());
            }
        }
        let cluster = self.cluster().await?;
        let g = Arc::new(gather(&cluster).await);
        *v = Some((Instant::now(), g.clone()));
        Ok(g)
    }
}

async fn health(State(app): State<Arc<App>>) -> Response {
    match app.gathered().await {
        Ok(g) => json(&g.findings()),
        Err(e) => unavailable(format!("cannot reach the cluster: {e}")),
    }
}

async fn overview(State(app): State<Arc<App>>) -> Response {
    match app.gathered().await {
        Ok(g) => {
            let me = view::Me {
                name: &app.source.name,
                addr: &app.source.addr,
                uptime_s: app.started.elapsed().as_secs(),
            };
            json(&view::overview(&g, &me))
        }
        Err(e) => unavailable(format!("cannot reach the cluster: {e}")),
    }
}

async fn samples(State(app): State<Arc<App>>) -> Response {
    let body = serde_json::json!({
        "interval_ms": history::INTERVAL.as_millis() as u64,
        "samples": app.history.samples(),
    });
    json(&body)
}

async fn index() -> Response {
    asset(Path("index.html".to_string())).await
}

async fn asset(Path(file): Path<String>) -> Response {
    match assets::get(&file) {
        Some((kind, bytes)) => ([(header::CONTENT_TYPE, kind)], bytes).into_response(),
        None => not_found().await,
    }
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "not found: this node serves /, /metrics, /health, /api/overview and /api/history\n",
    )
        .into_response()
}
