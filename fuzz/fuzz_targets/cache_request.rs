#![no_main]
//! libFuzzer target: the properties of `evlab_fuzz::cache_request::check`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| evlab_fuzz::cache_request::check(data, false));
