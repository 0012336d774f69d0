//! Request bodies are JSON: a request that carries a body of another declared type (or of
//! none) is refused with `415 unsupported_media_type`, before any handler reads it.

use crate::error::ApiError;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The middleware: lets through requests without a body and those whose `Content-Type` is
/// JSON (`application/json`, or a `+json` type, with any parameters).
pub(crate) async fn json_bodies_only(request: Request, next: Next) -> Response {
    if carries_body(&request) && !is_json(&request) {
        return ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "request bodies are JSON: send them with `Content-Type: application/json`",
        )
        .into_response();
    }
    next.run(request).await
}

/// Whether the request says it has a body: a non-zero `Content-Length`, or a chunked one.
fn carries_body(request: &Request) -> bool {
    let headers = request.headers();
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).map(str::trim);
    match length {
        Some(length) => length != "0",
        None => headers.contains_key(header::TRANSFER_ENCODING),
    }
}

fn is_json(request: &Request) -> bool {
    let Some(value) = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(content_type: Option<&str>, length: Option<&str>) -> Request {
        let mut builder = axum::http::Request::post("/v1/runs");
        if let Some(value) = content_type {
            builder = builder.header(header::CONTENT_TYPE, value);
        }
        if let Some(value) = length {
            builder = builder.header(header::CONTENT_LENGTH, value);
        }
        builder.body(Body::empty()).expect("a request")
    }

    #[test]
    fn json_types_pass_and_others_with_a_body_do_not() {
        for (kind, length, passes) in [
            (Some("application/json"), Some("2"), true),
            (Some("Application/JSON; charset=utf-8"), Some("2"), true),
            (Some("application/merge-patch+json"), Some("2"), true),
            (Some("text/plain"), Some("2"), false),
            (Some("application/x-www-form-urlencoded"), Some("2"), false),
            (None, Some("2"), false),
            (None, Some("0"), true),
            (None, None, true),
            (Some("text/plain"), Some("0"), true),
        ] {
            let request = request(kind, length);
            assert_eq!(!carries_body(&request) || is_json(&request), passes, "{kind:?} {length:?}");
        }
    }
}
