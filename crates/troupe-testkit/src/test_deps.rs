//! Where the third-party test peers live: the npm and PyPI packages that
//! `scripts/install-test-deps` installs under `.test-deps/` in the checkout.
//!
//! Tests that talk to a real client or server (AG-UI, A2A, MCP) ask here first; when a
//! package is missing they print why and skip, so a machine without node or python still
//! runs the rest of the suite. CI runs the install script first, and there a missing
//! package fails the test (see [`skip`](crate::skip())).

use std::path::{Path, PathBuf};

/// The `.test-deps` directory of this checkout.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps")
}

/// The `node_modules` directory holding the installed npm packages, when `package`
/// (e.g. `@ag-ui/client`) is installed there and `node` is on the `PATH`.
pub fn node_modules(package: &str) -> Option<PathBuf> {
    let modules = root().join("node/node_modules");
    let installed = modules.join(package).join("package.json").is_file();
    (installed && on_path("node")).then_some(modules)
}

/// The Python interpreter of the test virtualenv, when `module` (e.g. `a2a`) imports
/// there.
pub fn python_with(module: &str) -> Option<PathBuf> {
    let python = root().join("py/bin/python");
    if !python.is_file() {
        return None;
    }
    let imports = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .map(|out| out.status.success())
        .unwrap_or(false);
    imports.then_some(python)
}

/// Says that `test` was skipped for a missing package, and how to install it; under CI,
/// fails it (see [`skip`](crate::skip())).
pub fn skip(test: &str, why: &str) {
    crate::skip(test, &format!("{why}; run scripts/install-test-deps"));
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}
