//! The stored object, data type and client-held context decoders on
//! arbitrary bytes: they must reject, never panic; what decodes
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(o) = rill_object::decode_object(data) {
        assert_eq!(rill_object::encode_object(&o), data);
    }
    if let Ok(c) = rill_crdt::Crdt::decode(data) {
        let _ = c.value();
        assert_eq!(rill_crdt::Crdt::decode(&c.encode()).unwrap(), c);
    }
    if let Some(c) = rill_crdt::Clock::decode(data) {
        assert_eq!(rill_crdt::Clock::decode(&c.encode()), Some(c));
    }
    if let Ok(c) = rill_object::decode_vclock(data) {
        if !data.is_empty() {
            assert_eq!(rill_object::encode_vclock(&c), data);
        }
    }
});
