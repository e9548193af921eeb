//! Streaming HML parser: no panic, streaming == batch, every element ends once.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hero_shared::fuzz::fuzz_parse(data));
