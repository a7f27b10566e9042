//! The cluster's sensor data as the source of `rill-promql`'s evaluator.
//! In a cluster of one it is the engine's own source (series read one at
//! a time, so aggregations hold one series at once); with other nodes,
//! each selector's series are asked of every node and merged.

use crate::SensorCluster;
use rill_promql::eval::Source;
use rill_promql::value::Series;
use rill_promql::Matcher;
use rill_tsdb::engine::ReadBudget;
use rill_tsdb::prom_source::PromSource;
use std::sync::{Arc, Mutex};

pub struct ClusterSource<'a> {
    pub cluster: &'a SensorCluster,
    /// Now, ns.
    pub now: i64,
    /// Samples a query's reads of this node may decode, when bounded.
    pub budget: Option<&'a Arc<ReadBudget>>,
    /// Why some answer of the query may lack samples, once one might.
    pub partial: Mutex<Option<String>>,
}

impl<'a> ClusterSource<'a> {
    pub fn new(cluster: &'a SensorCluster, now: i64, budget: Option<&'a Arc<ReadBudget>>) -> Self {
        ClusterSource {
            cluster,
            now,
            budget,
            partial: Mutex::new(None),
        }
    }

    fn alone(&self) -> bool {
        self.cluster.alone()
    }

    fn local(&self) -> PromSource<'_> {
        PromSource {
            engine: self.cluster.engine(),
            now: self.now,
            budget: self.budget,
            one_core: false,
        }
    }

    /// Why the query's answer may lack samples, if it may.
    pub fn partial(&self) -> Option<String> {
        self.partial
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Source for ClusterSource<'_> {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<Series>, String> {
        if self.alone() {
            return self.local().select(matchers, mint, maxt);
        }
        if let Some(b) = self.budget {
            // Other nodes are waited for on a thread that may block: a
            // query with a budget (on a thread that must not) stops here
            // and is answered again where it may.
            b.stop();
            return Err("the query waits for other nodes".into());
        }
        let got = self.cluster.select(matchers, mint, maxt, self.now)?;
        if let Some(why) = got.partial {
            *self.partial.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
        }
        Ok(got.series)
    }

    fn select_each(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        each: &mut dyn FnMut(Series) -> bool,
    ) -> Result<(), String> {
        if self.alone() {
            return self.local().select_each(matchers, mint, maxt, each);
        }
        for s in self.select(matchers, mint, maxt)? {
            if !each(s) {
                break;
            }
        }
        Ok(())
    }
}
