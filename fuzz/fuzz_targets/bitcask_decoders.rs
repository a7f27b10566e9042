//! Every decoder of bytes read from a Bitcask data or hint file, on
//! arbitrary input: record and file headers, whole records, hint files and
//! the recovery scanner. They must reject, never panic or loop.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitcask::format::fuzz_decoders(data);
});
