//! The structural index of a large JSON body (layout in `docs/format/subdoc-index.md`): built
//! once per write, read in place on every lookup, so a path costs O(depth · log n) instead of a
//! scan of everything before it.
//!
//! For every object or array spanning at least [`CONTAINER_MIN_BYTES`] the index records where
//! it ends (so a walk can step over it without scanning it) and a table of its children: for
//! objects `(hash of the name, offset of the name's opening quote, offset of the value)` sorted
//! by hash, for arrays the offset of each element. All integers are little-endian u32.
//! Every read is bounds-checked; a corrupt index gives wrong-container answers at worst
//! `DocNotJson`, never a panic, and names are always verified against the document itself.

use super::scan::{self, Span};
use super::Status;

/// Version 2 added the hash directory after each object's rows; version 3 hashes names a word
/// at a time instead of FNV-1a's byte at a time. Older indexes are not read: those documents
/// are scanned until they are next written.
pub const VERSION: u8 = 3;
/// Bodies smaller than this get no index: scanning them is as fast as reading one.
pub const BODY_MIN_BYTES: usize = 4096;
/// Containers smaller than this are scanned.
pub const CONTAINER_MIN_BYTES: usize = 1024;

const KIND_OBJECT: u32 = 1;
const KIND_ARRAY: u32 = 2;
/// Container record: start, end, kind, first entry, entry count.
const CONTAINER_WORDS: usize = 5;

/// The hash of an unescaped member name (format version 3).
pub fn name_hash(name: &[u8]) -> u32 {
    name_hash_and_plain(name).0
}

/// [`name_hash`], and whether the name can be spelled without escapes (no `"`, no backslash),
/// in one pass over it, eight bytes at a time: each word (the last one zero-padded) is xor-ed
/// into a state seeded with the length, multiplied and rotated; splitmix64's finaliser mixes
/// the state and its high 32 bits are the hash.
fn name_hash_and_plain(name: &[u8]) -> (u32, bool) {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut state = (name.len() as u64).wrapping_mul(K);
    let mut specials = 0u64;
    let mut mix = |word: u64| {
        specials |= scan::bytes_equal(word, b'"') | scan::bytes_equal(word, b'\\');
        state = (state ^ word).wrapping_mul(K).rotate_left(27);
    };
    let mut chunks = name.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        mix(u64::from_le_bytes(word));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        mix(u64::from_le_bytes(word));
    }
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    ((z >> 32) as u32, specials == 0)
}

