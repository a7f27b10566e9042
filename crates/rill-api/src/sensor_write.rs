//! Writes of the sensor paths that have no client to answer (the
//! collection port, the MQTT subscriber): retried while the service
//! refuses (a full disk, stores behind, too few replicas, a failure),
//! so what was read is never dropped; the caller reads nothing more
//! until the write is taken. Only a write every replica would refuse
//! (invalid) is given up.

use rill_sensor_cluster::{SensorCluster, WriteError};
use std::sync::Arc;
use std::time::Duration;

/// Series keys, their samples and groups, as the engine takes them.
pub type SeriesBatch = Arc<rill_tsdb::ingest::Batch>;

/// Writes `series` to `db`, retrying every second while the engine
/// refuses; returns once the samples are durable, or were refused for
/// good (invalid, damaged: logged). `source` names the path in the log.
pub async fn until_taken(
    sensors: &Arc<SensorCluster>,
    db: &str,
    series: SeriesBatch,
    now: i64,
    source: &str,
) {
    let mut attempt = 0u64;
    loop {
        let (sensors2, series2, db2) = (sensors.clone(), series.clone(), db.to_string());
        let r = crate::blocking(move || {
            sensors2.write_grouped(&db2, &series2.series, &series2.groups(), now)
        })
        .await;
        match r {
            Ok(report) => {
                if report.too_old + report.too_new + report.bad_series > 0 {
                    tracing::warn!(
                        source,
                        too_old = report.too_old,
                        too_new = report.too_new,
                        bad_series = report.bad_series,
                        "samples were dropped (outside the storage period, or of series keys too long)"
                    );
                }
                if attempt > 0 {
                    tracing::info!(source, "the engine takes samples again");
                }
                return;
            }
            Err(e @ WriteError::Invalid(_)) => {
                tracing::warn!(source, error = %e, "a batch was refused for good");
                return;
            }
            Err(e) => {
                if attempt.is_multiple_of(60) {
                    tracing::warn!(source, error = %e, attempt, "the engine refuses samples: reading stops until the batch is taken (retried every second)");
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
