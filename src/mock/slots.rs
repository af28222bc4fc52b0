//! The capacity model: `slots` concurrent generations behind a bounded FIFO queue.
//!
//! A request holds a slot for its whole generation (for streams, until the stream ends or the
//! client leaves). Time spent waiting in the queue adds to the time to first token. When the
//! slots and the queue are full the request overflows at once (429, 503 or 529). With fixed
//! service time S and c slots, N > c concurrent requests finish at ≈ ceil(N/c)·S.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Slots and queue for one upstream.
#[derive(Debug)]
pub struct Slots {
    semaphore: Option<Arc<Semaphore>>,
    slots: u32,
    queue_limit: u32,
    queued: AtomicU32,
}

/// The result of asking for a slot.
#[derive(Debug)]
pub enum Admission {
    /// A slot is held (`None` when slots are unlimited) after `queue_wait`.
    Admitted {
        /// Releases the slot when dropped.
        permit: Option<OwnedSemaphorePermit>,
        /// Time spent queued.
        queue_wait: Duration,
    },
    /// Slots and queue were full.
    Overflow,
}

impl Slots {
    /// `slots = None` means unlimited concurrency.
    pub fn new(slots: Option<u32>, queue_limit: u32) -> Self {
        Self {
            semaphore: slots.map(|n| Arc::new(Semaphore::new(n as usize))),
            slots: slots.unwrap_or(0),
            queue_limit,
            queued: AtomicU32::new(0),
        }
    }

    /// Waits for a slot in FIFO order, or overflows when the queue is full.
    pub async fn admit(&self) -> Admission {
        let Some(sem) = &self.semaphore else {
            return Admission::Admitted { permit: None, queue_wait: Duration::ZERO };
        };
        if let Ok(permit) = sem.clone().try_acquire_owned() {
            return Admission::Admitted { permit: Some(permit), queue_wait: Duration::ZERO };
        }
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.queue_limit {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Admission::Overflow;
        }
        // Leaves the queue count even if the client disconnects while waiting.
        let _in_queue = QueueSeat(&self.queued);
        let started = Instant::now();
        match sem.clone().acquire_owned().await {
            Ok(permit) => Admission::Admitted { permit: Some(permit), queue_wait: started.elapsed() },
            Err(_) => Admission::Overflow,
        }
    }

    /// Requests waiting for a slot now.
    pub fn queued(&self) -> u32 {
        self.queued.load(Ordering::Acquire)
    }

    /// Slots generating now (0 when unlimited).
    pub fn busy(&self) -> u32 {
        self.semaphore.as_ref().map_or(0, |s| self.slots.saturating_sub(s.available_permits() as u32))
    }
}

struct QueueSeat<'a>(&'a AtomicU32);

impl Drop for QueueSeat<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unlimited_slots_admit_immediately() {
        let s = Slots::new(None, 0);
        assert!(matches!(s.admit().await, Admission::Admitted { permit: None, .. }));
    }

    #[tokio::test]
    async fn overflow_when_slots_and_queue_are_full() {
        let s = Arc::new(Slots::new(Some(1), 1));
        let Admission::Admitted { permit: Some(held), .. } = s.admit().await else { panic!("first") };
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { matches!(s.admit().await, Admission::Admitted { .. }) }
        });
        while s.queued() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(s.admit().await, Admission::Overflow));
        assert_eq!(s.busy(), 1);
        drop(held);
        assert!(waiter.await.unwrap());
        assert_eq!(s.queued(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let s = Arc::new(Slots::new(Some(1), 4));
        let _held = s.admit().await;
        let waiter = tokio::spawn({
            let s = s.clone();
            async move { s.admit().await }
        });
        while s.queued() == 0 {
            tokio::task::yield_now().await;
        }
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(s.queued(), 0);
    }
}
