//! Hot reload: agent files and `troupe.toml` watched, re-read and checked on every edit.
//!
//! A [`Reloader`] watches the config directories' agent files (`agents/*.toml`,
//! `agents.d/**/*.toml`) and a `troupe.toml`. A burst of edits is taken as one once the
//! files have been quiet for the debounce (200 ms by default); the files are then read
//! again and checked: each agent file must parse and validate, and its model must pass the
//! caller's check (typically: it resolves with the new `troupe.toml`'s providers).
//!
//! - An agent that is new or changed goes to [`on_agent`](ReloaderBuilder::on_agent) as an
//!   [`AgentReload`]: its definition, its spec with `troupe.toml`'s limits
//!   ([`Settings`]), its rate quotas, and which parts changed. Hand
//!   [`AgentReload::update`] to [`Agent::reconfigure`](troupe_runtime::Agent::reconfigure)
//!   and its running runs take it at their next safe boundary.
//! - A file that does not read, or whose model is refused, goes to
//!   [`on_error`](ReloaderBuilder::on_error) as a [`ReloadError`] naming the file, line and
//!   column; what the file said before stays in force. A problem in the files as first
//!   read is no refused edit: it goes to [`on_start_problem`](ReloaderBuilder::on_start_problem).
//! - A removed agent file goes to [`on_removed`](ReloaderBuilder::on_removed): nothing is
//!   stopped (running agents run on); the reloader just forgets the agent.
//! - Changed settings go to [`on_settings`](ReloaderBuilder::on_settings) (a rebuilt
//!   resolver or a shared rate limit is the caller's to apply); every agent whose limits
//!   or quotas they change goes to `on_agent` as well.
//!
//! Every report is also logged with `tracing`. The callbacks run one at a time on the
//! reloader's own thread (file reads never block an async runtime).
//!
//! ```no_run
//! use std::path::PathBuf;
//! use troupe_workers::reload::Reloader;
//!
//! # fn demo() -> Result<(), troupe_workers::reload::ReloadError> {
//! let reloader = Reloader::builder()
//!     .config_dirs(vec![PathBuf::from(".troupe")])
//!     .config_file("troupe.toml")
//!     .check_model(|model, config| {
//!         let providers = config.providers(troupe_model::ProcessEnv).map_err(|e| e.to_string())?;
//!         providers.resolve(model).map(|_| ()).map_err(|e| e.to_string())
//!     })
//!     .on_agent(|reload| println!("{} changed: {:?}", reload.id, reload.changed))
//!     .on_error(|error| eprintln!("not applied: {error}"))
//!     .start()?;
//! // ... until the application stops:
//! reloader.stop();
//! # Ok(())
//! # }
//! ```

mod error;
mod settings;
mod snapshot;

pub use error::ReloadError;
pub use settings::{AgentTable, DEFAULT_RATE_PERIOD_SECONDS, LimitsTable, RateLimitTable, Settings};
pub use snapshot::{AgentReload, ModelCheck};

use crate::registry::AgentRegistry;
use notify::{EventKind, RecursiveMode, Watcher};
use snapshot::{Change, Snapshot};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use troupe_model::ModelConfig;

/// How long the files must be quiet before an edit is taken, by default.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest a steady stream of edits delays a look, as a multiple of the debounce.
const MAX_DELAY_DEBOUNCES: u32 = 10;

type AgentCallback = Box<dyn FnMut(AgentReload) + Send>;
type RemovedCallback = Box<dyn FnMut(&str, &Path) + Send>;
type SettingsCallback = Box<dyn FnMut(&Settings) + Send>;
type ErrorCallback = Box<dyn FnMut(&ReloadError) + Send>;

/// Builds a [`Reloader`].
#[must_use]
pub struct ReloaderBuilder {
    dirs: Vec<PathBuf>,
    config_file: Option<PathBuf>,
    debounce: Duration,
    baseline: Option<AgentRegistry>,
    check: Option<Box<ModelCheck>>,
    on_agent: Option<AgentCallback>,
    on_removed: Option<RemovedCallback>,
    on_settings: Option<SettingsCallback>,
    on_error: Option<ErrorCallback>,
    on_start_problem: Option<ErrorCallback>,
}

