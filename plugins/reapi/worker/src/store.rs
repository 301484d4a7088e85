//! The worker's local content store: the blobs of recent leases (trees, files, requests)
//! kept in memory by digest, so that the many runs of one program (a base and its
//! Candidates, one check after another) fetch only what changed. Every blob in it was checked
//! against its digest when it was fetched; the oldest are dropped past a byte budget.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use sf_reapi::cas::{Cas, CasError};
use sf_reapi::proto::execution::Digest;
use sf_reapi::tree::Blobs;

/// Blobs by hash, oldest first out.
pub struct Store {
    blobs: HashMap<String, Arc<Vec<u8>>>,
    order: VecDeque<String>,
    bytes: u64,
    budget: u64,
}

impl Store {
    /// An empty store that keeps at most `budget` bytes.
    pub fn new(budget: u64) -> Self {
        Self {
            blobs: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    fn insert(&mut self, hash: String, bytes: Arc<Vec<u8>>) {
        if self.blobs.contains_key(&hash) {
            return;
        }
        self.bytes += bytes.len() as u64;
        self.order.push_back(hash.clone());
        self.blobs.insert(hash, bytes);
        while self.bytes > self.budget {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(dropped) = self.blobs.remove(&oldest) {
                self.bytes -= dropped.len() as u64;
            }
        }
    }
}

/// The blobs `digests` name, from `store` where it has them and from `cas` otherwise (at
/// most `budget` bytes fetched); those fetched are kept.
pub async fn fetch(
    store: &std::sync::Mutex<Store>,
    cas: &Cas,
    digests: &[Digest],
    budget: u64,
) -> Result<Blobs, CasError> {
    let mut found = Blobs::default();
    let mut missing = Vec::new();
    {
        let store = store.lock().unwrap_or_else(|e| e.into_inner());
        for digest in digests {
            match store.blobs.get(&digest.hash) {
                Some(bytes) if bytes.len() as i64 == digest.size_bytes => {
                    found.add(bytes.to_vec());
                }
                _ => missing.push(digest.clone()),
            }
        }
    }
    if !missing.is_empty() {
        let fetched = cas.read(&missing, budget).await?;
        let mut store = store.lock().unwrap_or_else(|e| e.into_inner());
        for digest in &missing {
            if let Some(bytes) = fetched.get(digest) {
                store.insert(digest.hash.clone(), Arc::new(bytes.to_vec()));
                found.add(bytes.to_vec());
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_blobs_go_first_past_the_budget() {
        let mut store = Store::new(10);
        store.insert("a".into(), Arc::new(vec![0; 4]));
        store.insert("b".into(), Arc::new(vec![0; 4]));
        store.insert("a".into(), Arc::new(vec![0; 4]));
        assert_eq!(store.bytes, 8);
        store.insert("c".into(), Arc::new(vec![0; 4]));
        assert!(!store.blobs.contains_key("a"));
        assert!(store.blobs.contains_key("b") && store.blobs.contains_key("c"));
        assert_eq!(store.bytes, 8);
    }
}
