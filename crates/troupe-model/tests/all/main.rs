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

/// The request `wire` builds for `request`, after checking that the bytes it actually
/// sends (`encode_request`) say the same: the tests read the built body, the vendor gets
/// the bytes.
fn built_as_sent<W: troupe_model::WireFormat>(
    wire: &W,
    request: &troupe_core::ModelRequest,
) -> troupe_model::WireRequest {
    let built = wire.build_request(request).expect("builds");
    let sent = wire.encode_request(request).expect("encodes");
    let sent_body: serde_json::Value = serde_json::from_slice(&sent.body).expect("the sent body is JSON");
    assert_eq!(sent_body, built.body, "encode_request and build_request describe the same body");
    assert_eq!((&sent.path, &sent.headers), (&built.path, &built.headers));
    built
}
