//! Any bytes, split anywhere: the SSE decoder returns frames or a typed error, never panics,
//! and the split does not change the frames.
#![no_main]

use libfuzzer_sys::fuzz_target;
use troupe_model::sse::{SseDecoder, SseError};

fn frames(chunks: &[&[u8]]) -> Result<Vec<(Option<String>, String)>, SseError> {
    let mut decoder = SseDecoder::with_max_line(4096);
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.feed(chunk, |f| {
            out.push((f.event.map(str::to_owned), f.data.to_owned()));
            Ok::<(), SseError>(())
        })?;
    }
    decoder.finish(|f| {
        out.push((f.event.map(str::to_owned), f.data.to_owned()));
        Ok::<(), SseError>(())
    })?;
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let whole = frames(&[data]);
    let split = data.len() / 2;
    let halves = frames(&[&data[..split], &data[split..]]);
    if let (Ok(a), Ok(b)) = (&whole, &halves) {
        assert_eq!(a, b);
    }
});
