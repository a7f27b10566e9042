//! Rill's transport frames on arbitrary bytes, as a peer's socket could
//! deliver them: frames are cut out one after another; each decodes or is
//! refused. Nothing may panic, and a frame that decodes is no longer than
//! the bytes it took.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_transport::frame::{decode, MAX_FRAME_BYTES};

fuzz_target!(|data: &[u8]| {
    let mut at = 0;
    while let Ok(Some((_, used))) = decode(&data[at..]) {
        assert!(used >= 4 && used <= 4 + MAX_FRAME_BYTES && at + used <= data.len());
        at += used;
    }
});
