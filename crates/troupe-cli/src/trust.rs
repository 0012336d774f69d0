//! `troupe trust [FILE]`: trusts a `troupe.toml` as it is now, and the check every other
//! command makes first (see `troupe_workers::trust`).

use crate::Failure;
use anyhow::anyhow;
use std::path::{Path, PathBuf};
use troupe_workers::trust::{TrustStore, check, concerns};

/// The arguments of `troupe trust`.
#[derive(Debug, clap::Args)]
pub(crate) struct TrustArgs {
    /// The file to trust [default: ./troupe.toml].
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// Trusts the file as it is now, saying what it does that needed trust.
pub(crate) fn trust(args: TrustArgs) -> Result<(), Failure> {
    let file = args.file.unwrap_or_else(|| PathBuf::from(crate::CONFIG_FILE));
    let text =
        std::fs::read_to_string(&file).map_err(|e| Failure::Usage(anyhow!("cannot read {}: {e}", file.display())))?;
    let store = TrustStore::user()
        .ok_or_else(|| Failure::Usage(anyhow!("no data directory to keep the trust in: set HOME or XDG_DATA_HOME")))?;
    store
        .trust(&file, &text)
        .map_err(|e| Failure::Run(anyhow!("cannot record the trust in {}: {e}", store.path().display())))?;
    let mut lines = vec![format!("trusted {} as it is now (a change needs trusting again)", file.display())];
    let concerns = concerns(&text);
    if concerns.is_empty() {
        lines.push("it sends no key anywhere and loosens no sandbox: it needed no trust".to_owned());
    }
    lines.extend(concerns.into_iter().map(|concern| format!("- it {concern}")));
    crate::print_lines(&lines)
}

/// `Ok` unless `./troupe.toml` routes a key or loosens the sandbox and is not trusted as it
/// is (a usage error, exit 2, saying what it does and how to trust it).
pub(crate) fn require_trusted_config() -> Result<(), Failure> {
    check(Path::new(crate::CONFIG_FILE), TrustStore::user().as_ref())
        .map_err(|untrusted| Failure::Usage(untrusted.into()))
}
