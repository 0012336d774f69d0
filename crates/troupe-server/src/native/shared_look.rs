//! [`SharedLook`]: one look at the store answering every announcement stream that asks
//! within a moment of it.
//!
//! Each stream of `/v1/runs/changes` looks at the store's newest runs once a second. Made
//! by each stream alone, a hundred open lists would read the store a hundred times a
//! second; sharing the look, the store is read about once a second however many are open.

use std::future::Future;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// The last look and when it was made. Streams that ask while a look is being made wait
/// for it rather than making their own.
#[derive(Debug, Default)]
pub(crate) struct SharedLook {
    last: Mutex<Option<(Instant, Option<u64>)>>,
}

impl SharedLook {
    /// What the last look saw, if it is younger than `fresh`; else what `look` sees now,
    /// kept for the next asker.
    pub(crate) async fn get<F>(&self, fresh: Duration, look: impl FnOnce() -> F) -> Option<u64>
    where
        F: Future<Output = Option<u64>>,
    {
        let mut last = self.last.lock().await;
        if let Some((at, seen)) = *last
            && at.elapsed() < fresh
        {
            return seen;
        }
        let seen = look().await;
        *last = Some((Instant::now(), seen));
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_asking_together_share_one_look_until_it_is_stale() {
        let shared = Arc::new(SharedLook::default());
        let looks = Arc::new(AtomicUsize::new(0));
        let ask = |fresh: Duration, seen: u64| {
            let (shared, looks) = (Arc::clone(&shared), Arc::clone(&looks));
            async move {
                shared
                    .get(fresh, || async {
                        looks.fetch_add(1, Ordering::SeqCst);
                        // A store read takes a while: the others ask meanwhile.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Some(seen)
                    })
                    .await
            }
        };
        let minute = Duration::from_secs(60);
        let asks = (0..50).map(|_| tokio::spawn(ask(minute, 7)));
        let answers: Vec<_> = futures::future::join_all(asks).await.into_iter().map(|a| a.expect("asked")).collect();
        assert_eq!(looks.load(Ordering::SeqCst), 1, "fifty streams at once read the store once");
        assert!(answers.iter().all(|answer| *answer == Some(7)), "{answers:?}");

        assert_eq!(ask(minute, 8).await, Some(7), "still fresh: the last look answers");
        assert_eq!(ask(Duration::ZERO, 8).await, Some(8), "stale: the store is looked at again");
        assert_eq!(looks.load(Ordering::SeqCst), 2);
    }
}
