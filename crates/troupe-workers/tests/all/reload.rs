//! The reloader on real files in a temporary directory, watched by the platform's file
//! notifications: edits reach the callbacks checked, broken edits are reported with their
//! file and line while the definition before them stays in force, and a removed file is
//! reported without anything being stopped.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use troupe_runtime::{Engine, RateQuota, SpecUpdate};
use troupe_workers::reload::{AgentReload, ReloadError, Reloader, Settings};

/// How long an edit may take to be reported.
const PATIENCE: Duration = Duration::from_secs(5);
/// How long nothing must be reported to count as nothing.
const QUIET: Duration = Duration::from_millis(800);

fn agent_file(prompt: &str, model: &str) -> String {
    format!(
        "[agent]\nid = \"coder\"\nname = \"Coder\"\n\n[provider]\nmodel = \"{model}\"\n\n[system]\nprompt = \"{prompt}\"\n"
    )
}

enum Report {
    Agent(Box<AgentReload>),
    Error(ReloadError),
    Removed(String, PathBuf),
    Settings(Box<Settings>),
}

struct Setup {
    dir: tempfile::TempDir,
    reports: mpsc::Receiver<Report>,
    reloader: Reloader,
}

impl Setup {
    fn start(dir: tempfile::TempDir) -> Self {
        let (tx, reports) = mpsc::channel();
        let (agents, errors, removed, settings) = (tx.clone(), tx.clone(), tx.clone(), tx);
        let reloader = Reloader::builder()
            .config_dirs(vec![dir.path().join(".troupe")])
            .config_file(dir.path().join("troupe.toml"))
            .debounce(Duration::from_millis(100))
            .check_model(|model, _config| {
                if model.starts_with("bad/") { Err(format!("no provider `bad` knows `{model}`")) } else { Ok(()) }
            })
            .on_agent(move |reload| {
                let _ = agents.send(Report::Agent(Box::new(reload)));
            })
            .on_error(move |error| {
                let _ = errors.send(Report::Error(error.clone()));
            })
            .on_removed(move |id, path| {
                let _ = removed.send(Report::Removed(id.to_owned(), path.to_owned()));
            })
            .on_settings(move |new| {
                let _ = settings.send(Report::Settings(Box::new(new.clone())));
            })
            .start()
            .expect("the reloader starts");
        Setup { dir, reports, reloader }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join(".troupe/agents/coder.toml")
    }

    fn write(&self, text: &str) {
        std::fs::write(self.file(), text).expect("write the agent file");
    }

    fn next(&self, what: &str) -> Report {
        self.reports.recv_timeout(PATIENCE).unwrap_or_else(|_| panic!("no report of {what} within {PATIENCE:?}"))
    }

    fn next_agent(&self, what: &str) -> AgentReload {
        match self.next(what) {
            Report::Agent(reload) => *reload,
            Report::Error(error) => panic!("{what}: an error instead: {error}"),
            Report::Removed(id, _) => panic!("{what}: a removal of {id} instead"),
            Report::Settings(_) => panic!("{what}: settings instead"),
        }
    }

    fn next_error(&self, what: &str) -> ReloadError {
        match self.next(what) {
            Report::Error(error) => error,
            Report::Agent(reload) => panic!("{what}: a change instead: {:?}", reload.changed),
            Report::Removed(id, _) => panic!("{what}: a removal of {id} instead"),
            Report::Settings(_) => panic!("{what}: settings instead"),
        }
    }

    fn assert_quiet(&self, why: &str) {
        if let Ok(report) = self.reports.recv_timeout(QUIET) {
            let what = match report {
                Report::Agent(reload) => format!("a change of {}: {:?}", reload.id, reload.changed),
                Report::Error(error) => format!("an error: {error}"),
                Report::Removed(id, _) => format!("a removal of {id}"),
                Report::Settings(_) => "settings".to_owned(),
            };
            panic!("{why}, but got {what}");
        }
    }
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join(".troupe/agents")).expect("agents dir");
    std::fs::write(dir.path().join(".troupe/agents/coder.toml"), agent_file("Be brief.", "demo")).expect("agent file");
    dir
}

