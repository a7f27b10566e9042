//! Where a Prometheus query runs: on the thread that took its request
//! when it is short, else on the blocking pool (docs/sensors.md, "Where
//! a query runs").

use rill_tsdb::engine::ReadBudget;
use std::sync::Arc;

/// Work a query may do on the thread that took its request, in samples
/// decoded (about a millisecond's work: a month of one sensor sampled
/// every minute at 1,000 points is ~60,000): handing a query to the
/// blocking pool and its answer back costs two thread wake-ups, ~15 % of
/// such a query; a longer one would hold the thread from the other
/// connections it serves.
const INLINE_SAMPLES: u64 = 100_000;

/// `run`'s answer: tried here with a budget of [`INLINE_SAMPLES`], and
/// on the blocking pool without one when it would do more or wait for
/// the device (what it did so far is done again: at most the budget).
/// An answer completed here is kept even if the budget was spent on the
/// way.
pub(crate) async fn answer<F, E>(run: F) -> Result<String, E>
where
    F: Fn(Option<&Arc<ReadBudget>>) -> Result<String, E> + Send + 'static,
    E: Send + 'static,
{
    let budget = Arc::new(ReadBudget::new(INLINE_SAMPLES));
    let here = run(Some(&budget));
    // An answer is whole whenever it is one (a read within the budget
    // can still spend it: a window a helper and the request's thread
    // both read counts twice).
    if here.is_ok() || !budget.spent() {
        return here;
    }
    crate::blocking(move || run(None)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query within the inline budget is answered on the thread that
    /// took it, once; one that spends it and fails is answered again, on
    /// the blocking pool, without a budget; a whole answer is kept.
    #[test]
    fn a_query_past_its_inline_budget_is_answered_on_the_pool() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let here = std::thread::current().id();
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let short = rt.block_on(answer::<_, String>(move |b| {
            c.fetch_add(1, Ordering::SeqCst);
            let b = b.ok_or("no budget")?;
            assert!(b.take(INLINE_SAMPLES as usize));
            Ok(format!("{}", std::thread::current().id() == here))
        }));
        assert_eq!(short, Ok("true".into()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let c = calls.clone();
        let long = rt.block_on(answer::<_, String>(move |b| {
            c.fetch_add(1, Ordering::SeqCst);
            match b {
                Some(b) => {
                    b.take(INLINE_SAMPLES as usize + 1);
                    Err("over budget".into())
                }
                None => Ok(format!("{}", std::thread::current().id() == here)),
            }
        }));
        assert_eq!(long, Ok("false".into()));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // A whole answer that spent the budget on the way is kept.
        let c = calls.clone();
        let whole = rt.block_on(answer::<_, String>(move |b| {
            c.fetch_add(1, Ordering::SeqCst);
            let b = b.ok_or("no budget")?;
            b.stop();
            Ok("here".to_string())
        }));
        assert_eq!(whole, Ok("here".into()));
        assert_eq!(calls.load(Ordering::SeqCst), 4);
    }
}
