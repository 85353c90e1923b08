//! Producer connections by name, per bucket: as on kv_engine, a DCP_OPEN with the name of a
//! live producer connection closes the older one (a consumer that reconnects after a network
//! split must not leave its old connection streaming into the void).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// (bucket id, connection name).
type NameKey = (u32, String);

/// The connection holding a name: its token, and how to tell it to go.
type Holder = (u64, Arc<Notify>);

/// The node's producer connections. The mutex is held only to insert or remove a name.
#[derive(Default)]
pub(crate) struct ProducerNames {
    live: Mutex<HashMap<NameKey, Holder>>,
    next_token: std::sync::atomic::AtomicU64,
}

/// One connection's place under its name; leaves it when dropped.
pub(crate) struct Registration<'a> {
    names: &'a ProducerNames,
    key: NameKey,
    token: u64,
    /// Notified when a newer connection takes the name.
    pub replaced: Arc<Notify>,
}

impl ProducerNames {
    /// Takes `name` in bucket `bucket_id`, closing the connection that held it.
    pub(crate) fn register(&self, bucket_id: u32, name: &str) -> Registration<'_> {
        let token = self
            .next_token
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let replaced = Arc::new(Notify::new());
        let key = (bucket_id, name.to_string());
        let older = self
            .live
            .lock()
            .insert(key.clone(), (token, replaced.clone()));
        if let Some((_, older)) = older {
            // A permit is stored if the older connection is not waiting right now.
            older.notify_one();
        }
        Registration {
            names: self,
            key,
            token,
            replaced,
        }
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        let mut live = self.names.live.lock();
        if live
            .get(&self.key)
            .is_some_and(|(token, _)| *token == self.token)
        {
            live.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_connection_of_a_name_replaces_the_first() {
        let names = ProducerNames::default();
        let first = names.register(1, "connector");
        let other_bucket = names.register(2, "connector");
        let second = names.register(1, "connector");
        // The first was told; its leaving does not take the name from the second.
        let told = first.replaced.clone();
        drop(first);
        assert!(futures_util::FutureExt::now_or_never(told.notified()).is_some());
        assert!(futures_util::FutureExt::now_or_never(other_bucket.replaced.notified()).is_none());
        assert_eq!(names.live.lock().len(), 2);
        drop(second);
        drop(other_bucket);
        assert!(names.live.lock().is_empty());
    }
}
