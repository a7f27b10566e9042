//! Why a backend migration stopped (`rill admin backend-migrate status`
//! shows the text; `rill admin backend-migrate TO` resumes it).

use super::record::RecordError;
use crate::backends::BackendsError;
use crate::error::KvError;
use crate::meta::MetaError;
use crate::vnode::switch::CopyError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    #[error(transparent)]
    Backends(#[from] BackendsError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(transparent)]
    Meta(#[from] MetaError),
    #[error("the target backend is not open")]
    TargetNotOpen,
    #[error("no migration record")]
    NoRecord,
    #[error("listing the buckets of partition {partition}: {source}")]
    ListBuckets {
        partition: u32,
        source: rill_backend::Error,
    },
    #[error("listing the keys of partition {partition}: {source}")]
    ListKeys {
        partition: u32,
        source: rill_backend::Error,
    },
    #[error("copying partition {partition}: {source}")]
    CopyKey { partition: u32, source: KvError },
    /// A write reached the serving backend but not the copy.
    #[error("a write to the new backend of partition {partition} failed during the copy")]
    CopyIncomplete { partition: u32 },
    /// The copy cannot take over: it is dropped and the partition stays
    /// where it was.
    #[error("partition {partition}: {source}")]
    Copy { partition: u32, source: CopyError },
    #[error(
        "partition {partition}: recording its move failed ({source}); both backends keep every \
         write until the migration resumes or the node restarts"
    )]
    Commit {
        partition: u32,
        source: Box<MigrateError>,
    },
    #[error(
        "partition {partition} moved, but a request has used its old backend for 10 minutes: \
         its old data stays until the migration runs again"
    )]
    OldBackendInUse { partition: u32 },
}
