//! Starting a program confined: [`Sandbox::spawn`] and what it gives back, [`Confined`].

use crate::{Sandbox, SandboxError, SandboxReport};
use std::path::Path;
use tempfile::TempDir;

/// A program started in a sandbox.
#[derive(Debug)]
pub struct Confined {
    /// The running program.
    pub child: tokio::process::Child,
    /// How it was confined.
    pub report: SandboxReport,
    /// Its private temporary directory (`TMPDIR`), removed when this is dropped.
    temp: Option<TempDir>,
}

impl Confined {
    /// The program's private temporary directory, when it is confined.
    pub fn temp_dir(&self) -> Option<&Path> {
        self.temp.as_ref().map(TempDir::path)
    }
}

impl Sandbox {
    /// Starts `command` confined to `workspace` as this sandbox's mode says.
    ///
    /// A confined program gets a private temporary directory as `TMPDIR` (the only
    /// temporary directory it can write), removed when the returned [`Confined`] is
    /// dropped. In `full` the command is started as it is.
    pub async fn spawn(
        &self,
        mut command: tokio::process::Command,
        workspace: &Path,
    ) -> Result<Confined, SandboxError> {
        let program = command.as_std().get_program().to_string_lossy().into_owned();
        let spawn_error = |source| SandboxError::Spawn { program: program.clone(), source };
        if !self.mode().confines() {
            let child = command.spawn().map_err(spawn_error)?;
            return Ok(Confined { child, report: SandboxReport::unconfined(), temp: None });
        }
        self.spawn_confined(command, workspace, program).await
    }

    #[cfg(target_os = "linux")]
    async fn spawn_confined(
        &self,
        mut command: tokio::process::Command,
        workspace: &Path,
        program: String,
    ) -> Result<Confined, SandboxError> {
        let temp = tempfile::Builder::new().prefix("troupe-sandbox-").tempdir().map_err(SandboxError::TempDir)?;
        command.env("TMPDIR", temp.path());
        let plan = crate::linux::Plan::new(self, workspace, temp.path());
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| SandboxError::Spawn {
            program: program.clone(),
            source: std::io::Error::other(format!("a confined program is started from a Tokio runtime: {e}")),
        })?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        // Landlock and seccomp bind the thread that applies them and what it starts: this
        // thread is confined, starts the program, and ends.
        std::thread::Builder::new()
            .name("troupe-sandbox".to_owned())
            .spawn(move || {
                let _runtime = runtime.enter();
                let _ = answer.send(plan.confine_and_spawn(command, &program));
            })
            .map_err(|source| SandboxError::Spawn { program: "the sandbox's thread".to_owned(), source })?;
        let (child, report) = answered.await.map_err(|_| SandboxError::Spawn {
            program: "the sandbox's thread".to_owned(),
            source: std::io::Error::other("it ended without an answer"),
        })??;
        Ok(Confined { child, report, temp: Some(temp) })
    }

    #[cfg(not(target_os = "linux"))]
    async fn spawn_confined(
        &self,
        _command: tokio::process::Command,
        _workspace: &Path,
        _program: String,
    ) -> Result<Confined, SandboxError> {
        Err(SandboxError::Unavailable {
            mode: self.mode(),
            reason: "confinement needs Linux (Landlock and seccomp)".to_owned(),
        })
    }
}
