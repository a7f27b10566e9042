//! The simulation's repairs: a node's anti-entropy exchange with its
//! partner and its handoff of homes it holds without owning them, each
//! the service's own code (`exchange_home`, `hand_off_home`) over the
//! simulated network.

use super::{name, SensorSim};
use rill_sensor_cluster::exchange::{exchange_home, partner, ExchangeReport};
use rill_sensor_cluster::handoff::{hand_off_home, owners};
use rill_sensor_cluster::msg::{Reply, Request};

impl SensorSim {
    /// Every one of `homes`, or one drawn at random (none if empty).
    fn one_or_all(&mut self, homes: Vec<(String, u32)>, all: bool) -> Vec<(String, u32)> {
        if all {
            return homes;
        }
        self.rng.pick(&homes).cloned().into_iter().collect()
    }

    /// Node `c` exchanges one of the homes it holds and owns (or all of
    /// them) with its partner; the slices found different.
    pub(super) fn exchange(&mut self, c: usize, all: bool) -> usize {
        let homes = self.engine(c).homes();
        let mut found = 0;
        for (db, home) in self.one_or_all(homes, all) {
            let to = owners(&self.ring, home, self.cfg.n);
            let up: Vec<bool> = (0..self.cfg.nodes).map(|x| self.reachable(c, x)).collect();
            let Some(peer) = partner(&to, &name(c), |o| up[self.index(o)]) else {
                continue;
            };
            let peer = self.index(peer);
            let engine = self.engine(c).clone();
            let mut report = ExchangeReport::default();
            let no_repair = self.cfg.no_repair;
            let now = self.now();
            let r = exchange_home(
                &engine,
                &db,
                home,
                now,
                7,
                &mut |req| {
                    if no_repair && !matches!(req, Request::Digests { .. }) {
                        return Err("no repair (a deliberate fault)".into());
                    }
                    self.call(c, peer, req).ok_or_else(|| "lost".to_string())
                },
                &mut report,
            );
            found += report.slices_differing;
            self.log(format!(
                "{} exchanges home {home} with {}: {} slices differ, {} sent, {} taken{}",
                name(c),
                name(peer),
                report.slices_differing,
                report.samples_sent,
                report.samples_taken,
                r.err().map(|e| format!(" ({e})")).unwrap_or_default()
            ));
        }
        found
    }

    /// Node `c` hands off one of the homes it holds without owning them
    /// (or all of them) to their owners, once every owner is reachable
    /// (the service's handoff round, by its rule); the homes handed off.
    pub(super) fn hand_off(&mut self, c: usize, all: bool) -> usize {
        let me = name(c);
        let homes: Vec<(String, u32)> = self
            .engine(c)
            .homes()
            .into_iter()
            .filter(|(_, home)| !owners(&self.ring, *home, self.cfg.n).contains(&me))
            .collect();
        let mut handed = 0;
        for (db, home) in self.one_or_all(homes, all) {
            let to: Vec<usize> = owners(&self.ring, home, self.cfg.n)
                .iter()
                .map(|o| self.index(o))
                .collect();
            if !to.iter().all(|&x| self.reachable(c, x)) {
                continue;
            }
            let engine = self.engine(c).clone();
            let now = self.now();
            let nothing = self.cfg.hand_off_nothing;
            let r = hand_off_home(&engine, &db, home, now, &mut |req| {
                if nothing {
                    return Ok(());
                }
                for &x in &to {
                    match self.call(c, x, req) {
                        Some(Reply::Written(_)) => {}
                        Some(other) => return Err(format!("{}: {other:?}", name(x))),
                        None => return Err("lost".into()),
                    }
                }
                Ok(())
            });
            if matches!(r, Ok(Some(_))) {
                handed += 1;
            }
            self.log(format!(
                "{me} hands off home {home} to {}: {}",
                to.iter().map(|&x| name(x)).collect::<Vec<_>>().join(" "),
                match r {
                    Ok(Some(n)) => format!("{n} samples sent, dropped"),
                    Ok(None) => "written meanwhile, kept".into(),
                    Err(e) => format!("failed ({e})"),
                }
            ));
        }
        handed
    }
}