#[test]
fn an_edit_is_applied_a_broken_one_is_reported_and_the_old_one_stays() {
    let setup = Setup::start(workspace());
    setup.assert_quiet("the files as first read are the starting point");
    // What an application does with a reload: its agent takes the change.
    let engine = Engine::builder().build();
    let definition = troupe_workers::AgentDefinition::load(setup.file()).expect("loads");
    let agent = engine.agent("coder").spec(definition.to_spec()).build().expect("builds");

    setup.write(&agent_file("Be thorough.", "demo"));
    let reload = setup.next_agent("the edit");
    assert_eq!(reload.id, "coder");
    assert_eq!(reload.path, setup.file());
    assert_eq!(reload.spec.instructions, "Be thorough.");
    assert_eq!(reload.changed, ["instructions"]);
    assert!(!reload.is_new());
    let revision = agent.reconfigure(reload.update()).expect("valid").expect("a change");
    assert_eq!(revision.changed, ["instructions"]);
    assert_eq!(agent.current_spec().instructions, "Be thorough.");

    // A typo: refused with the file and line, nothing applied.
    setup.write(&agent_file("Be careful.", "demo").replace("prompt =", "promt ="));
    let error = setup.next_error("the broken edit");
    assert_eq!(error.path(), setup.file());
    assert_eq!(error.line(), Some(9), "{error}");
    assert!(error.to_string().starts_with(&format!("{}:9:1: unknown key `promt`", setup.file().display())), "{error}");
    setup.assert_quiet("a refused edit changes nothing");

    // A model that does not pass the check: refused too, pointing at the model.
    setup.write(&agent_file("Be careful.", "bad/model"));
    let error = setup.next_error("the bad model");
    assert!(matches!(error, ReloadError::Model { .. }), "{error}");
    assert_eq!(error.line(), Some(6), "{error}");
    assert!(error.to_string().contains("no provider `bad`"), "{error}");
    setup.assert_quiet("a refused model changes nothing");

    // Fixed, saved the way editors do (a temporary file renamed over it): applied, and the
    // change is measured from what was in force, not from the broken texts.
    let temporary = setup.dir.path().join(".troupe/agents/.coder.toml.swp");
    std::fs::write(&temporary, agent_file("Be careful.", "demo")).expect("write");
    std::fs::rename(&temporary, setup.file()).expect("rename");
    let reload = setup.next_agent("the fix");
    assert_eq!(reload.spec.instructions, "Be careful.");
    assert_eq!(reload.changed, ["instructions"]);
    assert_eq!(reload.previous.as_ref().map(|d| d.system.prompt.as_str()), Some("Be thorough."));
    setup.reloader.stop();
}

#[test]
fn troupe_toml_changes_limits_and_rate_limits_and_a_removed_file_is_reported() {
    let setup = Setup::start(workspace());
    let troupe_toml = setup.dir.path().join("troupe.toml");
    std::fs::write(&troupe_toml, "[limits]\nmax_usd = 0.5\n\n[agents.coder.rate_limit]\nmodel_calls = 30\n")
        .expect("write troupe.toml");
    let Report::Settings(settings) = setup.next("the new settings") else { panic!("settings first") };
    assert_eq!(settings.limits.max_usd, Some(0.5));
    let reload = setup.next_agent("the agent under the new settings");
    assert_eq!(reload.changed, ["limits.max_usd", "rate_limit"]);
    assert_eq!(reload.spec.limits.max_usd, Some(0.5));
    assert_eq!(reload.rate_quotas.model, Some(RateQuota::new(30, Duration::from_secs(60))));
    let update = reload.update();
    assert_eq!(update, SpecUpdate::from_spec(&reload.spec).rate_quotas(reload.rate_quotas));

    std::fs::write(&troupe_toml, "[limits]\nmax_usd = \"plenty\"\n").expect("write troupe.toml");
    let error = setup.next_error("the broken settings");
    assert_eq!((error.path(), error.line()), (troupe_toml.as_path(), Some(2)), "{error}");
    setup.assert_quiet("broken settings change nothing");

    // An edit that makes the file loosen the sandbox needs trust: refused, nothing changes.
    std::fs::write(&troupe_toml, "[limits]\nmax_usd = 0.7\n\n[sandbox]\nmode = \"full\"\n").expect("write troupe.toml");
    let untrusted = setup.next_error("the untrusted settings");
    assert!(untrusted.to_string().contains("is not trusted, and it runs commands unconfined"), "{untrusted}");
    setup.assert_quiet("untrusted settings change nothing");

    std::fs::remove_file(setup.file()).expect("remove the agent file");
    match setup.next("the removal") {
        Report::Removed(id, path) => assert_eq!((id.as_str(), path.as_path()), ("coder", setup.file().as_path())),
        _ => panic!("a removal was expected"),
    }
    setup.assert_quiet("a removal is reported once");
}

