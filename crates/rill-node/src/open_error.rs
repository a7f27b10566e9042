//! Why a node does not open ([`Node::open`](crate::Node::open)): each
//! part's own error, kept, so a caller can tell a full disk or a
//! damaged store from a setting to change.

use crate::backends::BackendsError;
use crate::error::KvError;
use crate::meta::MetaError;
use crate::migrate::RecordError;
use crate::vnode::identity::IdentityError;
use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    #[error(transparent)]
    Ring(#[from] rill_ring::RingError),
    #[error("cannot create {}: {source}", .path.display())]
    CreateDataDir { path: PathBuf, source: io::Error },
    #[error("cannot create the meta directory: {0}")]
    CreateMeta(#[source] io::Error),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error(transparent)]
    Identity(#[from] IdentityError),
    #[error("meta/buckets.json: {0}")]
    Buckets(#[source] rill_bucket::RegistryError),
    #[error(transparent)]
    MigrationRecord(#[from] RecordError),
    #[error(transparent)]
    Backends(#[from] BackendsError),
    #[error("cannot start the reaper thread: {0}")]
    Reaper(#[source] io::Error),
    #[error("anti-entropy trees (tictacaae/ under the data directory) or thread: {0}")]
    AntiEntropy(#[source] io::Error),
    /// The backend migration found unfinished could not resume.
    #[error(transparent)]
    ResumeMigration(KvError),
}
