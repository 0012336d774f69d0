//! `troupe console`: the web console on a store, serving no agent: its runs listed and
//! shown (a run another process holds is read from the store), and the calls they wait
//! for decided, stored for whichever process holds the run.

use crate::Failure;
use crate::serve::{console_line, stop_on_signals};
use crate::store::StoreArgs;
use anyhow::anyhow;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use troupe::server::{AgentLauncher, Launcher, Server, ServerConfig, Token};

/// Arguments of `troupe console`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConsoleArgs {
    /// The address to listen on; without a token (TROUPE_SERVER_TOKEN) only a loopback address is allowed.
    #[arg(long, default_value = troupe::server::DEFAULT_ADDR, value_name = "ADDR")]
    addr: SocketAddr,
    /// The store whose runs are shown.
    #[command(flatten)]
    place: StoreArgs,
}

/// Serves the console on the store until Ctrl-C or SIGTERM.
pub(crate) async fn console(args: ConsoleArgs) -> Result<(), Failure> {
    let tokens = std::env::var(troupe::server::TOKEN_ENV).map(|v| Token::list(&v)).unwrap_or_default();
    let config = ServerConfig { tokens, ..ServerConfig::default() };
    if !config.allows(args.addr) {
        return Err(Failure::Usage(troupe::server::ServerError::UnprotectedAddress { addr: args.addr }.into()));
    }
    let store = args.place.open_existing().await?;
    let launcher: Arc<dyn Launcher> = Arc::new(AgentLauncher::new());
    let server = Server::new(config, launcher).with_store(store);
    let listener =
        troupe::server::bind(args.addr).map_err(|e| Failure::Usage(anyhow!("cannot listen on {}: {e}", args.addr)))?;
    let addr = listener.local_addr().map_err(|e| Failure::Usage(e.into()))?;
    diagln!("troupe console on http://{addr} (the runs of the store; no agent is served)");
    diagln!("{}", console_line(addr, &server.state().config.tokens));
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
    server.serve(listener, shutdown).await.map_err(|e| Failure::Run(e.into()))?;
    diagln!("troupe console stopped");
    Ok(())
}
