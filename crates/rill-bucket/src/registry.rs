//! The bucket types of a node and the properties set on buckets.

use crate::props::{default_type_props, new_type_defaults, validate, Props, PropsError};
use crate::stamps::{EntryKey, Stamp};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Riak's type states on one node: created types are ready at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TypeStatus {
    Created,
    Active,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RegistryError {
    #[error("{0}")]
    Props(#[from] PropsError),
    #[error("bucket type {0} already exists and is active")]
    AlreadyActive(String),
    #[error("The name 'any' may not be used for bucket types")]
    ReservedName,
    #[error("bucket type names must be non-empty UTF-8 without '/' or spaces: {0:?}")]
    BadName(String),
    #[error("{0} is not an existing bucket type")]
    NoSuchType(String),
    #[error("bucket type {0} is not active")]
    NotActive(String),
    #[error("the default bucket type cannot be changed (no_default_update)")]
    DefaultType,
    #[error("malformed bucket registry: {0}")]
    Malformed(String),
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TypeEntry {
    props: Props,
    status: TypeStatus,
}

/// Every bucket type and every bucket's own properties.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Registry {
    pub(crate) types: BTreeMap<String, TypeEntry>,
    pub(crate) buckets: BTreeMap<(String, Vec<u8>), Props>,
    /// When each entry was last written, and by whom (`stamps`).
    pub(crate) stamps: crate::stamps::Stamps,
}

fn is_default(t: &str) -> bool {
    t.is_empty() || t == "default"
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// A type's properties and status; the default type always exists.
    pub fn get_type(&self, name: &str) -> Option<(Props, TypeStatus)> {
        if is_default(name) {
            return Some((default_type_props(), TypeStatus::Active));
        }
        self.types.get(name).map(|t| (t.props.clone(), t.status))
    }

    /// Whether keys may be stored under this type.
    pub fn is_active(&self, name: &str) -> bool {
        matches!(self.get_type(name), Some((_, TypeStatus::Active)))
    }

    /// `default (active)` first, then each type by name.
    pub fn list_types(&self) -> Vec<(String, TypeStatus)> {
        let mut out = vec![("default".to_string(), TypeStatus::Active)];
        out.extend(self.types.iter().map(|(n, t)| (n.clone(), t.status)));
        out
    }

    pub fn create_type(&mut self, name: &str, props: &Props) -> Result<(), RegistryError> {
        if name == "any" {
            return Err(RegistryError::ReservedName);
        }
        if is_default(name) {
            return Err(RegistryError::DefaultType);
        }
        if name.is_empty() || name.contains(['/', ' ']) {
            return Err(RegistryError::BadName(name.into()));
        }
        if let Some(t) = self.types.get(name) {
            if t.status == TypeStatus::Active {
                return Err(RegistryError::AlreadyActive(name.into()));
            }
        }
        let merged = validate(&new_type_defaults(), props, true)?;
        self.types.insert(
            name.into(),
            TypeEntry {
                props: merged,
                status: TypeStatus::Created,
            },
        );
        Ok(())
    }

    pub fn activate_type(&mut self, name: &str) -> Result<(), RegistryError> {
        match self.types.get_mut(name) {
            Some(t) => {
                t.status = TypeStatus::Active;
                Ok(())
            }
            None if is_default(name) => Ok(()),
            None => Err(RegistryError::NoSuchType(name.into())),
        }
    }

    pub fn update_type(&mut self, name: &str, props: &Props) -> Result<(), RegistryError> {
        if is_default(name) {
            return Err(RegistryError::DefaultType);
        }
        let t = self
            .types
            .get_mut(name)
            .ok_or_else(|| RegistryError::NoSuchType(name.into()))?;
        if t.status != TypeStatus::Active {
            return Err(RegistryError::NotActive(name.into()));
        }
        t.props = validate(&t.props, &strip_fixed(props), false)?;
        Ok(())
    }

    /// A bucket's properties: its own over its type's over the defaults,
    /// without `name`. `None` when the type does not exist or is not active.
    pub fn bucket_props(&self, bucket_type: &str, bucket: &[u8]) -> Option<Props> {
        let (mut props, status) = self.get_type(bucket_type)?;
        if status != TypeStatus::Active {
            return None;
        }
        let key = (canonical(bucket_type), bucket.to_vec());
        if let Some(own) = self.buckets.get(&key) {
            for (k, v) in own {
                props.insert(k.clone(), v.clone());
            }
        }
        Some(props)
    }

    /// One property of a bucket (its own over its type's over the
    /// defaults), without building the whole set: the multi backend asks
    /// it for `backend` on every request. `None` when unset, or when the
    /// type does not exist or is not active.
    pub fn bucket_prop(&self, bucket_type: &str, bucket: &[u8], name: &str) -> Option<Value> {
        let key = (canonical(bucket_type), bucket.to_vec());
        if let Some(v) = self.buckets.get(&key).and_then(|own| own.get(name)) {
            return Some(v.clone());
        }
        if is_default(bucket_type) {
            return crate::props::default_type_prop(name).cloned();
        }
        let t = self.types.get(bucket_type)?;
        if t.status != TypeStatus::Active {
            return None;
        }
        t.props.get(name).cloned()
    }

    /// Every n_val a key may be stored with: the default type's, each
    /// active type's and each bucket's own (anti-entropy keeps a tree per
    /// n_val in use). Sorted, no repeats.
    pub fn n_vals_in_use(&self) -> Vec<u32> {
        let n = |p: &Props| p.get("n_val").and_then(|v| v.as_u64()).map(|v| v as u32);
        let mut out: Vec<u32> = n(&default_type_props()).into_iter().collect();
        out.extend(
            self.types
                .values()
                .filter(|t| t.status == TypeStatus::Active)
                .filter_map(|t| n(&t.props)),
        );
        out.extend(self.buckets.values().filter_map(n));
        out.sort_unstable();
        out.dedup();
        out
    }

    /// A digest of every n_val set on a type or a bucket: when it
    /// changes, keys may belong to other preference lists' trees.
    pub fn n_val_digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes.iter().chain(&[0xff]) {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        };
        let n = |p: &Props| p.get("n_val").and_then(|v| v.as_u64());
        for (name, t) in &self.types {
            if let Some(v) = n(&t.props) {
                eat(name.as_bytes());
                eat(&v.to_be_bytes());
            }
        }
        for ((t, b), props) in &self.buckets {
            if let Some(v) = n(props) {
                eat(t.as_bytes());
                eat(b);
                eat(&v.to_be_bytes());
            }
        }
        h
    }

    pub fn set_bucket(
        &mut self,
        bucket_type: &str,
        bucket: &[u8],
        props: &Props,
    ) -> Result<(), RegistryError> {
        let current = self
            .bucket_props(bucket_type, bucket)
            .ok_or_else(|| RegistryError::NoSuchType(canonical(bucket_type)))?;
        let update = strip_fixed(props);
        let merged = validate(&current, &update, false)?;
        let key = (canonical(bucket_type), bucket.to_vec());
        let own = self.buckets.entry(key).or_default();
        for k in update.keys() {
            own.insert(k.clone(), merged[k].clone());
        }
        Ok(())
    }

    pub fn reset_bucket(&mut self, bucket_type: &str, bucket: &[u8]) -> Result<(), RegistryError> {
        if !self.is_active(bucket_type) {
            return Err(RegistryError::NoSuchType(canonical(bucket_type)));
        }
        self.buckets
            .remove(&(canonical(bucket_type), bucket.to_vec()));
        Ok(())
    }

    /// The registry as JSON, for the node's metadata file.
    pub fn to_json(&self) -> Value {
        let types: Map<String, Value> = self
            .types
            .iter()
            .map(|(n, t)| {
                let status = match t.status {
                    TypeStatus::Created => "created",
                    TypeStatus::Active => "active",
                };
                (n.clone(), json!({"status": status, "props": t.props}))
            })
            .collect();
        let buckets: Vec<Value> = self
            .buckets
            .iter()
            .map(|((t, b), p)| json!({"type": t, "bucket": hex(b), "props": p}))
            .collect();
        let stamps: Vec<Value> = self
            .stamps
            .iter()
            .map(|(k, st)| match k {
                EntryKey::Type(n) => json!({"type": n, "v": st.version, "w": st.writer}),
                EntryKey::Bucket(t, b) => {
                    json!({"type": t, "bucket": hex(b), "v": st.version, "w": st.writer})
                }
            })
            .collect();
        json!({"types": types, "buckets": buckets, "stamps": stamps})
    }

    pub fn from_json(v: &Value) -> Result<Registry, RegistryError> {
        let bad = |what: &str| RegistryError::Malformed(what.to_string());
        let mut r = Registry::new();
        for (name, t) in v["types"].as_object().ok_or_else(|| bad("types"))? {
            let status = match t["status"].as_str() {
                Some("created") => TypeStatus::Created,
                Some("active") => TypeStatus::Active,
                _ => return Err(bad("type status")),
            };
            let props = t["props"]
                .as_object()
                .ok_or_else(|| bad("type props"))?
                .clone();
            r.types.insert(name.clone(), TypeEntry { props, status });
        }
        for b in v["buckets"].as_array().ok_or_else(|| bad("buckets"))? {
            let t = b["type"].as_str().ok_or_else(|| bad("bucket type"))?;
            let name = unhex(b["bucket"].as_str().ok_or_else(|| bad("bucket"))?)
                .ok_or_else(|| bad("bucket name"))?;
            let props = b["props"]
                .as_object()
                .ok_or_else(|| bad("bucket props"))?
                .clone();
            r.buckets.insert((t.to_string(), name), props);
        }
        // Files written before stamps have none.
        for st in v["stamps"].as_array().into_iter().flatten() {
            let t = st["type"].as_str().ok_or_else(|| bad("stamp type"))?;
            let key = match st.get("bucket") {
                Some(b) => EntryKey::Bucket(
                    t.to_string(),
                    unhex(b.as_str().ok_or_else(|| bad("stamp bucket"))?)
                        .ok_or_else(|| bad("stamp bucket name"))?,
                ),
                None => EntryKey::Type(t.to_string()),
            };
            let stamp = Stamp {
                version: st["v"].as_u64().ok_or_else(|| bad("stamp version"))?,
                writer: st["w"]
                    .as_str()
                    .ok_or_else(|| bad("stamp writer"))?
                    .to_string(),
            };
            r.stamps.insert(key, stamp);
        }
        Ok(r)
    }
}

