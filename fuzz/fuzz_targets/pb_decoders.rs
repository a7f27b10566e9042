//! Riak PB framing and message decoding on arbitrary bytes, as a socket
//! could deliver them: frames are cut out under a size limit and each is
//! decoded as a request and as a response. Nothing may panic.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use rill_pb::{FrameDecoder, Request, Response};

fuzz_target!(|data: &[u8]| {
    let decoder = FrameDecoder::new(1 << 16);
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        let _ = Request::decode(&frame);
        let _ = Response::decode(&frame);
    }
});
