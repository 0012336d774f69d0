//! troupe-server's integration tests, as one binary: each module was a test binary of its
//! own, and each linked the whole stack. `common` starts a server over the mock model;
//! the real protocol clients the tests drive live in `tests/a2a` and `tests/agui`.

mod a2a;
mod a2a_rest;
mod agui;
mod agui_frontend;
mod common;
mod console;
mod native;
mod openai;
mod openapi;
mod security;