impl std::fmt::Debug for ReloaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloaderBuilder")
            .field("dirs", &self.dirs)
            .field("config_file", &self.config_file)
            .field("debounce", &self.debounce)
            .finish_non_exhaustive()
    }
}

impl ReloaderBuilder {
    /// Watches the agent files of these config directories (as
    /// [`AgentRegistry::discover`] reads them). A directory that does not exist when the
    /// reloader starts is not watched.
    pub fn config_dirs(mut self, dirs: Vec<PathBuf>) -> Self {
        self.dirs = dirs;
        self
    }

    /// Watches the `troupe.toml` at `path` (it may not exist yet; its directory must).
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Takes an edit once the files have been quiet this long (default
    /// [`DEFAULT_DEBOUNCE`]).
    pub fn debounce(mut self, quiet: Duration) -> Self {
        self.debounce = quiet.max(Duration::from_millis(1));
        self
    }

    /// The agents in force when the reloader starts (those the application built): a file
    /// that differs from them at start is reported as an edit. Without it, the files as
    /// the reloader first reads them are the starting point.
    pub fn baseline(mut self, registry: AgentRegistry) -> Self {
        self.baseline = Some(registry);
        self
    }

    /// Checks every new or changed agent's model id against the model configuration of
    /// `troupe.toml` (the default one when there is none); an `Err` refuses the edit.
    pub fn check_model(mut self, check: impl Fn(&str, &ModelConfig) -> Result<(), String> + Send + 'static) -> Self {
        self.check = Some(Box::new(check));
        self
    }

    /// Called with each agent that is new or changed, checked.
    pub fn on_agent(mut self, callback: impl FnMut(AgentReload) + Send + 'static) -> Self {
        self.on_agent = Some(Box::new(callback));
        self
    }

    /// Called with the id and file of each agent whose file is gone (or now defines
    /// another id). Running agents are not touched.
    pub fn on_removed(mut self, callback: impl FnMut(&str, &Path) + Send + 'static) -> Self {
        self.on_removed = Some(Box::new(callback));
        self
    }

    /// Called with the settings of `troupe.toml` each time they change, checked.
    pub fn on_settings(mut self, callback: impl FnMut(&Settings) + Send + 'static) -> Self {
        self.on_settings = Some(Box::new(callback));
        self
    }

    /// Called with each edit that is refused (the configuration before it stays in force)
    /// and each watch failure.
    pub fn on_error(mut self, callback: impl FnMut(&ReloadError) + Send + 'static) -> Self {
        self.on_error = Some(Box::new(callback));
        self
    }

    /// Called with each problem of the files as the reloader first reads them (without a
    /// baseline; with one, of `troupe.toml`): nothing was edited, what the file defines is
    /// just not in force. An application that built its agents from the same files has
    /// said so already, and may leave this unset; the problems are logged either way.
    pub fn on_start_problem(mut self, callback: impl FnMut(&ReloadError) + Send + 'static) -> Self {
        self.on_start_problem = Some(Box::new(callback));
        self
    }

    /// Reads the files, starts watching them, and returns the running reloader. Problems
    /// in the files as first read go to `on_start_problem`; only a watch that cannot be
    /// set up fails here.
    pub fn start(self) -> Result<Reloader, ReloadError> {
        let (tx, rx) = mpsc::channel();
        let forward = tx.clone();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // The reloader is gone when this fails: nothing is left to tell.
            let _ = forward.send(Message::Files(event));
        })
        .map_err(|e| ReloadError::Watch { path: PathBuf::from("."), reason: format!("cannot watch files: {e}") })?;
        for (path, mode) in watch_list(&self.dirs, self.config_file.as_deref()) {
            watcher.watch(&path, mode).map_err(|e| ReloadError::Watch { path: path.clone(), reason: e.to_string() })?;
        }
        let mut worker = ReloadWorker {
            snapshot: Snapshot::default(),
            dirs: self.dirs,
            config_file: self.config_file,
            check: self.check,
            on_agent: self.on_agent,
            on_removed: self.on_removed,
            on_settings: self.on_settings,
            on_error: self.on_error,
            on_start_problem: self.on_start_problem,
        };
        worker.first_look(self.baseline.as_ref());
        let debounce = self.debounce;
        let thread = std::thread::Builder::new()
            .name("troupe-reload".to_owned())
            .spawn(move || worker.run(&rx, debounce))
            .map_err(|e| ReloadError::Watch { path: PathBuf::from("."), reason: format!("cannot start: {e}") })?;
        Ok(Reloader { _watcher: watcher, tx, thread: Some(thread) })
    }
}

