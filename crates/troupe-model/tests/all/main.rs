//! The providers' tests: each wire format over real loopback HTTP against the testkit's
//! mock server.
//!
//! One test binary for the crate: each module was a test file of its own.

mod anthropic;
mod attachments;
mod cancellation;
mod fallback;
mod gemini;
mod live;
mod openai_chat;
mod openai_responses;
mod retry;
mod typed_output;
