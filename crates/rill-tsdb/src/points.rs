//! A series' samples as a query reads them.

/// A series' samples as two columns: times (ms, rising) and values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Points {
    pub ts: Vec<i64>,
    pub v: Vec<f64>,
}

impl Points {
    pub fn with_capacity(n: usize) -> Points {
        Points {
            ts: Vec::with_capacity(n),
            v: Vec::with_capacity(n),
        }
    }

    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// The points as (ms, value) pairs.
    pub fn iter(&self) -> impl Iterator<Item = (i64, f64)> + '_ {
        self.ts.iter().copied().zip(self.v.iter().copied())
    }
}

impl FromIterator<(i64, f64)> for Points {
    fn from_iter<I: IntoIterator<Item = (i64, f64)>>(it: I) -> Points {
        let (ts, v) = it.into_iter().unzip();
        Points { ts, v }
    }
}
