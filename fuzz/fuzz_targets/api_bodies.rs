//! The JSON API's request bodies through the validators the routes run: no panic, and
//! what a validator accepts meets its rule.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hero_backend::fuzz::api_bodies(data));
