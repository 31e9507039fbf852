//! Which shard owns a line's run: processor/sharding.py `Shards.route`, byte for byte.

use rustc_hash::FxHashMap;

pub const AMBIGUOUS: i64 = -1;
const KEY: &[u8] = b"\"subject\"";

pub struct Shards {
    pub mine: i64,
    count: i64,
    planned: FxHashMap<Vec<u8>, i64>,
}

impl Shards {
    pub fn new(mine: i64, count: i64, planned: FxHashMap<Vec<u8>, i64>) -> Self {
        Shards { mine, count, planned }
    }

    pub fn of_run(&self, run_id: &[u8]) -> i64 {
        match self.planned.get(run_id) {
            Some(owner) => *owner,
            None => i64::from(crc32fast::hash(run_id)) % self.count,
        }
    }

    pub fn route(&self, raw: &[u8]) -> i64 {
        match subject_bytes(raw) {
            Some(subject) => self.of_run(subject),
            None => AMBIGUOUS,
        }
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    memchr::memmem::find(hay.get(from..)?, needle).map(|i| i + from)
}

/// The run id's bytes when a byte search is certain of them: no backslash in the line,
/// exactly one `"subject"`, then JSON whitespace, a colon, whitespace and a plain string.
fn subject_bytes(raw: &[u8]) -> Option<&[u8]> {
    let at = find(raw, KEY, 0)?;
    if memchr::memchr(b'\\', raw).is_some() || find(raw, KEY, at + KEY.len()).is_some() {
        return None;
    }
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let mut i = at + KEY.len();
    while raw.get(i).is_some_and(ws) {
        i += 1;
    }
    if raw.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    while raw.get(i).is_some_and(ws) {
        i += 1;
    }
    if raw.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let len = raw.get(start..)?.iter().position(|b| *b == b'"')?;
    Some(&raw[start..start + len])
}
