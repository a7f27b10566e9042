//! Every parser of HTTP request bytes (percent-decoding, query strings,
//! Link, X-Riak-* and Content-Type headers, base64 vclocks) on arbitrary
//! input: they must answer, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rill_api::fuzzing::http_parsers(data);
});
