//! Byte layouts of data, hint and merge manifest files. Pure encoding and decoding, no I/O;
//! docs/format.md is the reference these functions follow.

pub mod file_header;
pub mod hint;
pub mod manifest;
pub mod record;

pub use file_header::{FileKind, FILE_HEADER_LEN, FORMAT_VERSION};
pub use hint::{HintEntry, HintFile};
pub use record::{RecordHeader, RecordMeta, MAX_KEY_LEN, RECORD_HEADER_LEN};

/// Exercises every decoder on arbitrary bytes: the fuzz targets and the
/// stable-toolchain fuzz smoke test both call this. Decoders must return
/// `Err`, never panic, loop or allocate without bound.
pub fn fuzz_decoders(data: &[u8]) {
    let _ = record::decode_record(data);
    if let Ok(h) = RecordHeader::decode(data) {
        let _ = h.record_len();
    }
    let _ = file_header::decode_file_header(FileKind::Data, data);
    let _ = manifest::decode_manifest(data);
    if let Ok(hint) = HintFile::parse(data) {
        let mut n = 0u64;
        for e in hint.iter() {
            assert!(e.key.len() <= MAX_KEY_LEN);
            n += 1;
        }
        assert_eq!(n, hint.len());
    }
    // A data file body: the same scan recovery uses, records grouped into
    // batches as recovery groups them.
    let mut scanner = crate::recovery::scan::Scanner::new(data, 0);
    let mut gate = crate::recovery::batch::BatchGate::default();
    let mut guard = 0usize;
    let (mut scanned, mut served) = (0u64, 0u64);
    while let Some(event) = scanner.next_event() {
        guard += 1;
        assert!(guard <= data.len() + 1, "scanner does not advance");
        match event {
            crate::recovery::scan::ScanEvent::Record { offset, header, .. } => {
                scanned += 1;
                served += gate.record(offset, &header, ()).len() as u64;
            }
            crate::recovery::scan::ScanEvent::Skipped { .. } => gate.skipped(),
            crate::recovery::scan::ScanEvent::TornTail { .. } => {}
        }
    }
    if let Some(cut) = gate.end() {
        assert!(cut < data.len() as u64);
    }
    assert_eq!(
        served + gate.dropped_records(),
        scanned,
        "every record served or dropped"
    );
}
