//! Attachments: images and PDFs given to a run with its task, as content blocks.
//!
//! An attachment's type is told by its bytes (PNG, JPEG, GIF and WebP images, PDF
//! documents), not by its name; a name whose extension says otherwise is refused, as is a
//! file over the size vendors take ([`MAX_IMAGE_BYTES`], [`MAX_DOCUMENT_BYTES`]).

use crate::message::{ContentBlock, ImageSource};
use base64::Engine as _;
use std::path::Path;

/// The largest image taken, in bytes: Anthropic's limit, the smallest of the vendors'.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The largest PDF taken, in bytes: Anthropic's request limit for documents.
pub const MAX_DOCUMENT_BYTES: u64 = 32 * 1024 * 1024;

/// Why a file cannot be attached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// The file could not be read.
    #[error("cannot attach {what}: {reason}")]
    Unreadable {
        /// The file.
        what: String,
        /// Why.
        reason: String,
    },
    /// Its bytes are none of the kinds taken.
    #[error("cannot attach {what}: {detected}; attach a PNG, JPEG, GIF or WebP image, or a PDF")]
    UnsupportedType {
        /// The file.
        what: String,
        /// What it looks like.
        detected: String,
    },
    /// It is larger than vendors take.
    #[error("cannot attach {what}: it is {size} bytes, over the {limit} bytes {kind} may have")]
    TooLarge {
        /// The file.
        what: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
        /// `an image` or `a PDF`.
        kind: &'static str,
    },
}

/// The media type of `bytes`, by their first bytes.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        [b'%', b'P', b'D', b'F', b'-', ..] => Some("application/pdf"),
        _ => None,
    }
}

/// The content block of `bytes` named `name` (a file name, for messages and for vendors that
/// show it): an image or a PDF document, base64-encoded.
pub fn from_bytes(name: &str, bytes: &[u8]) -> Result<ContentBlock, AttachmentError> {
    let what = name.to_owned();
    let Some(media_type) = sniff(bytes) else {
        let detected = if bytes.is_empty() {
            "it is empty".to_owned()
        } else if std::str::from_utf8(bytes).is_ok() {
            "it is text (put it in the task, or let the agent read it)".to_owned()
        } else {
            "its type is not one troupe knows".to_owned()
        };
        return Err(AttachmentError::UnsupportedType { what, detected });
    };
    let extension = Path::new(name).extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let expected: &[&str] = match media_type {
        "image/png" => &["png"],
        "image/jpeg" => &["jpg", "jpeg"],
        "image/gif" => &["gif"],
        "image/webp" => &["webp"],
        _ => &["pdf"],
    };
    if let Some(extension) = extension.filter(|e| !expected.contains(&e.as_str())) {
        return Err(AttachmentError::UnsupportedType {
            what,
            detected: format!("its name ends in .{extension} but its bytes are {media_type}"),
        });
    }
    let document = media_type == "application/pdf";
    let (limit, kind) = if document { (MAX_DOCUMENT_BYTES, "a PDF") } else { (MAX_IMAGE_BYTES, "an image") };
    let size = bytes.len() as u64;
    if size > limit {
        return Err(AttachmentError::TooLarge { what, size, limit, kind });
    }
    let source = ImageSource::Base64 {
        media_type: media_type.to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
    };
    let file_name = Path::new(name).file_name().map(|n| n.to_string_lossy().into_owned());
    Ok(if document { ContentBlock::Document { source, name: file_name } } else { ContentBlock::Image { source } })
}

/// The content block of the file at `path`; its size is checked before it is read.
pub fn from_path(path: &Path) -> Result<ContentBlock, AttachmentError> {
    let what = path.display().to_string();
    let unreadable = |e: std::io::Error| AttachmentError::Unreadable { what: what.clone(), reason: e.to_string() };
    let size = std::fs::metadata(path).map_err(unreadable)?.len();
    if size > MAX_DOCUMENT_BYTES {
        return Err(AttachmentError::TooLarge { what, size, limit: MAX_DOCUMENT_BYTES, kind: "a file" });
    }
    let bytes = std::fs::read(path).map_err(unreadable)?;
    from_bytes(&what, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = &[0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0];
    const PDF: &[u8] = b"%PDF-1.7\n%\xE2\xE3\n";

    #[test]
    fn images_and_pdfs_are_told_by_their_bytes() {
        let image = from_bytes("shot.png", PNG).expect("an image");
        assert!(
            matches!(&image, ContentBlock::Image { source: ImageSource::Base64 { media_type, .. } } if media_type == "image/png")
        );
        let pdf = from_bytes("docs/spec.pdf", PDF).expect("a PDF");
        let ContentBlock::Document { source: ImageSource::Base64 { media_type, data }, name } = pdf else { panic!() };
        assert_eq!((media_type.as_str(), name.as_deref()), ("application/pdf", Some("spec.pdf")));
        assert_eq!(base64::engine::general_purpose::STANDARD.decode(data).expect("base64"), PDF);
    }

    #[test]
    fn other_files_are_refused_with_why() {
        let text = from_bytes("notes.txt", b"hello").expect_err("text").to_string();
        assert_eq!(
            text,
            "cannot attach notes.txt: it is text (put it in the task, or let the agent read it); attach a PNG, JPEG, GIF or WebP image, or a PDF"
        );
        let lying = from_bytes("photo.jpg", PNG).expect_err("a PNG named .jpg").to_string();
        assert!(lying.contains("its name ends in .jpg but its bytes are image/png"), "{lying}");
        let big = vec![0x89, b'P', b'N', b'G']
            .into_iter()
            .chain(std::iter::repeat_n(0, MAX_IMAGE_BYTES as usize))
            .collect::<Vec<u8>>();
        let too_large = from_bytes("big.png", &big).expect_err("too large").to_string();
        assert_eq!(
            too_large,
            format!("cannot attach big.png: it is {} bytes, over the 5242880 bytes an image may have", big.len())
        );
        let missing = from_path(Path::new("/nonexistent/x.png")).expect_err("missing").to_string();
        assert!(missing.starts_with("cannot attach /nonexistent/x.png:"), "{missing}");
    }
}
