//! Blocks written by the first format version stay readable.

use rill_sensor::block::{decode, Codec};

#[test]
fn a_version_1_block_of_one_sample() {
    // Built by hand from docs/format.md ("Sensor block"): a Gorilla block
    // of one sample, 21.5 at 10^18 ns, time unit 10^9.
    let bytes = include_bytes!("fixtures/block-v1-one-sample.bin");
    let (h, samples) = decode(bytes).unwrap();
    assert_eq!(h.codec, Codec::Gorilla);
    assert_eq!(
        (h.count, h.first_ts, h.min, h.sum),
        (1, 1_000_000_000_000_000_000, 21.5, 21.5)
    );
    assert_eq!(samples.len(), 1);
    assert_eq!(
        (samples[0].ts, samples[0].value),
        (1_000_000_000_000_000_000, 21.5)
    );
}
