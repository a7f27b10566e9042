//! r, w, pr, pw, dw, rw values: a number or one of Riak's words.

use serde_json::Value;

/// Riak's PB encoding of the symbolic values (riak_pb_kv_codec).
const PB_ONE: u32 = u32::MAX - 1;
const PB_QUORUM: u32 = u32::MAX - 2;
const PB_ALL: u32 = u32::MAX - 3;
const PB_DEFAULT: u32 = u32::MAX - 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quorum {
    One,
    Quorum,
    All,
    /// Use the bucket's property.
    Default,
    N(u32),
}

impl Quorum {
    pub fn from_pb(v: u32) -> Quorum {
        match v {
            PB_ONE => Quorum::One,
            PB_QUORUM => Quorum::Quorum,
            PB_ALL => Quorum::All,
            PB_DEFAULT => Quorum::Default,
            n => Quorum::N(n),
        }
    }

    pub fn to_pb(self) -> u32 {
        match self {
            Quorum::One => PB_ONE,
            Quorum::Quorum => PB_QUORUM,
            Quorum::All => PB_ALL,
            Quorum::Default => PB_DEFAULT,
            Quorum::N(n) => n,
        }
    }

    /// From a property's JSON value or an HTTP parameter: an integer or
    /// "one", "quorum", "all", "default".
    pub fn from_json(v: &Value) -> Option<Quorum> {
        match v {
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Quorum::N),
            Value::String(s) => Quorum::parse(s),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Option<Quorum> {
        match s {
            "one" => Some(Quorum::One),
            "quorum" => Some(Quorum::Quorum),
            "all" => Some(Quorum::All),
            "default" => Some(Quorum::Default),
            s => s.parse().ok().map(Quorum::N),
        }
    }

    pub fn to_json(self) -> Value {
        match self {
            Quorum::One => "one".into(),
            Quorum::Quorum => "quorum".into(),
            Quorum::All => "all".into(),
            Quorum::Default => "default".into(),
            Quorum::N(n) => n.into(),
        }
    }

    /// The number of replies this asks for out of `n_val`; `Default`
    /// resolves through `bucket` (which must not itself be `Default`).
    pub fn resolve(self, n_val: u32, bucket: Quorum) -> u32 {
        match self {
            Quorum::One => 1,
            Quorum::Quorum => n_val / 2 + 1,
            Quorum::All => n_val,
            Quorum::N(n) => n,
            Quorum::Default => match bucket {
                Quorum::Default => n_val / 2 + 1,
                b => b.resolve(n_val, Quorum::Quorum),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn riak_quorum_table() {
        for (n, q) in [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3)] {
            assert_eq!(Quorum::Quorum.resolve(n, Quorum::Quorum), q);
        }
        assert_eq!(Quorum::from_pb(4294967294), Quorum::One);
        assert_eq!(Quorum::from_pb(4294967293), Quorum::Quorum);
        assert_eq!(Quorum::from_pb(4294967292), Quorum::All);
        assert_eq!(Quorum::from_pb(4294967291), Quorum::Default);
        assert_eq!(Quorum::from_pb(4294967295), Quorum::N(u32::MAX));
        assert_eq!(Quorum::Default.resolve(3, Quorum::All), 3);
        assert_eq!(Quorum::from_json(&"quorum".into()), Some(Quorum::Quorum));
    }
}
