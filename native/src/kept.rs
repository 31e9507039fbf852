//! A run's kept checkpoints: records in a slab, found by key through a compact hash index,
//! ordered by sort key.
//!
//! With a `num_to_keep`, retention needs the worst records after every insert, so the order
//! is a BTreeMap (O(log n)). Without one nothing is ever evicted and the order is read only
//! when the document is built, so it is computed then, by one sort ("lazy"): an insert is
//! then a slab push and one hash probe, and a million kept records cost an insert no more
//! cache misses than a thousand (a tree walk touches a cold node per level).

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use slab::Slab;
use std::collections::BTreeMap;
use std::hash::BuildHasher;
use std::rc::Rc;

use crate::score::SortKey;
use crate::support::Metrics;

pub type Id = usize;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Committed,
    Pending,
    Validated,
    Failed,
    Timeout,
}

impl Status {
    pub fn name(self) -> &'static str {
        match self {
            Status::Committed => "COMMITTED",
            Status::Pending => "PENDING_VALIDATION",
            Status::Validated => "VALIDATED",
            Status::Failed => "VALIDATION_FAILED",
            Status::Timeout => "VALIDATION_TIMEOUT",
        }
    }
}

pub struct Record {
    pub path: Rc<str>,
    pub key: Option<Rc<str>>, // None when the path is its own key
    pub metrics: Metrics,
    pub status: Status,
    pub sort_key: SortKey,
}

impl Record {
    pub fn key(&self) -> &Rc<str> {
        self.key.as_ref().unwrap_or(&self.path)
    }
}

pub struct Kept {
    slab: Slab<Record>,
    index: HashTable<(u32, u32)>, // (high half of the key's hash, id): a probe compares the hash half
                                  // first, so it rarely reads a cold record's key
    order: Option<BTreeMap<SortKey, Id>>, // None: lazy (see the module doc)
}

fn hash(key: &str) -> u64 {
    FxBuildHasher.hash_one(key)
}

impl Kept {
    pub fn new(sorted: bool) -> Self {
        Kept { slab: Slab::new(), index: HashTable::new(), order: sorted.then(BTreeMap::new) }
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    pub fn find(&self, key: &str) -> Option<Id> {
        let (slab, h) = (&self.slab, hash(key));
        let tag = (h >> 32) as u32;
        self.index.find(h, |&(t, id)| t == tag && &**slab[id as usize].key() == key).map(|&(_, id)| id as Id)
    }

    pub fn get(&self, id: Id) -> &Record {
        &self.slab[id]
    }

    pub fn get_mut(&mut self, id: Id) -> &mut Record {
        &mut self.slab[id]
    }

    pub fn insert(&mut self, record: Record) -> Id {
        let (h, sort_key) = (hash(record.key()), record.sort_key);
        let id = self.slab.insert(record);
        let slab = &self.slab;
        let entry = ((h >> 32) as u32, u32::try_from(id).expect("fewer than 2**32 kept checkpoints per run"));
        self.index.insert_unique(h, entry, |&(_, i)| hash(slab[i as usize].key()));
        if let Some(order) = &mut self.order {
            order.insert(sort_key, id);
        }
        id
    }

    /// Give a record a new sort key (a VALIDATED result changed its metrics).
    pub fn rekey(&mut self, id: Id, sort_key: SortKey) {
        let record = &mut self.slab[id];
        if let Some(order) = &mut self.order {
            order.remove(&record.sort_key);
            order.insert(sort_key, id);
        }
        record.sort_key = sort_key;
    }

    pub fn remove(&mut self, id: Id) -> Record {
        let record = self.slab.remove(id);
        if let Ok(entry) = self.index.find_entry(hash(record.key()), |&(_, i)| i as usize == id) {
            entry.remove();
        }
        if let Some(order) = &mut self.order {
            order.remove(&record.sort_key);
        }
        record
    }

    /// The first `n` ids in sort order (worst first); only a sorted store is ever asked.
    pub fn head(&self, n: usize) -> Vec<Id> {
        let order = self.order.as_ref().expect("retention runs only with num_to_keep");
        order.values().take(n).copied().collect()
    }

    /// Every id in sort order, best last.
    pub fn sorted(&self) -> Vec<Id> {
        match &self.order {
            Some(order) => order.values().copied().collect(),
            None => {
                let mut ids: Vec<(SortKey, Id)> = self.slab.iter().map(|(id, r)| (r.sort_key, id)).collect();
                ids.sort_unstable_by_key(|entry| entry.0); // keys are unique: they end in the report index
                ids.into_iter().map(|(_, id)| id).collect()
            }
        }
    }
}
