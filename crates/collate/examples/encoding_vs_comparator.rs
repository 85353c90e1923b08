//! Measures the two ways a sorted store can keep view keys in collation order (the choice is
//! recorded in `docs/format/views.md`): encode each key once into order-preserving bytes and
//! compare with `memcmp`, or keep the JSON and compare with a collating comparator, which a
//! store calls O(log n) times per insert and on every compaction merge step.
//!
//! `cargo run --release -p settee-collate --example encoding_vs_comparator`

use std::time::Instant;

use serde_json::{json, Value};

fn keys(n: usize) -> Vec<Value> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| match i % 3 {
            0 => json!([
                "contact",
                format!("Name {}", next() % 100_000),
                next() % 1000
            ]),
            1 => json!([
                format!("user-{}", next() % 500),
                1_600_000_000_000u64 + next() % 1_000_000
            ]),
            _ => json!(format!("place-{}-{}", next() % 1000, next() % 1000)),
        })
        .collect()
}

fn main() {
    let n = 200_000;
    let values = keys(n);
    let texts: Vec<Vec<u8>> = values
        .iter()
        .map(|v| serde_json::to_vec(v).unwrap_or_default())
        .collect();

    let start = Instant::now();
    let mut encoded: Vec<Vec<u8>> = values.iter().map(settee_collate::encode_key).collect();
    let encode = start.elapsed();
    let start = Instant::now();
    encoded.sort_unstable();
    let memcmp_sort = start.elapsed();

    let mut comparisons = 0u64;
    let mut by_comparator = texts.clone();
    let start = Instant::now();
    by_comparator.sort_unstable_by(|a, b| {
        comparisons += 1;
        let a: Value = serde_json::from_slice(a).unwrap_or(Value::Null);
        let b: Value = serde_json::from_slice(b).unwrap_or(Value::Null);
        settee_collate::collate(&a, &b)
    });
    let comparator_sort = start.elapsed();
    let per_compare_ns = comparator_sort.as_nanos() as f64 / comparisons as f64;
    let encoded_bytes: usize = encoded.iter().map(Vec::len).sum();
    let text_bytes: usize = texts.iter().map(Vec::len).sum();
    println!("{n} keys");
    println!(
        "encode once:            {:>8.1} ms ({:.0} ns/key)",
        encode.as_secs_f64() * 1e3,
        encode.as_nanos() as f64 / n as f64
    );
    println!(
        "sort, memcmp:           {:>8.1} ms",
        memcmp_sort.as_secs_f64() * 1e3
    );
    println!("sort, JSON comparator:  {:>8.1} ms ({comparisons} comparisons, {per_compare_ns:.0} ns each)", comparator_sort.as_secs_f64() * 1e3);
    println!(
        "bytes: encoded {encoded_bytes}, JSON {text_bytes} ({:.2}x)",
        encoded_bytes as f64 / text_bytes as f64
    );
}
