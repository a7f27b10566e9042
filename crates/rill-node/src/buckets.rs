//! The node's bucket registry: bucket types and bucket properties, read
//! for every request, changed one change at a time (written to
//! `meta/buckets.json` before it is put in force), merged from peers.

use crate::config::{BackendKind, NodeConfig};
use crate::error::KvError;
use crate::meta::MetaDir;
use rill_bucket::{Props, Registry, RegistryError, TypeStatus};
use serde_json::Value;
use std::sync::{Arc, Mutex, RwLock};

pub struct Buckets {
    /// Shared with a multi backend, which routes by a bucket's `backend`.
    pub(crate) registry: Arc<RwLock<Registry>>,
    /// Held while the registry changes (one change at a time, written to
    /// disk before it is put in force).
    change: Mutex<()>,
    meta: MetaDir,
    /// This node's name: the claimant a typed bucket's properties name.
    nodename: String,
    backend: BackendKind,
    /// The names of a multi backend's backends.
    multi: Vec<String>,
    /// Counts the registry's changes (anti-entropy looks whether an n_val
    /// changed when it moves).
    generation: std::sync::atomic::AtomicU64,
}

/// What a registry change's refusal says to a client.
pub(crate) fn registry_error(e: RegistryError) -> KvError {
    match e {
        RegistryError::NoSuchType(t) => KvError::NoSuchType(t),
        RegistryError::Props(p) => KvError::Props(p.to_string()),
        RegistryError::DefaultType => {
            KvError::Props("Invalid bucket properties: no_default_update".into())
        }
        other => KvError::Props(other.to_string()),
    }
}

impl Buckets {
    /// The registry kept in `meta` (empty when there is none yet).
    pub(crate) fn load(meta: MetaDir, config: &NodeConfig) -> Result<Buckets, crate::OpenError> {
        let registry = match meta.read("buckets.json")? {
            Some(v) => Registry::from_json(&v).map_err(crate::OpenError::Buckets)?,
            None => Registry::new(),
        };
        Ok(Buckets {
            registry: Arc::new(RwLock::new(registry)),
            change: Mutex::new(()),
            meta,
            nodename: config.nodename.clone(),
            backend: config.backend,
            multi: config.multi.iter().map(|b| b.name.clone()).collect(),
            generation: Default::default(),
        })
    }

    pub(crate) fn registry(&self) -> std::sync::RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    fn change_registry(
        &self,
        f: impl FnOnce(&mut Registry) -> Result<(), RegistryError>,
    ) -> Result<(), KvError> {
        // Changes are made one at a time; readers (every request) take
        // the lock only to copy out, never across the write to disk.
        let _one = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let reg = self.registry().clone();
        let mut next = reg.clone();
        f(&mut next).map_err(registry_error)?;
        // Stamped, so the change wins over older copies when the cluster
        // runtime gossips the registry.
        next.stamp_changes(&reg, &self.nodename);
        self.persist_registry(next)
    }

