//! Riak's Protocol Buffers API on the wire (riak_pb's definitions): the message
//! types generated from Riak's .proto files, the one-byte message codes,
//! and the frame `<u32 big-endian length L><code><L-1 bytes of protobuf>`.
//!
//! Invariants: a decoder never allocates more than the frame limit it is
//! given, never panics on any input, and names what it expected and what
//! it found when it refuses bytes.

pub mod codes;
mod frame;
mod message;

#[allow(clippy::all, missing_docs)]
#[rustfmt::skip]
pub mod pb {
    //! The messages of riak.proto, riak_kv.proto and riak_dt.proto.
    include!("generated.rs");
}

pub use frame::{encode_frame, FrameDecoder, FrameError, RawFrame, DEFAULT_MAX_FRAME_BYTES};
pub use message::{DecodeError, Request, Response};
