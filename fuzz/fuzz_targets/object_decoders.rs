//! The stored object, data type, client-held context, 2i continuation,
//! counter lease, Tictac tree and vnode message decoders on arbitrary bytes: they must reject, never panic; what
//! decodes re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Copied or shared values: the same object either way.
    let shared = bytes::Bytes::copy_from_slice(data);
    match rill_object::decode_object(data) {
        Ok(o) => {
            assert_eq!(rill_object::encode_object(&o), data);
            assert_eq!(rill_object::decode_object_shared(&shared), Ok(o));
        }
        Err(e) => assert_eq!(rill_object::decode_object_shared(&shared), Err(e)),
    }
    if let Ok(c) = rill_crdt::Crdt::decode(data) {
        let _ = c.value();
        assert_eq!(rill_crdt::Crdt::decode(&c.encode()).unwrap(), c);
    }
    if let Some(c) = rill_crdt::Clock::decode(data) {
        assert_eq!(rill_crdt::Clock::decode(&c.encode()), Some(c));
    }
    // A node's counter lease file, for each ring size a node may have.
    for n in [0usize, 1, 8, 64, 1024] {
        if let Some(t) = rill_node::vnode::lease::decode_file(data, n) {
            assert_eq!(t.ends.len(), n);
            let slot = rill_node::vnode::lease::encode_slot(&t);
            assert_eq!(rill_node::vnode::lease::decode_slot(&slot), Some(t));
        }
    }
    // A vnode's persisted Tictac tree: what decodes encodes the same.
    if let Ok(t) = rill_aae::TictacTree::decode(data) {
        assert_eq!(rill_aae::TictacTree::decode(&t.encode()), Ok(t));
    }
    // A vnode's tree set kept across a clean stop.
    if let Ok(t) = rill_aae::Trees::decode(data) {
        let bytes = t.encode().expect("decoded trees are built");
        let again = rill_aae::Trees::decode(&bytes).expect("re-decodes");
        assert_eq!(again.encode(), Some(bytes));
    }
    // A 2i continuation, as a client sends it back.
    if let Some((term, key)) = rill_node::decode_continuation(data) {
        let again = rill_node::encode_continuation(&term, &key);
        assert_eq!(rill_node::decode_continuation(&again), Some((term, key)));
    }
    if let Ok(c) = rill_object::decode_vclock(data) {
        if !data.is_empty() {
            assert_eq!(rill_object::encode_vclock(&c), data);
        }
    }
    // A vnode request or reply, as a peer node could send it.
    assert_eq!(
        rill_node::wire::decode_request_shared(&shared),
        rill_node::wire::decode_request(data)
    );
    assert_eq!(
        rill_node::wire::decode_reply_shared(&shared),
        rill_node::wire::decode_reply(data)
    );
    if let Ok((route, req)) = rill_node::wire::decode_request(data) {
        let again = rill_node::wire::encode_request(route, &req);
        assert_eq!(rill_node::wire::decode_request(&again), Ok((route, req)));
    }
    if let Ok((route, reply)) = rill_node::wire::decode_reply(data) {
        let again = rill_node::wire::encode_reply(route, &reply);
        assert_eq!(rill_node::wire::decode_reply(&again), Ok((route, reply)));
    }
});