/// Builds the index of `body`, or `None` when it is small or not JSON.
pub fn build(body: &[u8]) -> Option<Vec<u8>> {
    if body.len() < BODY_MIN_BYTES {
        return None;
    }
    let mut containers: Vec<[u32; CONTAINER_WORDS]> = Vec::new();
    let mut entries: Vec<u32> = Vec::new();
    let root = scan::skip_ws(body, 0);
    let end = scan::value_end(body, root).ok()?;
    index_value(body, (root, end), 0, &mut containers, &mut entries).ok()?;
    containers.sort_unstable_by_key(|record| record[0]);
    let mut out = Vec::with_capacity(9 + (containers.len() * CONTAINER_WORDS + entries.len()) * 4);
    out.push(VERSION);
    out.extend_from_slice(&(containers.len() as u32).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for record in &containers {
        for word in record {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }
    for word in &entries {
        out.extend_from_slice(&word.to_le_bytes());
    }
    Some(out)
}

fn index_value(
    body: &[u8],
    span: Span,
    depth: usize,
    containers: &mut Vec<[u32; CONTAINER_WORDS]>,
    entries: &mut Vec<u32>,
) -> Result<(), Status> {
    if span.1 - span.0 < CONTAINER_MIN_BYTES || depth > super::json::MAX_DEPTH {
        return Ok(());
    }
    let mut children: Vec<Span> = Vec::new();
    match body[span.0] {
        b'{' => {
            let mut rows: Vec<[u32; 3]> = Vec::new();
            scan::for_each_member(body, span.0, |member| {
                let name = scan::member_name(body, member.key).unwrap_or_default();
                rows.push([name_hash(&name), member.key.0 as u32, member.value.0 as u32]);
                children.push(member.value);
                true
            })?;
            rows.sort_unstable_by_key(|row| row[0]);
            containers.push([
                span.0 as u32,
                span.1 as u32,
                KIND_OBJECT,
                entries.len() as u32,
                rows.len() as u32,
            ]);
            entries.extend(rows.iter().flatten());
            let bits = directory_bits(rows.len());
            // directory[d] = first row whose hash's top `bits` bits are >= d.
            let mut row = 0;
            for prefix in 0..=(1u64 << bits) {
                while row < rows.len() && u64::from(hash_prefix(rows[row][0], bits)) < prefix {
                    row += 1;
                }
                entries.push(row as u32);
            }
        }
        b'[' => {
            let first = entries.len() as u32;
            scan::for_each_element(body, span.0, |_, element| {
                entries.push(element.0 as u32);
                children.push(element);
                true
            })?;
            containers.push([
                span.0 as u32,
                span.1 as u32,
                KIND_ARRAY,
                first,
                entries.len() as u32 - first,
            ]);
        }
        _ => return Ok(()),
    }
    for child in children {
        index_value(body, child, depth + 1, containers, entries)?;
    }
    Ok(())
}

/// Whether the string at `quote` is exactly `name`, spelled without escapes: its bytes follow
/// the quote and a quote follows them. Only for names without `"` or a backslash (those can
/// only appear escaped); for them, and for escaped spellings of plain names, the caller decodes
/// the string instead.
fn verbatim_name_at(doc: &[u8], quote: usize, name: &[u8]) -> bool {
    let start = quote + 1;
    let end = start + name.len();
    doc.get(start..end) == Some(name) && doc.get(end) == Some(&b'"')
}

/// Bits of the hash the directory after an object's rows is indexed by: about four rows per
/// directory slot, so a lookup reads two directory words and a few adjacent rows.
fn directory_bits(rows: usize) -> u32 {
    (rows / 4).max(1).ilog2().min(24)
}

fn hash_prefix(hash: u32, bits: u32) -> u32 {
    if bits == 0 {
        0
    } else {
        hash >> (32 - bits)
    }
}

/// The value asked about is not an indexed container of the right kind: scan it instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotIndexed;

/// A stored index, read in place.
#[derive(Clone, Copy)]
pub struct Index<'a> {
    containers: &'a [u8],
    entries: &'a [u8],
}

fn word(bytes: &[u8], at: usize) -> Option<u32> {
    let slice = bytes.get(at * 4..at * 4 + 4)?;
    Some(u32::from_le_bytes([slice[0], slice[1], slice[2], slice[3]]))
}

/// One indexed container.
#[derive(Clone, Copy, Debug)]
struct Container {
    end: usize,
    kind: u32,
    first: usize,
    count: usize,
}

impl<'a> Index<'a> {
    /// `None` for an empty, unknown-version or truncated index (then lookups scan).
    pub fn open(raw: &'a [u8]) -> Option<Index<'a>> {
        if raw.first() != Some(&VERSION) {
            return None;
        }
        let containers = u32::from_le_bytes(raw.get(1..5)?.try_into().ok()?) as usize;
        let entries = u32::from_le_bytes(raw.get(5..9)?.try_into().ok()?) as usize;
        let containers_end = 9usize.checked_add(containers.checked_mul(CONTAINER_WORDS * 4)?)?;
        let entries_end = containers_end.checked_add(entries.checked_mul(4)?)?;
        if entries_end != raw.len() {
            return None;
        }
        Some(Index {
            containers: &raw[9..containers_end],
            entries: &raw[containers_end..entries_end],
        })
    }

    fn container(&self, start: usize) -> Option<Container> {
        let count = self.containers.len() / (CONTAINER_WORDS * 4);
        let (mut low, mut high) = (0, count);
        while low < high {
            let middle = (low + high) / 2;
            let at = word(self.containers, middle * CONTAINER_WORDS)? as usize;
            match at.cmp(&start) {
                std::cmp::Ordering::Equal => {
                    let base = middle * CONTAINER_WORDS;
                    return Some(Container {
                        end: word(self.containers, base + 1)? as usize,
                        kind: word(self.containers, base + 2)?,
                        first: word(self.containers, base + 3)? as usize,
                        count: word(self.containers, base + 4)? as usize,
                    });
                }
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
            }
        }
        None
    }

    /// The end of the container starting at `start`, when it is indexed.
    pub fn end_of(&self, doc: &[u8], start: usize) -> Option<usize> {
        self.container(start)
            .map(|container| container.end)
            .filter(|end| *end <= doc.len() && *end > start)
    }

    /// Whether the value at `start` is an indexed container (then [`Index::child`] answers).
    pub fn is_indexed(&self, start: usize) -> bool {
        self.container(start).is_some()
    }

    /// The member `name` of the indexed object at `start`, or element `position` of the indexed
    /// array at `start`: its value span and whole entry span. `Ok(None)` if it does not exist;
    /// `Err(NotIndexed)` if `start` is not an indexed container of the right kind.
    pub fn child(
        &self,
        doc: &[u8],
        start: usize,
        component: &super::path::Component<'_>,
    ) -> Result<Option<(Span, Span)>, NotIndexed> {
        let container = self.container(start).ok_or(NotIndexed)?;
        match (component, container.kind) {
            (super::path::Component::Key(name), KIND_OBJECT) => {
                let (hash, plain_name) = name_hash_and_plain(name);
                let mut row = self.first_row_with(&container, hash).ok_or(NotIndexed)?;
                while row < container.count {
                    let base = container.first + row * 3;
                    if word(self.entries, base).ok_or(NotIndexed)? != hash {
                        break;
                    }
                    let key_at = word(self.entries, base + 1).ok_or(NotIndexed)? as usize;
                    let value_at = word(self.entries, base + 2).ok_or(NotIndexed)? as usize;
                    if doc.get(key_at) == Some(&b'"')
                        && ((plain_name && verbatim_name_at(doc, key_at, name)) || {
                            let key_end = scan::string_end(doc, key_at).map_err(|_| NotIndexed)?;
                            scan::key_is(doc, (key_at, key_end), name)
                        })
                    {
                        let value_end = self.value_end(doc, value_at).map_err(|_| NotIndexed)?;
                        return Ok(Some(((value_at, value_end), (key_at, value_end))));
                    }
                    row += 1;
                }
                Ok(None)
            }
            (super::path::Component::Index(position), KIND_ARRAY) => {
                let position = if *position == -1 {
                    match container.count.checked_sub(1) {
                        Some(last) => last,
                        None => return Ok(None),
                    }
                } else {
                    *position as usize
                };
                if position >= container.count {
                    return Ok(None);
                }
                let at = word(self.entries, container.first + position).ok_or(NotIndexed)? as usize;
                let end = self.value_end(doc, at).map_err(|_| NotIndexed)?;
                Ok(Some(((at, end), (at, end))))
            }
            _ => Err(NotIndexed),
        }
    }

    /// The first of an object's rows (sorted by name hash) whose hash is `>= hash`: the
    /// directory after the rows bounds it to a few rows, which are read in order.
    fn first_row_with(&self, container: &Container, hash: u32) -> Option<usize> {
        let bits = directory_bits(container.count);
        let directory = container.first + container.count * 3;
        let prefix = hash_prefix(hash, bits) as usize;
        let mut row = word(self.entries, directory + prefix)? as usize;
        let end = (word(self.entries, directory + prefix + 1)? as usize).min(container.count);
        while row < end && word(self.entries, container.first + row * 3)? < hash {
            row += 1;
        }
        Some(row)
    }

    /// Like [`scan::value_end`], but steps over indexed containers without scanning them.
    pub fn value_end(&self, doc: &[u8], at: usize) -> Result<usize, Status> {
        if matches!(doc.get(at), Some(b'{' | b'[')) {
            if let Some(end) = self.end_of(doc, at) {
                return Ok(end);
            }
        }
        scan::value_end(doc, at)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::path;

    fn seed_doc(keys: usize) -> String {
        let data: Vec<String> = (0..keys)
            .map(|i| format!("\"subkey-{i:06}\":\"value-{i:06}\""))
            .collect();
        format!(
            "{{\"key\":\"test-subdoc\",\"data\":{{{}}}}}",
            data.join(",")
        )
    }

    /// The name hash is part of the stored format: these values were computed from the
    /// description in docs/format/subdoc-index.md by a separate implementation.
    #[test]
    fn name_hash_is_the_documented_one() {
        assert_eq!(name_hash(b""), 0);
        assert_eq!(name_hash(b"a"), 0x1caa_89fc);
        assert_eq!(name_hash(b"data"), 0x9ce4_b1fd);
        assert_eq!(name_hash(b"subkey-009990"), 0xab47_8afc);
        assert_eq!(name_hash(b"a longer member name, 33 bytes!!"), 0xf9f1_8fd8);
        assert!(name_hash_and_plain(b"plain name").1);
        for special in [&b"quote\"d"[..], b"back\\slash", b"0123456789\\"] {
            assert!(!name_hash_and_plain(special).1);
        }
    }

    /// Names that differ only in their last bytes (the seed document's) spread evenly over the
    /// directory, so a lookup compares a few rows, not a long run of them.
    #[test]
    fn similar_names_spread_over_the_directory() {
        let rows = 10_000;
        let bits = directory_bits(rows);
        let mut slots = vec![0usize; 1 << bits];
        for i in 0..rows {
            slots[hash_prefix(name_hash(format!("subkey-{i:06}").as_bytes()), bits) as usize] += 1;
        }
        let fullest = slots.iter().copied().max().unwrap();
        assert!(fullest <= 16, "{fullest} rows share one directory slot");
    }

    #[test]
    fn indexed_children_match_the_document() {
        let doc = seed_doc(2000);
        let raw = build(doc.as_bytes()).unwrap();
        let index = Index::open(&raw).unwrap();
        let data_at = doc.find("\"data\":").unwrap() + 7;
        assert!(index.is_indexed(data_at));
        assert_eq!(index.end_of(doc.as_bytes(), data_at), Some(doc.len() - 1));
        for i in [0, 1, 999, 1999] {
            let name = format!("subkey-{i:06}");
            let component = path::Component::Key(std::borrow::Cow::Owned(name.into_bytes()));
            let ((start, end), _) = index
                .child(doc.as_bytes(), data_at, &component)
                .unwrap()
                .unwrap();
            assert_eq!(&doc[start..end], format!("\"value-{i:06}\""));
        }
        let absent = path::Component::Key(std::borrow::Cow::Borrowed(&b"subkey-999999"[..]));
        assert_eq!(index.child(doc.as_bytes(), data_at, &absent).unwrap(), None);
        // Index size for the seed document's shape.
        assert!(
            raw.len() * 100 / doc.len() < 45,
            "{} of {}",
            raw.len(),
            doc.len()
        );
        assert!(build(b"{\"small\":1}").is_none());
    }

    /// Every member of every indexed object is answered by the index itself (never "not
    /// indexed", which would mean a silent fallback to scanning), and from its own object: two
    /// big siblings with the same member names must not answer for each other.
    #[test]
    fn each_object_answers_for_its_own_members() {
        let object = |tag: &str| {
            let members: Vec<String> = (0..300)
                .map(|i| format!(r#""m{i:04}":"{tag}{i}""#))
                .collect();
            format!("{{{}}}", members.join(","))
        };
        let doc = format!(
            r#"{{"a":{},"b":{},"c":{}}}"#,
            object("a"),
            object("b"),
            object("c")
        );
        let raw = build(doc.as_bytes()).unwrap();
        let index = Index::open(&raw).unwrap();
        for tag in ["a", "b", "c"] {
            let at = doc.find(&format!("\"{tag}\":{{")).unwrap() + 4;
            assert!(index.is_indexed(at), "{tag}");
            for i in 0..300 {
                let name = format!("m{i:04}");
                let component = path::Component::Key(std::borrow::Cow::Owned(name.into_bytes()));
                let found = index.child(doc.as_bytes(), at, &component);
                let Ok(Some(((start, end), _))) = found else {
                    panic!("{tag}.m{i:04}: {found:?}");
                };
                assert_eq!(&doc[start..end], format!("\"{tag}{i}\""));
            }
        }
    }

    #[test]
    fn lookups_with_the_index_equal_lookups_without() {
        use crate::json::{resolve_all, resolve_all_indexed};
        let items: Vec<String> = (0..300)
            .map(|i| format!(r#"{{"id":{i},"tags":["t{i}","u"],"name":"item \"{i}\"","nested":{{"k{i}":[{i},{{"deep":"x{i}"}}]}}}}"#))
            .collect();
        let doc = format!(
            r#"{{"head":"h","items":[{}],"map":{{{}}},"a.b":1,"tail":[1,2,3]}}"#,
            items.join(","),
            (0..200)
                .map(|i| format!(r#""k\u00{:02x}{i}":{i}"#, 0x41 + i % 20))
                .collect::<Vec<_>>()
                .join(",")
        );
        assert!(serde_json::from_str::<serde_json::Value>(&doc).is_ok());
        let raw = build(doc.as_bytes()).unwrap();
        let index = Index::open(&raw).unwrap();
        let paths = [
            "head",
            "items[0].id",
            "items[299].nested.k299[1].deep",
            "items[-1].tags[-1]",
            "items[150].name",
            "items[300]",
            "map.kA0",
            "map.kB1",
            "map.kT199",
            "map.nope",
            "`a.b`",
            "tail[-1]",
            "items.x",
            "map[0]",
            "items[5].tags[2]",
            "head.x",
            "",
        ];
        let parsed: Vec<Vec<path::Component<'_>>> = paths
            .iter()
            .map(|p| path::parse(p.as_bytes()).unwrap())
            .collect();
        let refs: Vec<&[path::Component<'_>]> = parsed.iter().map(Vec::as_slice).collect();
        let plain = resolve_all(doc.as_bytes(), &refs);
        let indexed = resolve_all_indexed(doc.as_bytes(), Some(&index), &refs);
        assert_eq!(plain, indexed);
        for (i, path) in paths.iter().enumerate() {
            let one = resolve_all_indexed(doc.as_bytes(), Some(&index), &[refs[i]]);
            assert_eq!(one[0], plain[i], "{path}");
        }
        assert!(plain[2].is_ok() && plain[6].is_ok() && plain[9].is_err());
    }

    /// Not a test of speed (no thresholds): prints what a lookup costs, for BENCHMARKS.md.
    /// `cargo test --release -p settee-engine lookup_cost -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn lookup_cost() {
        use crate::json::resolve_all_indexed;
        let doc = seed_doc(10_000);
        let raw = build(doc.as_bytes()).unwrap();
        let index = Index::open(&raw).unwrap();
        println!(
            "document {} bytes, index {} bytes ({}%)",
            doc.len(),
            raw.len(),
            raw.len() * 100 / doc.len()
        );
        for (name, first) in [
            ("easy", 0),
            ("medium", 5000),
            ("hard", 9990),
            ("impossible", 20000),
        ] {
            let texts: Vec<String> = (first..first + 10)
                .map(|i| format!("data.subkey-{i:06}"))
                .collect();
            let parsed: Vec<Vec<path::Component<'_>>> = texts
                .iter()
                .map(|t| path::parse(t.as_bytes()).unwrap())
                .collect();
            let refs: Vec<&[path::Component<'_>]> = parsed.iter().map(Vec::as_slice).collect();
            for (label, with) in [("scan", None), ("index", Some(&index))] {
                let rounds = if with.is_some() { 20_000 } else { 200 };
                let started = std::time::Instant::now();
                for _ in 0..rounds {
                    std::hint::black_box(resolve_all_indexed(doc.as_bytes(), with, &refs));
                }
                println!(
                    "{name:>10} {label:>5}: {:>9.0} ns per 10-path lookup",
                    started.elapsed().as_nanos() as f64 / rounds as f64
                );
            }
        }
    }

    #[test]
    fn corrupt_indexes_are_refused_or_harmless() {
        let doc = seed_doc(500);
        let raw = build(doc.as_bytes()).unwrap();
        assert!(Index::open(&raw[..raw.len() - 1]).is_none());
        assert!(Index::open(&[9]).is_none());
        // Garbage with a valid header: every answer is bounds-checked.
        let mut garbage = raw.clone();
        for (i, byte) in garbage.iter_mut().enumerate().skip(9) {
            *byte = (i * 31) as u8;
        }
        if let Some(index) = Index::open(&garbage) {
            for start in 0..doc.len() {
                let component = path::Component::Key(std::borrow::Cow::Borrowed(&b"key"[..]));
                let _ = index.child(doc.as_bytes(), start, &component);
                let _ = index.child(doc.as_bytes(), start, &path::Component::Index(3));
                let _ = index.value_end(doc.as_bytes(), start);
            }
        }
    }
}
