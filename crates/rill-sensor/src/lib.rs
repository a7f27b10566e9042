//! Sensor-data formats and block codecs, pure logic (no I/O); the engine
//! that stores and queries the blocks is `rill-tsdb`.
//!
//! Here: InfluxDB line protocol, Prometheus remote write, series and their
//! names, and the compressed block a series' samples are stored in.
//!
//! The architecture is the one the sensor-data paper ("Riak KV
//! performance in sensor data storage application", Zhivchikova and
//! Shevchuk, section 6) asks for: samples buffered per sensor into
//! blocks of B bytes, each block an object of the key-value store.

mod bits;
pub mod block;
pub mod line;
pub mod mqtt;
pub mod remote_write;
pub mod series;

pub use bits::{unzigzag, zigzag};
pub use block::{BlockError, Choice, Codec, EncodeError, Header, Sample, TimeUnit};
pub use series::{samples_of, Precision, Series, UnknownPrecision};
