//! The fuzz target's body on the stable toolchain: random bytes and
//! mutations of valid records and hint files go through every decoder.
//! The coverage-guided run is `cargo +nightly fuzz run bitcask_decoders`
//! (see fuzz/ and .ci/run).

mod common;

use bitcask::format::fuzz_decoders;
use bitcask::Store;
use common::{small_options, Rng};

#[test]
fn decoders_survive_random_and_mutated_input() {
    // Seeds: the real files of a small store.
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), small_options()).unwrap();
    for i in 0..300u32 {
        s.put(
            format!("k{i}").as_bytes(),
            &vec![i as u8; (i % 50) as usize],
        )
        .unwrap();
        if i % 7 == 0 {
            s.delete(format!("k{}", i / 2).as_bytes()).unwrap();
        }
    }
    s.close().unwrap();
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .filter(|b| !b.is_empty())
        .collect();
    let mut rng = Rng::new(42);
    for _ in 0..3000 {
        let len = rng.below(300) as usize;
        fuzz_decoders(&rng.bytes(len));
    }
    for round in 0..3000 {
        let mut input = seeds[round % seeds.len()].clone();
        if input.len() > 4096 {
            let start = rng.below(input.len() as u64 - 4096) as usize;
            if rng.chance(50) {
                input = input[start..start + 4096].to_vec();
            }
        }
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(input.len() as u64) as usize;
            match rng.below(3) {
                0 => input[at] ^= 1 << rng.below(8),
                1 => input.truncate(at),
                _ => input[at] = rng.next_u64() as u8,
            }
            if input.is_empty() {
                break;
            }
        }
        fuzz_decoders(&input);
    }
}
