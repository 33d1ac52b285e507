#![no_main]
//! libFuzzer target: the properties of `evlab_fuzz::origin::check`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| evlab_fuzz::origin::check(data, false));
