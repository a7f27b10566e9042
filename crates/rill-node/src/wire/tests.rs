use super::*;
use rill_object::{Content, Metadata, Object, PutMode, VClock};

fn object() -> Object {
    let mode = PutMode {
        allow_mult: true,
        last_write_wins: false,
    };
    let c = Content::new(b"value".to_vec(), Metadata::default());
    Object::coordinate_put(None, &VClock::new(), c, &b"actor".to_vec(), mode)
}

fn key() -> BKey {
    BKey::new(b"maps", b"sensors", b"k\x00\xff")
}

#[test]
fn requests_and_replies_round_trip_and_refuse_every_cut() {
    let route = Route {
        request_id: 42,
        partition: 7,
    };
    let requests = [
        VnodeRequest::Get { key: key() },
        VnodeRequest::Merge {
            key: key(),
            object: object(),
            allow_mult: true,
            prune: Some(PruneRules::default()),
        },
        VnodeRequest::Merge {
            key: key(),
            object: object(),
            allow_mult: false,
            prune: None,
        },
        VnodeRequest::Reap {
            key: key(),
            clock: object().clock,
        },
    ];
    for r in &requests {
        let b = encode_request(route, r);
        assert_eq!(decode_request(&b), Ok((route, r.clone())));
        for cut in 0..b.len() {
            assert!(decode_request(&b[..cut]).is_err(), "{r:?} cut at {cut}");
        }
        assert!(decode_reply(&b).is_err(), "a request is not a reply");
    }
    let replies = [
        VnodeReply::Found(None),
        VnodeReply::Found(Some(object())),
        VnodeReply::Stored(object()),
        VnodeReply::Reaped(true),
        VnodeReply::Failed(KvError::OutOfSpace {
            retry_after_secs: 2,
        }),
        VnodeReply::Failed(KvError::Busy("a fold".into())),
        VnodeReply::Failed(KvError::TooLarge {
            size_bytes: 10,
            max_bytes: 5,
        }),
        VnodeReply::Failed(KvError::TooManySiblings(101)),
        VnodeReply::Failed(KvError::Backend("no room".into())),
    ];
    for r in &replies {
        let b = encode_reply(route, r);
        assert_eq!(decode_reply(&b), Ok((route, r.clone())));
        for cut in 0..b.len() {
            assert!(decode_reply(&b[..cut]).is_err(), "{r:?} cut at {cut}");
        }
    }
    let mut b = encode_request(route, &requests[0]);
    b[2] = 9;
    assert_eq!(decode_request(&b), Err(WireError::Version(9)));
    b[2] = VERSION;
    b.push(0);
    assert!(matches!(decode_request(&b), Err(WireError::Malformed(_))));
}
