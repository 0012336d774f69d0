//! `troupe worker`: claims queued runs from the store and runs them with the coding
//! agent's tools in the workspace, until interrupted (or, with `--once`, until the queue
//! is empty).

use crate::Failure;
use crate::setup;
use crate::store::StoreArgs;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::Context;
use troupe::durable::{QueueWorker, fire_due};
use troupe::runtime::durable::{Durability, unique_owner};
use troupe::store::{QueueEntry, Store, now_millis};

/// Where the runtime's worker logs its claims and ends.
const WORKER_TARGET: &str = troupe::durable::queue::TRACING_TARGET;

/// Arguments of `troupe worker`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Runs are taken from the store's queue: `troupe run --detach`, `troupe team run --detach` \
(a team's run: its team and agent files are read again from where they were when it was queued), schedules, and paused runs \
whose decision was stored (`troupe runs approve --no-resume`). Any number of workers, on any number of machines, \
may share one store (PostgreSQL for several machines); a run whose worker dies is taken over once its lease \
lapses. Every worker runs the runs' tools in its own --workspace, with the providers of ./troupe.toml.\n\n\
Ctrl-C or SIGTERM stops claiming; the runs in hand finish first (a second Ctrl-C quits at once). Claims and ends \
are logged on stderr: `claimed RUN`, `ended RUN STATUS`.")]
pub(crate) struct WorkerArgs {
    #[command(flatten)]
    place: StoreArgs,
    #[command(flatten)]
    sandbox: setup::SandboxArgs,
    /// The most runs at once.
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// How long a claimed run's lease lasts without a heartbeat, in seconds (fractions
    /// allowed): a run whose worker died is taken over that long after its last heartbeat.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_seconds)]
    lease_ttl: Duration,
    /// How often an idle worker looks at the queue, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    poll_ms: u64,
    /// Run what is queued (and the schedules due now), then exit once the queue is empty.
    #[arg(long)]
    once: bool,
}

/// A positive, finite number of seconds.
pub(crate) fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds = text.trim().parse::<f64>().ok().filter(|seconds| *seconds > 0.0);
    // `try_`: more seconds than a `Duration` holds (`1e300`), or not a number, is an
    // error, not a panic.
    seconds
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("`{text}` is not a positive number of seconds (such as 30 or 0.5)"))
}

/// Runs `troupe worker`.
pub(crate) async fn run(args: WorkerArgs) -> Result<(), Failure> {
    let config = crate::load_config()?;
    let providers = crate::providers(&config)?;
    let workspace = args.place.workspace()?;
    let store = args.place.open().await?;
    let owner = unique_owner("worker");
    let durability = Durability::new(Arc::clone(&store)).with_lease_ttl(args.lease_ttl).with_owner(owner.clone());
    // Nobody reads a worker's runs live: their events need not be kept.
    let runner =
        setup::runner(&workspace, providers, &args.sandbox.choice()?)?.with_store(durability).with_events_kept(false);
    let poll = Duration::from_millis(args.poll_ms);
    let teams = crate::team::QueuedTeams {
        store: Arc::clone(&store),
        lease_ttl: args.lease_ttl,
        sandbox: args.sandbox.clone(),
    };
    let mut worker = QueueWorker::new(runner)
        .map_err(|e| Failure::Usage(e.into()))?
        .with_concurrency(usize::try_from(args.concurrency).unwrap_or(1))
        .with_idle_poll(poll)
        .with_claimed_runs(Arc::new(teams));
    let shutdown = CancellationToken::new();
    stop_on_signals(shutdown.clone());
    let mut fired = 0;
    if args.once {
        // The schedules due now fire first, so their runs are in the queue this worker empties.
        fired = fire_due(store.as_ref(), now_millis()).await.map_err(|e| Failure::Run(e.into()))?.len();
        worker = worker.with_schedules(false);
        tokio::spawn(stop_when_drained(Arc::clone(&store), shutdown.clone(), poll));
    }
    diagln!("worker {owner}: store {}, up to {} runs at once", store.info().location, args.concurrency);
    let report = worker.run_until(shutdown).await.map_err(|e| Failure::Run(e.into()))?;
    let fired = u64::try_from(fired).unwrap_or(u64::MAX) + u64::from(report.fired);
    diagln!("worker stopped: ran {} (completed {}), fired {fired} schedule ticks", report.runs, report.completed);
    Ok(())
}

