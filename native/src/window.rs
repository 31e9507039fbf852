//! A run's dedup window (SPEC §3): the ids of its last `window` applied events.
//!
//! Ids live in a ring, short ones inline (no allocation), each with its 64-bit hash; the hash
//! table holds sequence numbers into the ring. So forgetting the oldest id compares sequence
//! numbers, not strings, and frees nothing: with a full window, one event otherwise read a
//! string written thousands of events earlier, cold in the cache, twice (compare and free).

use compact_str::CompactString;
use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::collections::VecDeque;
use std::hash::BuildHasher;

#[derive(Default)]
pub struct Window {
    ids: VecDeque<(u64, CompactString)>,
    first: u64, // sequence number of ids[0]
    table: HashTable<u64>,
}

fn hash(id: &str) -> u64 {
    FxBuildHasher.hash_one(id)
}

impl Window {
    pub fn contains(&self, id: &str) -> bool {
        let h = hash(id);
        self.table.find(h, |&seq| {
            let (stored, text) = &self.ids[(seq - self.first) as usize];
            *stored == h && text == id
        }).is_some()
    }

    /// Remember `id`, forgetting the oldest ids beyond `limit`.
    pub fn push(&mut self, id: &str, limit: usize) {
        let h = hash(id);
        let seq = self.first + self.ids.len() as u64;
        self.ids.push_back((h, CompactString::new(id)));
        let (ids, first) = (&self.ids, self.first);
        self.table.insert_unique(h, seq, |&s| ids[(s - first) as usize].0);
        while self.ids.len() > limit {
            let Some((old, _)) = self.ids.pop_front() else { break };
            let oldest = self.first;
            if let Ok(entry) = self.table.find_entry(old, |&s| s == oldest) {
                entry.remove();
            }
            self.first += 1;
        }
    }
}