/// Watches agent files and `troupe.toml` and reports each checked edit; see the
/// [module](self). Dropping it stops the watch (a callback under way finishes first).
pub struct Reloader {
    _watcher: notify::RecommendedWatcher,
    tx: mpsc::Sender<Message>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

impl Reloader {
    /// Starts building a reloader: no directories, no `troupe.toml`, no callbacks yet.
    pub fn builder() -> ReloaderBuilder {
        ReloaderBuilder {
            dirs: Vec::new(),
            config_file: None,
            debounce: DEFAULT_DEBOUNCE,
            baseline: None,
            check: None,
            on_agent: None,
            on_removed: None,
            on_settings: None,
            on_error: None,
            on_start_problem: None,
        }
    }

    /// Reads the files again now, as if they had been edited (a `SIGHUP`, say).
    pub fn reload_now(&self) {
        let _ = self.tx.send(Message::Look);
    }

    /// Stops watching and waits for a callback under way to return. (Called from a
    /// callback, it does not wait.)
    pub fn stop(mut self) {
        let _ = self.tx.send(Message::Stop);
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for Reloader {
    fn drop(&mut self) {
        let _ = self.tx.send(Message::Stop);
    }
}

enum Message {
    Files(notify::Result<notify::Event>),
    Look,
    Stop,
}

/// The directories to watch: each existing config directory, recursively, and the
/// directory of `troupe.toml` (editors replace files by renaming, which a watch on the
/// file itself would lose).
fn watch_list(dirs: &[PathBuf], config_file: Option<&Path>) -> Vec<(PathBuf, RecursiveMode)> {
    let mut list = Vec::new();
    let mut seen = BTreeSet::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        if seen.insert(dir.canonicalize().unwrap_or_else(|_| dir.clone())) {
            list.push((dir.clone(), RecursiveMode::Recursive));
        }
    }
    if let Some(file) = config_file {
        let parent = match file.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let canonical = parent.canonicalize().unwrap_or_else(|_| parent.clone());
        if !seen.contains(&canonical) {
            list.push((parent, RecursiveMode::NonRecursive));
        }
    }
    list
}

/// The reloader's thread: the configuration in force and the callbacks.
struct ReloadWorker {
    snapshot: Snapshot,
    dirs: Vec<PathBuf>,
    config_file: Option<PathBuf>,
    check: Option<Box<ModelCheck>>,
    on_agent: Option<AgentCallback>,
    on_removed: Option<RemovedCallback>,
    on_settings: Option<SettingsCallback>,
    on_error: Option<ErrorCallback>,
    on_start_problem: Option<ErrorCallback>,
}

impl ReloadWorker {
    /// The first read: the starting point, reporting only problems (and, with a baseline,
    /// what differs from it).
    fn first_look(&mut self, baseline: Option<&AgentRegistry>) {
        let Some(registry) = baseline else {
            let changes = self.look();
            for change in changes {
                if let Change::Rejected(error) = change {
                    self.report_start_problem(&error);
                }
            }
            return;
        };
        // The settings first, so the baseline's specs are computed under them.
        let settings = self.snapshot.rescan(&[], self.config_file.as_deref(), None);
        for change in settings {
            if let Change::Rejected(error) = change {
                self.report_start_problem(&error);
            }
        }
        self.snapshot.seed(registry);
        let changes = self.look();
        // The first read checks every agent's model: one refused while it is the model the
        // application started with was not edited in, it was there at start.
        let (at_start, changes): (Vec<Change>, Vec<Change>) = changes.into_iter().partition(|change| {
            matches!(change, Change::Rejected(ReloadError::Model { agent, model, .. })
                if self.snapshot.model_of(agent) == Some(model.as_str()))
        });
        for change in at_start {
            if let Change::Rejected(error) = change {
                self.report_start_problem(&error);
            }
        }
        self.dispatch(changes);
    }

