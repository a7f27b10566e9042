//! Rill's client APIs over a node: Riak's Protocol Buffers API (port
//! 8087) and HTTP API (port 8098).
//!
//! Invariants: a malformed or unsupported request gets an error answer
//! naming the problem and the connection stays usable (a frame whose
//! length cannot be trusted ends the connection, after an error answer);
//! no request can make the server allocate beyond its frame limit.

pub mod http;
pub mod pb;

/// The Riak release whose API Rill speaks, as `RpbGetServerInfoResp`
/// reports it (clients parse three integers and gate features on them).
pub const RIAK_COMPAT_VERSION: &str = "3.2.1";
