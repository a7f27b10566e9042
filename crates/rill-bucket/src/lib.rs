//! Bucket types and bucket properties, as Riak KV 3.x keeps them.
//!
//! Properties are a map from name to JSON value (Riak keeps a proplist
//! and passes unknown properties through), resolved per bucket as
//! bucket overrides over its type's properties over the defaults. Typed
//! accessors read them; [`validate`] applies Riak's rules and error texts.
//!
//! Invariants: the `default` type always exists and is active; a type's
//! `datatype` never changes once set; every stored property set has
//! passed validation.

mod props;
mod quorum;
mod registry;
mod stamps;

pub use props::{
    default_type_props, new_type_defaults, validate, Datatype, Props, PropsError, Reason,
};
pub use quorum::Quorum;
pub use registry::{Registry, RegistryError, TypeStatus};
pub use stamps::{EntryKey, Stamp};
