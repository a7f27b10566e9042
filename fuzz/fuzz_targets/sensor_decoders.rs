//! The sensor-data decoders on arbitrary input: blocks (as read from the
//! store, and with their checksum made right so the fuzzer reaches the
//! sections behind it) and line protocol bodies. Nothing may panic; a
//! block that decodes re-encodes to samples that decode the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_sensor::block::{decode, encode, Choice};

fn block(bytes: &[u8]) {
    if let Ok((h, samples)) = decode(bytes) {
        assert_eq!(h.count as usize, samples.len());
        let again = encode(&samples, Choice::Smallest).expect("decoded samples encode");
        let (_, back) = decode(&again).expect("a fresh block decodes");
        assert!(samples
            .iter()
            .zip(&back)
            .all(|(a, b)| a.ts == b.ts && a.value.to_bits() == b.value.to_bits()));
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => block(rest),
        1 => {
            let mut b = rest.to_vec();
            if b.len() >= 4 {
                let n = b.len() - 4;
                let crc = crc32fast::hash(&b[..n]);
                b[n..].copy_from_slice(&crc.to_le_bytes());
            }
            block(&b);
        }
        _ => {
            if let Ok(body) = std::str::from_utf8(rest) {
                let (points, errors) = rill_sensor::line::parse(body);
                for p in &points {
                    assert!(!p.measurement.is_empty() && !p.fields.is_empty());
                }
                for e in &errors {
                    assert!(e.line >= 1);
                }
            }
        }
    }
});
