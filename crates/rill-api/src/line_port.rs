//! The collection port (the sensor-data paper's, section 6): InfluxDB line
//! protocol over plain TCP, one point a line, as Telegraf's
//! `socket_writer` and InfluxDB's own TCP listeners take it. Every line
//! goes to one database, with one timestamp precision (settings).
//!
//! Back-pressure: a connection's lines are written a batch at a time, and
//! nothing more is read from it until its batch is in the log, so a
//! sender outpacing the disk is slowed by TCP itself. When the service
//! refuses (a full disk, stores not keeping up), the batch is retried,
//! every second, until it is taken: the port stops reading, it never
//! drops what it has read. A bad line is logged and skipped (the sender
//! gets no answer on this path) and the rest of the batch kept.

use rill_sensor::Precision;
use rill_sensor_cluster::SensorCluster;
use std::sync::Arc;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// What the port takes.
#[derive(Clone, Debug)]
pub struct LinePortConfig {
    pub db: String,
    pub precision: Precision,
}

/// A line longer than this ends its connection (it cannot be a point a
/// sensor sends).
const MAX_LINE_BYTES: usize = 1 << 20;

/// Serves the port until the listener fails.
pub async fn serve(
    listener: TcpListener,
    sensors: Arc<SensorCluster>,
    cfg: LinePortConfig,
) -> std::io::Result<()> {
    loop {
        let (sock, peer) = listener.accept().await?;
        let (sensors, cfg) = (sensors.clone(), cfg.clone());
        tokio::spawn(async move {
            if let Err(e) = connection(sock, &sensors, &cfg).await {
                tracing::info!(%peer, error = %e, "a line-protocol connection ended");
            }
        });
    }
}

async fn connection(
    mut sock: TcpStream,
    sensors: &Arc<SensorCluster>,
    cfg: &LinePortConfig,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match sock.read(&mut chunk).await {
            Ok(n) => n,
            Err(e) => {
                // The whole lines read before the error are kept.
                if let Some(last) = buf.iter().rposition(|&b| b == b'\n') {
                    buf.truncate(last + 1);
                    write_lines(buf, sensors, cfg).await;
                }
                return Err(e);
            }
        };
        if n == 0 {
            // The sender closed: its last line counts even without a
            // newline.
            if !buf.is_empty() {
                let rest = std::mem::take(&mut buf);
                write_lines(rest, sensors, cfg).await;
            }
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(last_newline) = buf.iter().rposition(|&b| b == b'\n') else {
            if buf.len() > MAX_LINE_BYTES {
                return Err(std::io::Error::other(format!(
                    "a line longer than {MAX_LINE_BYTES} bytes"
                )));
            }
            continue;
        };
        let rest = buf.split_off(last_newline + 1);
        let whole = std::mem::replace(&mut buf, rest);
        write_lines(whole, sensors, cfg).await;
    }
}

/// Writes whole lines, retrying every second while the service refuses.
async fn write_lines(lines: Vec<u8>, sensors: &Arc<SensorCluster>, cfg: &LinePortConfig) {
    let text = String::from_utf8_lossy(&lines).into_owned();
    let now = crate::unix_now_ns();
    let batch = rill_tsdb::ingest::line_protocol(&text, &cfg.db, cfg.precision, now);
    if !batch.errors.is_empty() {
        tracing::warn!(count = batch.errors.len(), first = %batch.errors[0], "bad lines on the line-protocol port were skipped");
    }
    if batch.series.is_empty() {
        return;
    }
    crate::sensor_write::until_taken(sensors, &cfg.db, Arc::new(batch), now, "line-protocol port")
        .await;
}