    fn look(&mut self) -> Vec<Change> {
        self.snapshot.rescan(&self.dirs, self.config_file.as_deref(), self.check.as_deref())
    }

    fn run(mut self, rx: &mpsc::Receiver<Message>, debounce: Duration) {
        loop {
            match rx.recv() {
                Ok(Message::Files(event)) => {
                    if !self.is_relevant(event) {
                        continue;
                    }
                }
                Ok(Message::Look) => {}
                Ok(Message::Stop) | Err(_) => return,
            }
            // Quiet for `debounce`, or at most ten of them in a steady stream of edits.
            let started = Instant::now();
            let mut quiet_until = started + debounce;
            loop {
                let deadline = quiet_until.min(started + debounce * MAX_DELAY_DEBOUNCES);
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(Message::Files(event)) => {
                        if self.is_relevant(event) {
                            quiet_until = Instant::now() + debounce;
                        }
                    }
                    Ok(Message::Look) => quiet_until = Instant::now() + debounce,
                    Ok(Message::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                    Err(mpsc::RecvTimeoutError::Timeout) => break,
                }
            }
            let changes = self.look();
            self.dispatch(changes);
        }
    }

    /// Whether `event` may change the configuration: an agent file or `troupe.toml` was
    /// written, created, removed or renamed. A watch error is reported, and counts (what
    /// it missed is read again).
    fn is_relevant(&mut self, event: notify::Result<notify::Event>) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                let path = error.paths.first().cloned().unwrap_or_else(|| PathBuf::from("."));
                self.report_error(&ReloadError::Watch { path, reason: error.to_string() });
                return true;
            }
        };
        if matches!(event.kind, EventKind::Access(_)) {
            return false;
        }
        let config_name = self.config_file.as_deref().and_then(Path::file_name);
        event.paths.iter().any(|path| {
            let name = path.file_name();
            let hidden = name.is_some_and(|n| n.to_string_lossy().starts_with('.'));
            let agent_file = !hidden && path.extension().is_some_and(|e| e == "toml");
            agent_file || (name.is_some() && name == config_name)
        })
    }

    fn dispatch(&mut self, changes: Vec<Change>) {
        for change in changes {
            match change {
                Change::Settings(settings) => {
                    tracing::info!(file = ?self.config_file, "the settings changed");
                    if let Some(callback) = &mut self.on_settings {
                        callback(&settings);
                    }
                }
                Change::Agent(reload) => {
                    tracing::info!(
                        agent = %reload.id, file = %reload.path.display(), changed = ?reload.changed,
                        needs_restart = ?reload.needs_restart, new = reload.is_new(), "an agent definition changed"
                    );
                    if let Some(callback) = &mut self.on_agent {
                        callback(*reload);
                    }
                }
                Change::Removed { id, path } => {
                    tracing::warn!(
                        agent = %id, file = %path.display(),
                        "an agent file was removed; running agents are not stopped"
                    );
                    if let Some(callback) = &mut self.on_removed {
                        callback(&id, &path);
                    }
                }
                Change::Rejected(error) => self.report_error(&error),
            }
        }
    }

    fn report_start_problem(&mut self, error: &ReloadError) {
        tracing::warn!(%error, "a configuration file has a problem; what it defines is not in force");
        if let Some(callback) = &mut self.on_start_problem {
            callback(error);
        }
    }

    fn report_error(&mut self, error: &ReloadError) {
        tracing::warn!(%error, "a configuration edit was not applied; the configuration before it stays in force");
        if let Some(callback) = &mut self.on_error {
            callback(error);
        }
    }
}
