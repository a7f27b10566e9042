//! What one node's cluster runtime reads from another: peer messages,
//! and inside them handoff messages, on arbitrary bytes. Each decodes or
//! is refused, never panics; what decodes encodes back to the same bytes
//! (both formats are canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_handoff::codec::HandoffMsg;
use rill_peer::msg::PeerMsg;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = PeerMsg::decode(data) {
        assert_eq!(m.encode(), data);
    }
    if let Ok(h) = HandoffMsg::decode(data) {
        assert_eq!(HandoffMsg::decode(&h.encode()), Ok(h));
    }
    // A handoff message behind a peer message's header.
    let mut wrapped = b"RP\x01\x09".to_vec();
    wrapped.extend_from_slice(data);
    if let Ok(PeerMsg::Handoff(inner)) = PeerMsg::decode(&wrapped) {
        let _ = HandoffMsg::decode(&inner);
    }
});
