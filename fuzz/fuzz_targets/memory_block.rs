#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| g2_fuzz::memory_block(data));
