use super::*;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Key → (value, clock hash).
type Objects = BTreeMap<Vec<u8>, (Vec<u8>, u64)>;

/// A partition in memory; counts its folds and the largest chunk asked
/// for.
#[derive(Default)]
struct Data {
    keys: RefCell<Objects>,
    folds: RefCell<usize>,
    largest_ask: RefCell<usize>,
}

impl Data {
    fn with(n: u32) -> Data {
        let d = Data::default();
        for i in 0..n {
            d.put(i, 1);
        }
        d
    }
    fn put(&self, i: u32, clock: u64) {
        self.keys
            .borrow_mut()
            .insert(key(i), (format!("v{i}-{clock}").into_bytes(), clock));
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

impl PartitionData for Data {
    fn keys_after(&self, after: Option<&[u8]>, max: usize) -> Result<KeyChunk, String> {
        *self.folds.borrow_mut() += 1;
        let mut largest = self.largest_ask.borrow_mut();
        *largest = (*largest).max(max);
        let all = self.keys.borrow();
        let mut keys: Vec<Vec<u8>> = all
            .keys()
            .filter(|k| after.is_none_or(|a| k.as_slice() > a))
            .take(max + 1)
            .cloned()
            .collect();
        let more = keys.len() > max;
        keys.truncate(max);
        Ok(KeyChunk {
            keys,
            more,
            total: all.len(),
        })
    }
    fn read(&self, key: &[u8]) -> Result<Option<Stored>, String> {
        Ok(self.keys.borrow().get(key).map(|(v, c)| Stored {
            value: v.clone(),
            clock: *c,
        }))
    }
    fn drop_unchanged(&self, keys: &[(Vec<u8>, u64)]) -> Result<usize, String> {
        let mut all = self.keys.borrow_mut();
        let mut n = 0;
        for (k, c) in keys {
            if all.get(k).is_some_and(|(_, have)| have == c) {
                all.remove(k);
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Reads a whole pass in batches, as a sender's session would; returns
/// the keys in the order sent.
fn read_all(pass: &mut Pass, data: &Data, from: Option<&[u8]>, batch: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut after = from.map(<[u8]>::to_vec);
    loop {
        let b = pass.read(data, after.as_deref(), batch, 1 << 20).unwrap();
        pass.record(&b);
        out.extend(b.items.into_iter().map(|i| i.key));
        if !b.more {
            return out;
        }
        after = b.cursor;
    }
}

#[test]
fn a_pass_sends_every_key_once_in_order_across_chunks() {
    let data = Data::with(100);
    let mut pass = Pass::new(7, SentRecord::default(), false, true);
    let sent = read_all(&mut pass, &data, None, 3);
    let want: Vec<Vec<u8>> = (0..100).map(key).collect();
    assert_eq!(sent, want);
    // One fold a chunk of 7, not one a batch of 3.
    assert_eq!(*data.folds.borrow(), 100 / 7 + 1);
    let record = pass.into_sent();
    assert_eq!(record.len(), 100);
    assert_eq!(record.clock_of(&key(42)), Some(1));
}

#[test]
fn a_new_session_resumes_after_the_receivers_cursor_wherever_it_is() {
    let data = Data::with(50);
    let mut pass = Pass::new(8, SentRecord::default(), false, true);
    // The first session got to key 30; the receiver had stored to 12.
    read_all(&mut pass, &data, None, 5).truncate(0);
    let again = read_all(&mut pass, &data, Some(&key(12)), 5);
    assert_eq!(again, (13..50).map(key).collect::<Vec<_>>());
    // And past the last chunk listed.
    let tail = read_all(&mut pass, &data, Some(&key(47)), 5);
    assert_eq!(tail, vec![key(48), key(49)]);
}

#[test]
fn keys_written_during_a_pass_after_its_cursor_go_and_deleted_ones_do_not() {
    let data = Data::with(20);
    let mut pass = Pass::new(4, SentRecord::default(), false, true);
    let first = pass.read(&data, None, 5, 1 << 20).unwrap();
    pass.record(&first);
    assert_eq!(first.items.len(), 5);
    data.put(3, 2); // before the cursor: a top-up's business
    data.put(100, 1); // after it
    data.keys.borrow_mut().remove(&key(9));
    let rest = read_all(&mut pass, &data, first.cursor.as_deref(), 5);
    assert!(rest.contains(&key(100)));
    assert!(!rest.contains(&key(9)));
    assert!(!rest.contains(&key(3)));
}

#[test]
fn a_top_up_sends_only_what_no_earlier_pass_sent() {
    let data = Data::with(30);
    let mut first = Pass::new(6, SentRecord::default(), false, true);
    read_all(&mut first, &data, None, 4);
    let record = first.into_sent();
    data.put(200, 1);
    data.put(5, 9); // sent, then written again: not a top-up's
    assert_eq!(count_unsent(&data, &record, 6).unwrap(), 1);
    let mut topup = Pass::new(6, record, true, true);
    assert_eq!(read_all(&mut topup, &data, None, 4), vec![key(200)]);
    let record = topup.into_sent();
    assert_eq!(record.len(), 31);
    assert_eq!(count_unsent(&data, &record, 6).unwrap(), 0);
}

#[test]
fn a_drop_removes_only_keys_still_as_they_were_sent() {
    let data = Data::with(40);
    let mut pass = Pass::new(9, SentRecord::default(), false, true);
    read_all(&mut pass, &data, None, 7);
    let record = pass.into_sent();
    data.put(7, 5); // changed after it was sent
    data.put(300, 1); // never sent
    assert_eq!(drop_sent(&data, &record, 9).unwrap(), 39);
    let left: Vec<Vec<u8>> = data.keys.borrow().keys().cloned().collect();
    assert_eq!(left, vec![key(7), key(300)]);
}

#[test]
fn a_repairs_pass_records_nothing() {
    let data = Data::with(10);
    let mut pass = Pass::new(4, SentRecord::default(), false, false);
    assert_eq!(read_all(&mut pass, &data, None, 3).len(), 10);
    assert!(pass.into_sent().is_empty());
}

#[test]
fn a_chunk_is_a_bounded_share_of_a_large_partition() {
    let data = Data::with(20_000);
    let mut pass = Pass::new(100, SentRecord::default(), false, true);
    assert_eq!(read_all(&mut pass, &data, None, 1000).len(), 20_000);
    // At least chunk_min, at most a 64th of the partition.
    assert_eq!(*data.largest_ask.borrow(), 20_000 / CHUNKS_PER_PASS);
    assert!(*data.folds.borrow() <= CHUNKS_PER_PASS + 2);
}

#[test]
fn a_record_keeps_the_last_clock_a_key_was_sent_with() {
    let mut r = SentRecord::default();
    r.insert(b"a", 1);
    r.insert(b"b", 2);
    r.insert(b"a", 3);
    // Not sealed yet: nothing answers.
    assert_eq!(r.clock_of(b"a"), None);
    r.seal();
    assert_eq!(r.clock_of(b"a"), Some(3));
    assert_eq!(r.clock_of(b"b"), Some(2));
    assert_eq!(r.clock_of(b"c"), None);
    assert_eq!(r.len(), 2);
}

#[test]
fn a_read_not_taken_is_not_recorded() {
    let data = Data::with(10);
    let mut pass = Pass::new(4, SentRecord::default(), false, true);
    let stale = pass.read(&data, None, 5, 1 << 20).unwrap();
    assert_eq!(stale.items.len(), 5);
    assert!(pass.into_sent().is_empty());
}

#[test]
fn equal_clocks_of_two_keys_hash_apart() {
    let clock = b"the same clock";
    assert_ne!(clock_hash(b"k1", clock), clock_hash(b"k2", clock));
    assert_eq!(clock_hash(b"k1", clock), clock_hash(b"k1", clock));
}
