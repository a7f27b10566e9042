//! A store under test: its simulated disk and clock, the model of what
//! it holds, and the writes and reopens (clean or after a power cut)
//! that keep the model in step.

use crate::common::{file_counts, ManualClock};
use crate::model::{Model, State};
use crate::{options, DIR};
use bitcask::vfs::{SimVfs, Vfs};
use bitcask::{BatchOp, Error, PutOptions, Store, SyncStrategy};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub struct Run {
    pub seed: u64,
    pub vfs: SimVfs,
    pub clock: Arc<ManualClock>,
    pub store: Option<Store>,
    pub model: Model,
    /// A write failed since the last reopen: the store may refuse writes
    /// and reads may be one of several states.
    pub troubled: bool,
    pub crashes: u64,
    /// `BITCASK_POWER_TRACE`: print every step and reopen.
    pub trace: bool,
    /// `BITCASK_POWER_WATCH=key`: print that key after every step.
    pub watch: Option<String>,
}

/// The names in the store directory, for traces.
pub fn names(vfs: &SimVfs) -> Vec<String> {
    vfs.list_dir(Path::new(DIR))
        .unwrap_or_default()
        .iter()
        .filter_map(|p| Some(p.file_name()?.to_string_lossy().into_owned()))
        .collect()
}

impl Run {
    pub fn store(&self) -> &Store {
        self.store.as_ref().expect("open")
    }

    pub fn durable_puts(&self) -> bool {
        self.store().options().sync == SyncStrategy::OSync
    }

    /// Reopens after a clean close or a power cut, and checks every key.
    pub fn reopen(&mut self, crash: bool, step: usize) {
        let ctx = format!("seed {} step {step}", self.seed);
        if self.trace {
            eprintln!(
                "reopen crash={crash} crashed={} troubled={} files {:?}",
                self.vfs.crashed(),
                self.troubled,
                names(&self.vfs)
            );
        }
        let old = self.store.take().expect("open");
        let mut crashed = crash || self.vfs.crashed();
        if crash && !self.vfs.crashed() {
            self.vfs = self.vfs.crash(self.seed.wrapping_mul(1000) + step as u64);
        }
        if crashed {
            // The old store's last writes fail: the power is out.
            drop(old);
            self.vfs = self.vfs.next_boot();
            self.crashes += 1;
        } else {
            match old.close() {
                Ok(()) if !self.troubled => self.model.synced(),
                Ok(()) => {}
                // A close that fails (a full disk, a failed fsync) may lose
                // what a power cut may: appends not yet written or synced.
                Err(_) => crashed = true,
            }
        }
        self.vfs.fail_syncs(None);
        self.vfs.set_capacity(None);
        // A power cut armed earlier may strike during recovery too.
        let mut tries = 0;
        let s = loop {
            match Store::open(DIR, options(self.seed, &self.vfs, &self.clock)) {
                Ok(s) => break s,
                Err(_) if self.vfs.crashed() && tries < 8 => {
                    self.vfs = self.vfs.next_boot();
                    crashed = true;
                    tries += 1;
                }
                Err(e) => panic!("reopen, {ctx}: {e}"),
            }
        };
        self.vfs.disarm();
        if self.trace {
            eprintln!("reopened crashed={crashed} files {:?}", names(&self.vfs));
        }
        self.model
            .check_reopened(&s, crashed, self.clock.now_s(), &ctx);
        // Statistics rebuilt by this open must equal a second rebuild.
        let counts = file_counts(&s);
        s.close().unwrap_or_else(|e| panic!("close, {ctx}: {e}"));
        let s = Store::open(DIR, options(self.seed, &self.vfs, &self.clock)).unwrap();
        assert_eq!(file_counts(&s), counts, "file statistics, {ctx}");
        self.store = Some(s);
        self.troubled = false;
    }

    pub fn write_batch(&mut self, items: Vec<(Vec<u8>, State)>) {
        let ops: Vec<BatchOp<'_>> = items
            .iter()
            .map(|(k, st)| match st {
                Some((v, _)) => BatchOp::Put { key: k, value: v },
                None => BatchOp::Delete { key: k },
            })
            .collect();
        let tracked = self.model.before_batch(&items);
        let r = self.store().write_batch(&ops);
        if self.trace {
            let keys: Vec<(String, Option<usize>)> = items
                .iter()
                .map(|(k, st)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        st.as_ref().map(|(v, _)| v.len()),
                    )
                })
                .collect();
            eprintln!("batch {keys:?}: {r:?}");
        }
        let durable = r.is_ok() && self.durable_puts();
        match r {
            Ok(()) => {
                for (k, st) in &items {
                    self.model.written(k, st.clone(), durable);
                }
            }
            Err(e) => {
                assert_failure_is_expected(&e, &self.vfs);
                self.troubled = true;
                for (k, st) in &items {
                    self.model.attempted(k, st.clone());
                }
            }
        }
        self.model.batch(tracked, durable);
    }

    pub fn write(&mut self, key: &[u8], state: State) {
        let s = self.store();
        let r = match &state {
            Some((v, exp)) => {
                let ttl = exp.map(|e| Duration::from_secs(e - self.clock.now_s()));
                s.put_with(key, v, PutOptions { ttl })
            }
            None => s.delete(key),
        };
        match r {
            Ok(()) => {
                let durable = self.durable_puts();
                self.model.written(key, state, durable);
            }
            Err(e) => {
                assert_failure_is_expected(&e, &self.vfs);
                self.troubled = true;
                self.model.attempted(key, state);
            }
        }
    }
}

/// Only the faults this test injects may fail an operation.
pub fn assert_failure_is_expected(e: &Error, vfs: &SimVfs) {
    let ok = matches!(
        e,
        Error::DiskFull { .. } | Error::PreviousIo { .. } | Error::Io { .. }
    ) || vfs.crashed();
    assert!(ok, "unexpected error: {e}");
}
