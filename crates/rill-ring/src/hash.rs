//! Riak's key hash: `crypto:hash(sha, term_to_binary(BKey))`.

/// A position on the ring: 20 bytes of SHA-1, big-endian.
pub type KeyHash = [u8; 20];

const VERSION: u8 = 131;
const SMALL_TUPLE_EXT: u8 = 104;
const BINARY_EXT: u8 = 109;

fn binary(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(BINARY_EXT);
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// The external term format of `{Bucket, Key}`, where Bucket is the
/// binary `bucket` for the default type and the tuple `{Type, Bucket}`
/// otherwise (Riak normalises `{<<"default">>, B}` to `B`).
pub fn term_to_binary_bucket_key(bucket_type: &[u8], bucket: &[u8], key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + bucket_type.len() + bucket.len() + key.len());
    out.extend_from_slice(&[VERSION, SMALL_TUPLE_EXT, 2]);
    if bucket_type.is_empty() || bucket_type == b"default" {
        binary(&mut out, bucket);
    } else {
        out.extend_from_slice(&[SMALL_TUPLE_EXT, 2]);
        binary(&mut out, bucket_type);
        binary(&mut out, bucket);
    }
    binary(&mut out, key);
    out
}

/// The ring position of a key, as Riak's `chash:key_of/1` gives it.
pub fn key_hash(bucket_type: &[u8], bucket: &[u8], key: &[u8]) -> KeyHash {
    let mut h = sha1_smol::Sha1::new();
    h.update(&term_to_binary_bucket_key(bucket_type, bucket, key));
    h.digest().bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(h: &[u8]) -> String {
        h.iter().map(|b| format!("{b:02x}")).collect()
    }

    // The SHA-1 of {<<"foo">>, <<"bar">>} appears as DocIdx in riak_core's
    // riak_core_apl six_node_test.
    #[test]
    fn default_type_hash_matches_riak_core() {
        assert_eq!(
            hex(&term_to_binary_bucket_key(b"default", b"foo", b"bar")),
            "8368026d00000003666f6f6d00000003626172"
        );
        assert_eq!(
            hex(&key_hash(b"default", b"foo", b"bar")),
            "49d41bea680d96cf005256b77de1ac9a872e0670"
        );
        assert_eq!(
            key_hash(b"", b"foo", b"bar"),
            key_hash(b"default", b"foo", b"bar")
        );
    }

    #[test]
    fn typed_buckets_hash_the_type_bucket_tuple() {
        assert_eq!(
            hex(&term_to_binary_bucket_key(b"maps", b"b", b"k")),
            "83680268026d000000046d6170736d00000001626d000000016b"
        );
    }
}