fn canonical(t: &str) -> String {
    if is_default(t) {
        "default".into()
    } else {
        t.into()
    }
}

/// Properties that describe rather than configure (Riak ignores them on
/// update; clients send back what they read).
fn strip_fixed(p: &Props) -> Props {
    p.iter()
        .filter(|(k, _)| !matches!(k.as_str(), "name" | "active" | "claimant"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: Value) -> Props {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn types_are_created_activated_and_resolved() {
        let mut r = Registry::new();
        assert!(r.bucket_props("maps", b"b").is_none());
        r.create_type("maps", &p(json!({"datatype": "map"})))
            .unwrap();
        assert!(r.bucket_props("maps", b"b").is_none(), "not active yet");
        r.activate_type("maps").unwrap();
        let props = r.bucket_props("maps", b"b").unwrap();
        assert_eq!(props["allow_mult"], true);
        assert_eq!(props["datatype"], "map");
        assert!(r
            .update_type("maps", &p(json!({"datatype": "set"})))
            .is_err());
        r.set_bucket("maps", b"b", &p(json!({"n_val": 2}))).unwrap();
        assert_eq!(r.bucket_props("maps", b"b").unwrap()["n_val"], 2);
        assert_eq!(r.bucket_props("maps", b"c").unwrap()["n_val"], 3);
        r.reset_bucket("maps", b"b").unwrap();
        assert_eq!(r.bucket_props("maps", b"b").unwrap()["n_val"], 3);
        assert_eq!(
            r.bucket_props("default", b"x").unwrap()["allow_mult"],
            false
        );
        assert_eq!(
            r.create_type("any", &Props::new()),
            Err(RegistryError::ReservedName)
        );
        assert!(matches!(
            r.create_type("maps", &Props::new()),
            Err(RegistryError::AlreadyActive(_))
        ));
    }

    #[test]
    fn registry_round_trips_through_json() {
        let mut r = Registry::new();
        r.create_type("sets", &p(json!({"datatype": "set"})))
            .unwrap();
        r.activate_type("sets").unwrap();
        r.create_type("later", &Props::new()).unwrap();
        r.set_bucket("default", b"\x00bin", &p(json!({"allow_mult": true})))
            .unwrap();
        let back = Registry::from_json(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }
}
