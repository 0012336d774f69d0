//! The members of a team file, assembled by the library ([`troupe_workers::team`]).

use crate::Failure;
use crate::agent::build;

pub(crate) use troupe_workers::team::{Assembled, Record, Row, Setting, TeamResult};

/// Builds the team `setting` describes.
pub(crate) fn assemble(setting: &Setting<'_>) -> Result<Assembled, Failure> {
    troupe_workers::team::assemble(setting).map_err(build::failure)
}
