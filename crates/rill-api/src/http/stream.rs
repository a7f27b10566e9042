//! Streamed response bodies, shared by the routes that answer in parts
//! (key listing, 2i, MapReduce, export).

use axum::http::HeaderValue;
use axum::response::Response;

/// A streamed `multipart/mixed` body of JSON parts (Riak's streamed 2i
/// and chunked MapReduce answers).
#[derive(Clone)]
pub(crate) struct JsonParts {
    boundary: String,
}

impl JsonParts {
    pub(crate) fn new() -> JsonParts {
        JsonParts {
            boundary: rill_node::ids_boundary(),
        }
    }

    pub(crate) fn part(&self, json: &str) -> axum::body::Bytes {
        format!(
            "\r\n--{}\r\nContent-Type: application/json\r\n\r\n{json}",
            self.boundary
        )
        .into()
    }

    pub(crate) fn end(&self) -> axum::body::Bytes {
        format!("\r\n--{}--\r\n", self.boundary).into()
    }

    /// The response whose body carries these parts.
    pub(crate) fn response(&self, body: axum::body::Body) -> Response {
        let mut r = Response::new(body);
        if let Ok(v) =
            HeaderValue::from_str(&format!("multipart/mixed; boundary={}", self.boundary))
        {
            r.headers_mut().insert("content-type", v);
        }
        r
    }
}

/// Body chunks from a channel, for streamed answers.
pub(crate) struct ChunkStream(
    pub tokio::sync::mpsc::Receiver<Result<axum::body::Bytes, std::io::Error>>,
);

/// Runs `produce` off the async threads, feeding a streamed body. A
/// producer that panics ends the body with an error, so the client sees
/// a broken response instead of a clean, truncated one.
pub(crate) fn stream_body(
    produce: impl FnOnce(&tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>)
        + Send
        + 'static,
) -> ChunkStream {
    struct Guard {
        tx: tokio::sync::mpsc::Sender<Result<axum::body::Bytes, std::io::Error>>,
        finished: bool,
    }
    impl Drop for Guard {
        fn drop(&mut self) {
            if !self.finished {
                tracing::error!("a streamed response ended early");
                let _ = self
                    .tx
                    .blocking_send(Err(std::io::Error::other("the stream ended early")));
            }
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let mut guard = Guard {
            tx,
            finished: false,
        };
        produce(&guard.tx);
        guard.finished = true;
    });
    ChunkStream(rx)
}

impl futures_core::Stream for ChunkStream {
    type Item = Result<axum::body::Bytes, std::io::Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.0.poll_recv(cx)
    }
}
