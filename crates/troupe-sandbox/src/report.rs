//! [`SandboxReport`]: how a program was confined, as runs record and show it.

use crate::SandboxMode;
use serde::{Deserialize, Serialize};
use std::fmt;

/// How a program was confined.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxReport {
    /// The mode.
    pub mode: SandboxMode,
    /// The Landlock ABI that enforced the file rules (`None` in `full`).
    pub landlock_abi: Option<i32>,
    /// Whether every Landlock right asked for was enforced (an older kernel enforces fewer).
    pub fully_enforced: bool,
    /// Whether the seccomp filter was installed.
    pub seccomp: bool,
    /// Whether the program could use the network.
    pub network: bool,
}

impl SandboxReport {
    /// The report of a program run unconfined.
    pub fn unconfined() -> Self {
        SandboxReport {
            mode: SandboxMode::Full,
            landlock_abi: None,
            fully_enforced: false,
            seccomp: false,
            network: true,
        }
    }
}

impl fmt::Display for SandboxReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sandbox: {}", self.mode)?;
        if let Some(abi) = self.landlock_abi {
            let how = if self.fully_enforced { "" } else { ", partly enforced" };
            write!(f, " (landlock ABI {abi}{how}")?;
            if self.seccomp {
                f.write_str(", seccomp")?;
            }
            f.write_str(if self.network { ", network on)" } else { ", network off)" })?;
        } else if self.mode.confines() {
            f.write_str(" (not enforced)")?;
        } else {
            f.write_str(" (unconfined)")?;
        }
        Ok(())
    }
}