    /// Writes `next` to disk, then puts it in force (under the change
    /// lock).
    fn persist_registry(&self, next: Registry) -> Result<(), KvError> {
        self.meta
            .write("buckets.json", &next.to_json())
            .map_err(|e| KvError::Backend(format!("cannot persist bucket properties: {e}")))?;
        *self.registry.write().unwrap_or_else(|e| e.into_inner()) = next;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// How many times the registry changed in this run.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The bucket types and properties as JSON (what `buckets.json`
    /// holds), for the cluster runtime to gossip, with the highest stamp
    /// version in it.
    pub fn registry_json(&self) -> (Value, u64) {
        let reg = self.registry();
        (reg.to_json(), reg.stamp_version())
    }

    /// Takes in another node's registry (entry by entry, the later write
    /// winning) and keeps the result on disk. True when it changed.
    pub fn merge_registry(&self, theirs: &Value) -> Result<bool, KvError> {
        let theirs = Registry::from_json(theirs)
            .map_err(|e| KvError::BadRequest(format!("a peer's bucket registry: {e}")))?;
        let _one = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.registry().clone();
        if !next.merge(&theirs) {
            return Ok(false);
        }
        self.persist_registry(next)?;
        Ok(true)
    }

    /// The n_val of a stored key's bucket (`bucket_type` as a vnode
    /// stores it: empty for the default type); 3 when unset or when the
    /// type is gone.
    /// Every n_val a key may be stored with now (sorted).
    pub fn n_vals_in_use(&self) -> Vec<u32> {
        self.registry().n_vals_in_use()
    }

    /// The n_val of a bucket's keys (3 where nothing says otherwise).
    pub fn n_val_of(&self, bucket_type: &[u8], bucket: &[u8]) -> u32 {
        let t = std::str::from_utf8(bucket_type).unwrap_or("");
        self.registry()
            .bucket_prop(t, bucket, "n_val")
            .and_then(|v| v.as_u64())
            .map_or(3, |n| n as u32)
    }

    /// The properties in force for a bucket, for KV requests (`no_type`
    /// when the type is missing or inactive).
    pub(crate) fn props_for_kv(&self, bucket_type: &[u8], bucket: &[u8]) -> Result<Props, KvError> {
        let t = std::str::from_utf8(bucket_type).map_err(|_| KvError::NoType)?;
        self.registry()
            .bucket_props(t, bucket)
            .ok_or(KvError::NoType)
    }

    /// A bucket's properties as RpbGetBucketReq and GET /props return
    /// them, with `name` (and `active`/`claimant` for typed buckets).
    pub fn bucket_props(&self, bucket_type: &str, bucket: &[u8]) -> Result<Props, KvError> {
        let mut p = self
            .registry()
            .bucket_props(bucket_type, bucket)
            .ok_or_else(|| KvError::NoSuchType(bucket_type.to_string()))?;
        p.insert(
            "name".into(),
            Value::String(String::from_utf8_lossy(bucket).into_owned()),
        );
        if !(bucket_type.is_empty() || bucket_type == "default") {
            p.insert("active".into(), true.into());
            p.insert("claimant".into(), self.nodename.clone().into());
        }
        Ok(p)
    }

    pub fn set_bucket_props(
        &self,
        bucket_type: &str,
        bucket: &[u8],
        props: &Props,
    ) -> Result<(), KvError> {
        self.check_backend_prop(props)?;
        self.change_registry(|r| r.set_bucket(bucket_type, bucket, props))
    }

    /// A `backend` property must name one of the node's backends where
    /// the node has several (`storage_backend = multi`); elsewhere Riak
    /// ignores it, and so does Rill.
    fn check_backend_prop(&self, props: &Props) -> Result<(), KvError> {
        let Some(v) = props.get("backend") else {
            return Ok(());
        };
        if self.backend != BackendKind::Multi {
            return Ok(());
        }
        let known = |n: &str| self.multi.iter().any(|b| b == n);
        match v.as_str() {
            Some(n) if known(n) => Ok(()),
            _ => Err(KvError::BadRequest(format!(
                "{{undefined_backend,{v}}}: backend must name one of this node's backends: {}",
                self.multi.join(", ")
            ))),
        }
    }

    pub fn reset_bucket_props(&self, bucket_type: &str, bucket: &[u8]) -> Result<(), KvError> {
        self.change_registry(|r| r.reset_bucket(bucket_type, bucket))
    }

    /// A type's properties (`Invalid bucket type` when missing or
    /// inactive, as RpbGetBucketTypeReq answers).
    pub fn type_props(&self, name: &str) -> Result<Props, KvError> {
        match self.registry().get_type(name) {
            Some((mut p, TypeStatus::Active)) => {
                if !(name.is_empty() || name == "default") {
                    p.insert("active".into(), true.into());
                    p.insert("claimant".into(), self.nodename.clone().into());
                }
                Ok(p)
            }
            _ => Err(KvError::InvalidType(name.to_string())),
        }
    }

    pub fn type_status(&self, name: &str) -> Option<(Props, TypeStatus)> {
        self.registry().get_type(name)
    }

    pub fn list_types(&self) -> Vec<(String, TypeStatus)> {
        self.registry().list_types()
    }

    pub fn create_type(&self, name: &str, props: &Props) -> Result<(), KvError> {
        self.check_backend_prop(props)?;
        self.change_registry(|r| r.create_type(name, props))
    }

    pub fn activate_type(&self, name: &str) -> Result<(), KvError> {
        self.change_registry(|r| r.activate_type(name))
    }

    pub fn update_type(&self, name: &str, props: &Props) -> Result<(), KvError> {
        self.check_backend_prop(props)?;
        self.change_registry(|r| r.update_type(name, props))
    }
}
