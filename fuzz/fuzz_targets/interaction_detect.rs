//! Interaction detector: no panic, no call from a truncated block, sender_id stripped.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hero_shared::fuzz::fuzz_detect(data));
