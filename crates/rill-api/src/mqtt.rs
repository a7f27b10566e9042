//! The MQTT subscriber: samples from an external broker (Mosquitto, EMQX,
//! any MQTT 3.1.1 broker) into one database. Payloads are line protocol,
//! a JSON object of readings or a bare number (`rill_sensor::mqtt`), and
//! their series carry the message's topic as the label `topic`.
//!
//! Nothing is lost between the broker and the disk: the subscription is
//! at QoS 1 (or 2) in a persistent session (clean session off, a fixed
//! client id), and a message is acknowledged to the broker only once its
//! samples are durable in the write-ahead logs of W replicas. A message the node took but
//! had not yet made durable when it died is sent again by the broker when
//! the node reconnects; writing it twice is harmless (a repeated series
//! and time keeps one value).
//!
//! Back-pressure: while the service refuses (a full disk, stores behind),
//! the batch in hand is retried every second and nothing is acknowledged,
//! so the broker stops sending once its in-flight window for this client
//! is full (Mosquitto's `max_inflight_messages`, 20 by default) and queues
//! the rest for the session. A message that can never be stored (not a
//! payload of any known form) is logged and acknowledged, so it cannot
//! stop the subscription.

use rill_sensor::Precision;
use rill_sensor_cluster::SensorCluster;
use rill_tsdb::ingest::Builder;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, Publish, QoS, SubscribeReasonCode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the subscriber takes, and from where.
#[derive(Clone, Debug, PartialEq)]
pub struct MqttConfig {
    pub host: String,
    pub port: u16,
    /// Topic filters (`+` and `#` wildcards).
    pub topics: Vec<String>,
    /// 1 or 2 (0 would let the broker drop what the node has not stored).
    pub qos: u8,
    pub db: String,
    /// Of line protocol payloads' timestamps.
    pub precision: Precision,
    /// Fixed, so the broker keeps the session (and what it holds for the
    /// node) across reconnects and restarts.
    pub client_id: String,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// A message larger than this is refused by the client (and, being
/// unacknowledged, sent again by the broker: raise the limit, or cap the
/// broker's `message_size_limit` below it).
pub const MAX_MESSAGE_BYTES: usize = 32 << 20;

/// Messages taken off the connection and not yet written.
const QUEUE: usize = 1024;
/// A batch written (and fsynced) at once.
const BATCH_MESSAGES: usize = 1000;
const BATCH_BYTES: usize = 8 << 20;

/// Whether `filter` is a topic filter a broker takes.
pub fn valid_topic_filter(filter: &str) -> bool {
    !filter.is_empty() && rumqttc::valid_filter(filter)
}

fn qos(n: u8) -> QoS {
    if n >= 2 {
        QoS::ExactlyOnce
    } else {
        QoS::AtLeastOnce
    }
}

/// Runs the subscriber until the task is aborted: connects (and
/// reconnects, every second while the broker cannot be reached),
/// subscribes, and writes what arrives.
pub async fn run(sensors: Arc<SensorCluster>, cfg: MqttConfig) {
    let mut opts = MqttOptions::new(cfg.client_id.clone(), cfg.host.clone(), cfg.port);
    opts.set_clean_session(false)
        .set_manual_acks(true)
        .set_keep_alive(Duration::from_secs(30))
        .set_max_packet_size(MAX_MESSAGE_BYTES, 1 << 20);
    if let Some(user) = &cfg.username {
        opts.set_credentials(user.clone(), cfg.password.clone().unwrap_or_default());
    }
    // Room for every acknowledgement of the messages in hand, so the
    // writer never waits on the connection (which may be waiting on it).
    let (client, mut events) = AsyncClient::new(opts, 4 * QUEUE + 2 * BATCH_MESSAGES);
    let (tx, rx) = mpsc::channel::<Received>(QUEUE);
    // Bumped when the broker starts a new session: acknowledgements of
    // messages of an older one would name packet ids the broker has
    // given to other messages since.
    let session = Arc::new(AtomicU64::new(0));
    let writer = tokio::spawn(write_loop(
        sensors,
        cfg.clone(),
        client.clone(),
        rx,
        session.clone(),
    ));
    let _stop_writer = AbortOnDrop(writer);
    let mut down_since: Option<Instant> = None;
    let mut last_report = Instant::now();
    loop {
        match events.poll().await {
            Ok(Event::Incoming(Packet::ConnAck(ack))) => {
                tracing::info!(broker = %format!("{}:{}", cfg.host, cfg.port), session_present = ack.session_present, topics = ?cfg.topics, "connected to the MQTT broker");
                if !ack.session_present {
                    session.fetch_add(1, Ordering::SeqCst);
                }
                down_since = None;
                // Subscribing again is harmless, and needed when the
                // broker lost the session.
                for t in &cfg.topics {
                    if let Err(e) = client.try_subscribe(t.clone(), qos(cfg.qos)) {
                        tracing::error!(topic = %t, error = %e, "cannot subscribe");
                    }
                }
            }
            Ok(Event::Incoming(Packet::SubAck(ack))) => {
                if ack.return_codes.contains(&SubscribeReasonCode::Failure) {
                    tracing::error!(
                        topics = ?cfg.topics,
                        "the MQTT broker refused a subscription (its access control?)"
                    );
                } else {
                    tracing::info!(topics = ?cfg.topics, "subscribed to MQTT topics");
                }
            }
            Ok(Event::Incoming(Packet::Publish(p))) => {
                let r = Received {
                    publish: p,
                    at: crate::unix_now_ns(),
                    session: session.load(Ordering::SeqCst),
                };
                if tx.send(r).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                let first = down_since.is_none();
                let since = *down_since.get_or_insert_with(Instant::now);
                if first || last_report.elapsed() >= Duration::from_secs(60) {
                    last_report = Instant::now();
                    tracing::warn!(broker = %format!("{}:{}", cfg.host, cfg.port), error = %e, down_s = since.elapsed().as_secs(), "the MQTT broker cannot be reached; retrying every second");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// A message as it came: stamped on arrival (a payload without a time
/// takes this one), and the broker session it came in.
struct Received {
    publish: Publish,
    at: i64,
    session: u64,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Takes the messages in hand in batches: parse, write (retrying while
/// the service refuses), then acknowledge each.
async fn write_loop(
    sensors: Arc<SensorCluster>,
    cfg: MqttConfig,
    client: AsyncClient,
    mut rx: mpsc::Receiver<Received>,
    session: Arc<AtomicU64>,
) {
    let mut msgs: Vec<Received> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut bytes = first.publish.payload.len();
        msgs.push(first);
        while msgs.len() < BATCH_MESSAGES && bytes < BATCH_BYTES {
            match rx.try_recv() {
                Ok(r) => {
                    bytes += r.publish.payload.len();
                    msgs.push(r);
                }
                Err(_) => break,
            }
        }
        let mut b = Builder::default();
        for r in &msgs {
            b.mqtt(
                &r.publish.topic,
                &r.publish.payload,
                &cfg.db,
                cfg.precision,
                r.at,
            );
        }
        let batch = b.finish();
        let skipped: Vec<&String> = batch.errors.iter().chain(&batch.rejected).collect();
        for e in skipped.iter().take(10) {
            tracing::warn!(error = %e, "an MQTT message (or a point in it) holds no sample: skipped");
        }
        if skipped.len() > 10 {
            tracing::warn!(
                count = skipped.len() - 10,
                "more MQTT messages without samples were skipped"
            );
        }
        if !batch.series.is_empty() {
            let now = crate::unix_now_ns();
            crate::sensor_write::until_taken(&sensors, &cfg.db, Arc::new(batch), now, "MQTT").await;
        }
        let current = session.load(Ordering::SeqCst);
        for r in msgs.drain(..) {
            // Of an older session: the broker sends it again if it kept
            // that session, and its packet id may name another message now.
            if r.session != current {
                continue;
            }
            // Cannot fail while the connection task runs (the queue has
            // room for every acknowledgement in hand); a message not
            // acknowledged is only sent again.
            if let Err(e) = client.try_ack(&r.publish) {
                tracing::warn!(error = %e, "an MQTT acknowledgement was not sent");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_filters_are_checked() {
        for ok in ["#", "plant/+/temp", "a/b/#", "sensors"] {
            assert!(valid_topic_filter(ok), "{ok}");
        }
        for bad in ["", "a/#/b", "a+/b", "a/b#"] {
            assert!(!valid_topic_filter(bad), "{bad}");
        }
    }
}
