//! Stores of the layout before home partitions (one per database) moved
//! into shards when the engine opens: each block put into the shard of
//! its group's home under the same key and expiry, the shards synced,
//! then the old store deleted. A crash on the way leaves the old store,
//! and the next open moves it again (the same keys, the same values).

use super::{flush::expiry_s, Db, EngineError, EngineOptions};
use crate::catalog::Catalog;
use crate::keys::parse_block_key;
use crate::storage::{BlockStore, Storage};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Moves database `name`'s legacy store into its shards (opened into
/// `dbs`); how many blocks were moved.
pub(super) fn move_into_shards(
    opts: &EngineOptions,
    storage: &dyn Storage,
    catalog: &Catalog,
    name: &str,
    dbs: &mut HashMap<String, Db>,
) -> Result<u64, EngineError> {
    storage.create(name)?;
    let legacy = storage.legacy(name)?;
    let homes = catalog.group_homes();
    let retention_ns = opts.retention(name);
    let mut shards: BTreeMap<u32, Arc<dyn BlockStore>> = BTreeMap::new();
    let (mut moved, mut lost) = (0u64, 0u64);
    let mut failed: Option<std::io::Error> = None;
    legacy.fold(&mut |k, v| {
        if failed.is_some() {
            return;
        }
        let Some((group, window, _)) = parse_block_key(k) else {
            lost += 1;
            return;
        };
        let Some(&home) = homes.get(&group) else {
            // No series of it is known: no read could find it.
            lost += 1;
            return;
        };
        let shard = match shards.get(&home) {
            Some(s) => s.clone(),
            None => match storage.shard(name, home) {
                Ok(s) => shards.entry(home).or_insert(s).clone(),
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            },
        };
        let expires = expiry_s(window, opts.window_ns, retention_ns);
        match shard.put(k, v, Some(expires)) {
            Ok(()) => moved += 1,
            Err(e) => failed = Some(e),
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    for s in shards.values() {
        s.sync()?;
    }
    drop(legacy);
    storage.remove_legacy(name)?;
    if lost > 0 {
        tracing::error!(
            db = name,
            blocks = lost,
            "blocks of unknown series in an old sensor store were left behind"
        );
    }
    if moved > 0 {
        tracing::info!(
            db = name,
            blocks = moved,
            "an old sensor store was moved into home partitions"
        );
    }
    let d = dbs
        .entry(name.to_string())
        .or_insert_with(|| super::Engine::make_db(opts, name));
    for (home, s) in shards {
        d.stores.insert(home, opts.block_cache.wrap(s));
    }
    Ok(moved)
}
