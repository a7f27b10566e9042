//! The stored object and the client-held vclock decoders on arbitrary
//! bytes: they must reject, never panic; what decodes re-encodes to the
//! same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(o) = rill_object::decode_object(data) {
        assert_eq!(rill_object::encode_object(&o), data);
    }
    if let Ok(c) = rill_object::decode_vclock(data) {
        if !data.is_empty() {
            assert_eq!(rill_object::encode_vclock(&c), data);
        }
    }
});
