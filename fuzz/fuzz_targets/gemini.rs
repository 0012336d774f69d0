//! Any bytes, split anywhere: the gemini parser yields events or a typed error, never panics,
//! and where the whole input parses, a split input parses to the same events.
#![no_main]

use libfuzzer_sys::fuzz_target;
use troupe_model::EventParser;
use troupe_model::gemini::GeminiParser;

fuzz_target!(|data: &[u8]| {
    let whole = EventParser::new("fuzz", GeminiParser::new("fuzz")).parse_all(data);
    let split = data.first().map(|b| *b as usize % (data.len() + 1)).unwrap_or(0);
    let halves = EventParser::new("fuzz", GeminiParser::new("fuzz")).parse_chunks(&[&data[..split], &data[split..]]);
    if let (Ok(a), Ok(b)) = (&whole, &halves) {
        assert_eq!(a, b);
    }
});
