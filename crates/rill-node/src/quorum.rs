//! A request's quorum values, resolved from the request over the bucket's
//! properties (kv.rs). The rules that judge replies by them are
//! `rill-coord`'s machines.

#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadQuorum {
    pub r: u32,
    pub pr: u32,
    pub notfound_ok: bool,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct WriteQuorum {
    pub w: u32,
    pub dw: u32,
    pub pw: u32,
}
