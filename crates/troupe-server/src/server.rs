//! The server: its router, and serving it until shutdown.

use crate::auth::{Auth, require_token};
use crate::config::ServerConfig;
use crate::error::{ApiError, ServerError};
use crate::hub::RunHub;
use crate::launcher::Launcher;
use crate::loopback::{LocalOnly, local_only};
use crate::media::json_bodies_only;
use crate::state::AppState;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// An HTTP server over a [`Launcher`]: the native API, and whatever routes are merged in.
pub struct Server {
    state: AppState,
    extra: Vec<Router<AppState>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("config", &self.state.config).finish_non_exhaustive()
    }
}

impl Server {
    /// A server running what `launcher` launches, set up by `config`.
    pub fn new(config: ServerConfig, launcher: Arc<dyn Launcher>) -> Self {
        let hub = Arc::new(RunHub::new(config.retained_runs));
        Server {
            state: AppState {
                hub,
                launcher,
                config: Arc::new(config),
                closing: CancellationToken::new(),
                stored: None,
                push: Arc::default(),
                starts: Arc::default(),
            },
            extra: Vec::new(),
        }
    }

    /// Answers for every run of `store` too: a run another process holds, or one that
    /// ended before this server started, is looked up (and signalled) there.
    pub fn with_store(mut self, store: Arc<dyn troupe_store::Store>) -> Self {
        self.state.stored = Some(crate::stored::StoredRuns::new(store));
        self
    }

    /// The runs it holds.
    pub fn hub(&self) -> &Arc<RunHub> {
        &self.state.hub
    }

    /// The state its routes share, for routes added with [`Server::merge`].
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Adds `routes` (behind the same authentication and limits).
    pub fn merge(mut self, routes: Router<AppState>) -> Self {
        self.extra.push(routes);
        self
    }

    /// The whole router.
    pub fn router(&self) -> Result<Router, ServerError> {
        let config = &self.state.config;
        let mut app = Router::new()
            .route("/healthz", get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }))
            .route("/openapi.json", get(|| async { axum::Json(crate::openapi::document()) }))
            .route("/metrics", get(metrics))
            .merge(crate::native::routes())
            .merge(crate::console::routes())
            .merge(crate::agui::routes())
            .merge(crate::a2a::routes())
            .merge(crate::openai::routes());
        for routes in &self.extra {
            app = app.merge(routes.clone());
        }
        let mut app = app
            .fallback(|| async {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint").into_response()
            })
            .with_state(self.state.clone())
            .layer(axum::middleware::from_fn(json_bodies_only))
            .layer(axum::middleware::from_fn_with_state(Auth::new(&config.tokens), require_token));
        if config.tokens.is_empty() {
            app = app.layer(axum::middleware::from_fn_with_state(LocalOnly::new(&config.cors_origins), local_only));
        }
        let mut app = app
            .layer(DefaultBodyLimit::max(config.body_limit))
            .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(config.body_timeout));
        if !config.cors_origins.is_empty() {
            app = app.layer(cors(&config.cors_origins)?);
        }
        Ok(app)
    }

    /// Serves on `listener` until `shutdown` is cancelled. Then open streams end, active
    /// runs get [`ServerConfig::shutdown_grace`] to finish, and those still going are
    /// cancelled or — when [`ServerConfig::cancel_on_shutdown`] is off because they are
    /// recorded in a store — left to resume on the next start. Recorded runs waiting for a
    /// person do not wait out the grace: they pause at once, recorded, with their leases
    /// given back.
    pub async fn serve(self, listener: TcpListener, shutdown: CancellationToken) -> Result<(), ServerError> {
        let addr = listener.local_addr()?;
        if !self.state.config.allows(addr) {
            return Err(ServerError::UnprotectedAddress { addr });
        }
        let router = self.router()?;
        let closing = self.state.closing.clone();
        tracing::info!(%addr, auth = %self.state.config.auth_summary(), "serving");
        crate::connections::serve(listener, router, &self.state.config, shutdown, closing).await;
        if !self.state.config.cancel_on_shutdown {
            // Recorded runs waiting for a person need no process: they pause now, leases
            // given back, for the next server to adopt; only working runs get the grace.
            let suspended = self.state.hub.suspend_waiting();
            if suspended > 0 {
                tracing::info!(runs = suspended, "paused the runs waiting for a person");
            }
        }
        let left = self.state.hub.drain(self.state.config.shutdown_grace).await;
        if left > 0 {
            if self.state.config.cancel_on_shutdown {
                tracing::warn!(runs = left, "cancelling the runs still active at shutdown");
                self.state.hub.cancel_all();
                self.state.hub.drain(self.state.config.shutdown_grace).await;
            } else {
                tracing::info!(runs = left, "leaving the active runs to resume on the next start");
            }
        }
        Ok(())
    }
}

/// The listen backlog [`bind`] asks for (the kernel caps it at `net.core.somaxconn`).
pub const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `addr` with a backlog of [`LISTEN_BACKLOG`]: the default of 128 overflows
/// when hundreds of clients connect at once, and each overflowed client waits a second
/// for the kernel's SYN retry.
pub fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// `GET /metrics`: the Prometheus text of every run this server has held.
async fn metrics(axum::extract::State(state): axum::extract::State<AppState>) -> axum::response::Response {
    let metrics = state.hub.metrics();
    metrics.set_active_runs(state.hub.active() as u64);
    let text = troupe_telemetry::PrometheusExporter::new().render(&metrics.snapshot());
    ([(header::CONTENT_TYPE, troupe_telemetry::PROMETHEUS_CONTENT_TYPE)], text).into_response()
}

fn cors(origins: &[String]) -> Result<CorsLayer, ServerError> {
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        let values = origins
            .iter()
            .map(|o| HeaderValue::from_str(o).map_err(|_| ServerError::BadCorsOrigin { origin: o.clone() }))
            .collect::<Result<Vec<_>, _>>()?;
        AllowOrigin::list(values)
    };
    Ok(CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::HeaderName::from_static("last-event-id"),
            header::HeaderName::from_static(crate::native::IDEMPOTENCY_KEY),
        ])
        .expose_headers([
            header::HeaderName::from_static("x-troupe-run-id"),
            header::HeaderName::from_static(crate::native::IDEMPOTENT_REPLAYED),
        ]))
}
