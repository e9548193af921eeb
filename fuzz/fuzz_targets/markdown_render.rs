//! Markdown renderer: no input yields live markup (only the renderer's own tags and
//! attributes), whole or cut mid-stream.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hero_shared::fuzz::fuzz_markdown(data));
