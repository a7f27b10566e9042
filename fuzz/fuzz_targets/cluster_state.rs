//! The cluster state's decoder on arbitrary bytes, as a peer's gossip or
//! a damaged file could present them: raw, and sealed with a valid
//! checksum so the fuzzer reaches the fields. Each decodes or is refused,
//! never panics; what decodes survives its own encoding unchanged (the
//! decoder accepts non-canonical orders, so the bytes may differ).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_cluster::codec::{decode, encode, sealed_for_fuzzing};

fuzz_target!(|data: &[u8]| {
    for bytes in [data.to_vec(), sealed_for_fuzzing(data)] {
        if let Ok(s) = decode(&bytes) {
            assert_eq!(decode(&encode(&s)), Ok(s));
        }
    }
});
