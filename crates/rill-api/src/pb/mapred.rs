//! RpbMapRedReq: a job in JSON; its kept phases' results streamed as
//! RpbMapRedResp messages (a phase and a JSON array each), then one with
//! only `done`. A failure ends the stream with an RpbErrorResp (a JSON
//! object naming the phase, the error and the input, as Riak's), and the
//! connection stays usable.

use super::write;
use crate::mapred::{admit, encode, start, Event};
use bytes::Bytes;
use rill_node::Node;
use rill_pb::pb::{RpbMapRedReq, RpbMapRedResp};
use rill_pb::Response;
use std::sync::Arc;
use tokio::net::TcpStream;

pub(super) async fn mapred(
    node: &Arc<Node>,
    r: RpbMapRedReq,
    socket: &mut TcpStream,
) -> std::io::Result<()> {
    if &r.content_type[..] != b"application/json" {
        return write(
            socket,
            &[Response::error(format!(
                "MapReduce jobs are taken as application/json, not {}",
                String::from_utf8_lossy(&r.content_type)
            ))],
        )
        .await;
    }
    let (job, slot) = match admit(r.request).await {
        Ok(j) => j,
        Err(e) => return write(socket, &[Response::error(e.to_string())]).await,
    };
    let mut events = start(node.clone(), job, slot);
    while let Some(e) = events.recv().await {
        let last = match e {
            Event::Results(phase, items) => match encode(phase, &items) {
                Ok(parts) => {
                    let frames: Vec<Response> = parts
                        .into_iter()
                        .map(|text| {
                            Response::MapRed(RpbMapRedResp {
                                phase: Some(phase as u32),
                                response: Some(Bytes::from(text)),
                                done: None,
                            })
                        })
                        .collect();
                    write(socket, &frames).await?;
                    continue;
                }
                // The job stops when `events` is dropped, on return.
                Err(e) => Response::error(e.to_json()),
            },
            Event::Done(Ok(())) => Response::MapRed(RpbMapRedResp {
                done: Some(true),
                ..Default::default()
            }),
            Event::Done(Err(e)) => Response::error(e.to_json()),
        };
        return write(socket, &[last]).await;
    }
    // The job's thread ended without saying how: a panic, logged there.
    write(
        socket,
        &[Response::error(
            "internal error: the job ended early; retry",
        )],
    )
    .await
}