/// Cancels `shutdown` once no run in the queue can be claimed: everything queued has
/// been claimed (and the worker finishes what it holds before it returns).
async fn stop_when_drained(store: Arc<dyn Store>, shutdown: CancellationToken, poll: Duration) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(poll) => {}
        }
        match store.queue().await {
            Ok(queue) if !queue.iter().any(|entry| claimable(entry, now_millis())) => {
                shutdown.cancel();
                return;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot read the run queue"),
        }
    }
}

/// Whether a worker could claim `entry` at `now`.
fn claimable(entry: &QueueEntry, now: i64) -> bool {
    entry.available_at <= now && (entry.owner.is_none() || entry.expires_at.is_none_or(|at| at <= now))
}

/// Stops claiming on Ctrl-C or SIGTERM; a second Ctrl-C quits at once.
fn stop_on_signals(shutdown: CancellationToken) {
    let stop = move |what: &str| {
        if !shutdown.is_cancelled() {
            diagln!("{what}: claiming no more runs; the runs in hand finish first");
            shutdown.cancel();
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(mut interrupts), Ok(mut terminations)) => {
                tokio::spawn(async move {
                    let mut interrupted = false;
                    loop {
                        tokio::select! {
                            Some(()) = interrupts.recv() => {
                                if interrupted {
                                    diagln!("error: interrupted twice; quitting (the runs in hand are taken over once their leases lapse)");
                                    std::process::exit(1);
                                }
                                interrupted = true;
                                stop("interrupted");
                            }
                            Some(()) = terminations.recv() => stop("terminated"),
                            else => return,
                        }
                    }
                });
            }
            _ => tracing::warn!("cannot listen for Ctrl-C and SIGTERM"),
        }
    }
    #[cfg(not(unix))]
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            stop("interrupted");
        }
    });
}

/// Reports the runtime worker's claims and ends on stderr: `claimed RUN`, `ended RUN STATUS`.
///
/// The [`QueueWorker`] reports them only as tracing events, so this layer reads
/// those.
pub(crate) struct ClaimLog;

impl ClaimLog {
    /// The layer, seeing only the worker's events at info level.
    pub(crate) fn layer<S>() -> impl Layer<S>
    where
        S: Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        ClaimLog.with_filter(filter_fn(|meta| meta.target() == WORKER_TARGET && *meta.level() == Level::INFO))
    }
}

impl<S: Subscriber> Layer<S> for ClaimLog {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        match fields.message.as_str() {
            "claimed" => diagln!("claimed {}", fields.run),
            "run ended" => diagln!("ended {} {}", fields.run, snake_case(&fields.outcome)),
            _ => {}
        }
    }
}

/// The fields of a worker event.
#[derive(Default)]
struct Fields {
    message: String,
    run: String,
    outcome: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record_debug(field, &format_args!("{value}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        let slot = match field.name() {
            "message" => &mut self.message,
            "run" => &mut self.run,
            "outcome" => &mut self.outcome,
            _ => return,
        };
        *slot = format!("{value:?}");
    }
}

/// `BudgetExceeded` as `budget_exceeded`: an outcome's Debug name as its stored status.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_as_statuses_and_ttls_as_seconds() {
        assert_eq!(snake_case("BudgetExceeded"), "budget_exceeded");
        assert_eq!(snake_case("Completed"), "completed");
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_seconds("0").is_err() && parse_seconds("-1").is_err() && parse_seconds("x").is_err());
        assert!(parse_seconds("1e300").is_err() && parse_seconds("NaN").is_err() && parse_seconds("inf").is_err());
    }

    #[test]
    fn only_free_available_runs_are_claimable() {
        let entry = |available_at, owner: Option<&str>, expires_at| QueueEntry {
            run_id: "r".into(),
            available_at,
            owner: owner.map(str::to_owned),
            epoch: 0,
            expires_at,
        };
        assert!(claimable(&entry(5, None, None), 10));
        assert!(!claimable(&entry(15, None, None), 10), "not yet available");
        assert!(!claimable(&entry(5, Some("w"), Some(20)), 10), "leased");
        assert!(claimable(&entry(5, Some("w"), Some(8)), 10), "its lease lapsed");
    }
}
