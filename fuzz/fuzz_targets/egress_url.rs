//! The egress policy's URL and address checks: any text as a base URL; what it accepts is an
//! http(s) URL with a public address or a name, accepted again in its normalised form.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| hero_backend::fuzz::egress_url(data));
