//! Every parser of HTTP request bytes (percent-decoding, query strings,
//! Link, X-Riak-* and Content-Type headers, base64 vclocks, the
//! connection's request-line rewriter) on arbitrary input: they must
//! answer, never panic; the rewriter gives the same bytes however its
//! input is split, and changes only `"`, `<` and `>`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    rill_api::fuzzing::http_parsers(data);
});