#[test]
fn a_file_edited_before_the_reloader_started_is_reported_against_the_baseline() {
    let dir = workspace();
    let registry = troupe_workers::AgentRegistry::discover(&[dir.path().join(".troupe")]).expect("discovers");
    std::fs::write(dir.path().join(".troupe/agents/coder.toml"), agent_file("Edited meanwhile.", "demo"))
        .expect("edit");
    let (tx, rx) = mpsc::channel();
    let reloader = Reloader::builder()
        .config_dirs(vec![dir.path().join(".troupe")])
        .baseline(registry)
        .on_agent(move |reload| {
            let _ = tx.send(reload);
        })
        .start()
        .expect("starts");
    let reload = rx.recv_timeout(Duration::ZERO).expect("reported as the reloader starts");
    assert_eq!(reload.changed, ["instructions"]);
    assert_eq!(reload.spec.instructions, "Edited meanwhile.");
    drop(reloader);
    assert!(Path::new(&dir.path().join(".troupe")).is_dir());
}

/// An agent whose model cannot be used is a problem of the files as they were read at
/// start, not an edit: an application that built its agents from them (and said which
/// it could not build) hears nothing of it from the reloader, which still reports a
/// later edit of that file.
#[test]
fn a_problem_in_the_files_at_start_is_not_reported_as_a_refused_edit() {
    let dir = workspace();
    std::fs::write(dir.path().join(".troupe/agents/coder.toml"), agent_file("Be brief.", "bad/model")).expect("write");
    let registry = troupe_workers::AgentRegistry::discover(&[dir.path().join(".troupe")]).expect("discovers");
    let (tx, rx) = mpsc::channel();
    let (errors, at_start) = (tx.clone(), tx);
    let reloader =
        Reloader::builder()
            .config_dirs(vec![dir.path().join(".troupe")])
            .config_file(dir.path().join("troupe.toml"))
            .debounce(Duration::from_millis(100))
            .baseline(registry)
            .check_model(|model, _config| {
                if model.starts_with("bad/") { Err(format!("no provider `bad` knows `{model}`")) } else { Ok(()) }
            })
            .on_error(move |error| {
                let _ = errors.send(format!("refused edit: {error}"));
            })
            .on_start_problem(move |error| {
                let _ = at_start.send(format!("at start: {error}"));
            })
            .start()
            .expect("starts");
    let report = rx.recv_timeout(Duration::ZERO).expect("reported as the reloader starts");
    assert!(report.starts_with("at start:") && report.contains("bad/model"), "{report}");
    assert!(rx.recv_timeout(QUIET).is_err(), "reported once");
    std::fs::write(dir.path().join(".troupe/agents/coder.toml"), agent_file("Be thorough.", "bad/other"))
        .expect("edit");
    let report = rx.recv_timeout(PATIENCE).expect("the refused edit is reported");
    assert!(report.starts_with("refused edit:") && report.contains("bad/other"), "{report}");
    drop(reloader);
}

/// Without a baseline, the files as first read are the starting point: a problem in them
/// goes to `on_start_problem`, never to `on_error` (nothing was edited).
#[test]
fn without_a_baseline_a_problem_at_start_goes_to_its_own_callback() {
    let dir = workspace();
    std::fs::write(dir.path().join(".troupe/agents/coder.toml"), agent_file("Be brief.", "bad/model")).expect("write");
    let (tx, rx) = mpsc::channel();
    let (errors, at_start) = (tx.clone(), tx);
    let reloader =
        Reloader::builder()
            .config_dirs(vec![dir.path().join(".troupe")])
            .check_model(|model, _config| {
                if model.starts_with("bad/") { Err(format!("no provider `bad` knows `{model}`")) } else { Ok(()) }
            })
            .on_error(move |error| {
                let _ = errors.send(format!("refused edit: {error}"));
            })
            .on_start_problem(move |error| {
                let _ = at_start.send(format!("at start: {error}"));
            })
            .start()
            .expect("starts");
    let report = rx.recv_timeout(Duration::ZERO).expect("reported as the reloader starts");
    assert!(report.starts_with("at start:") && report.contains("bad/model"), "{report}");
    assert!(rx.recv_timeout(QUIET).is_err(), "reported once");
    drop(reloader);
}
