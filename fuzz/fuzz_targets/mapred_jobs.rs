//! MapReduce job bodies (the bytes of an RpbMapRedReq or a POST to
//! /mapred) on arbitrary input: parsed, and when they parse, run over a
//! small store of objects and their results encoded. Nothing may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rill_mapred::{json, parse_job, run, BKey, IndexQuery, Source};
use rill_object::{Content, Link, Metadata, Object};
use std::time::{Duration, Instant};

struct Store;

const KEYS: [&str; 4] = ["1", "two", "3.5", "a-b"];

fn object(key: &[u8]) -> Option<Object> {
    let meta = Metadata {
        links: vec![Link {
            bucket: b"b".to_vec(),
            key: b"two".to_vec(),
            tag: b"t".to_vec(),
        }],
        ..Metadata::default()
    };
    let values: &[&[u8]] = match key {
        b"1" => &[b"1"],
        b"two" => &[b"2", b"22"],
        b"3.5" => &[b"\xff"],
        b"a-b" => &[b"{\"x\":1}"],
        _ => return None,
    };
    Some(Object {
        clock: Default::default(),
        contents: values
            .iter()
            .map(|v| Content::new(v.to_vec(), meta.clone()))
            .collect(),
    })
}

impl Source for Store {
    type Error = std::convert::Infallible;

    fn list_keys(
        &self,
        _: Option<&[u8]>,
        _: &[u8],
        _: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error> {
        each(KEYS.iter().map(|k| k.as_bytes().to_vec()).collect());
        Ok(())
    }

    fn index(
        &self,
        _: Option<&[u8]>,
        _: &[u8],
        _: &[u8],
        _: &IndexQuery,
        _: Instant,
        each: &mut dyn FnMut(Vec<Vec<u8>>) -> bool,
    ) -> Result<(), Self::Error> {
        each(vec![b"1".to_vec(), b"gone".to_vec()]);
        Ok(())
    }

    fn fetch(&self, keys: &[BKey], _: Instant) -> Result<Vec<Option<Object>>, Self::Error> {
        Ok(keys.iter().map(|k| object(&k.key)).collect())
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(mut job) = parse_job(data) {
        // A job that fans out runs until its time is up: keep that short.
        job.timeout = job.timeout.min(Duration::from_millis(50));
        // The stack a node's job gets (a blocking thread's 2 MiB).
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let _ = run(
                    &job,
                    &Store,
                    &mut |_: usize, items: Vec<rill_mapred::Term>| {
                        let _ = json::encode(&items);
                        true
                    },
                );
            })
            .expect("a thread")
            .join()
            .expect("no panic");
    }
});
