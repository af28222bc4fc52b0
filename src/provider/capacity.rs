//! The capacity rule: `slots` concurrent generations behind a FIFO queue of `queue` places;
//! with both full, an attempt overflows at once with the profile's status (429 with a
//! `Retry-After` of 1 s, 503 or 529).
//!
//! The mock carries it out with a semaphore in real time (`mock::capacity`), the what-if on
//! simulated time; both ask [`Capacity::admit`].
//!
//! Layer 2 (provider): pure; must not depend on `mock` or anything above it.

use std::time::Duration;

use crate::scenario::Overflow;

/// One upstream's slots, queue and overflow answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Concurrent generations (`None`: unlimited).
    pub slots: Option<u32>,
    /// Places in the queue for a slot.
    pub queue_limit: u32,
    /// The answer when slots and queue are full.
    pub overflow: Overflow,
}

/// Where an arriving attempt goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// A slot is free: it generates now.
    Slot,
    /// It waits in the queue for a slot.
    Queue,
    /// Slots and queue are full: it is refused with [`Capacity::overflow_status`].
    Overflow,
}

impl Capacity {
    /// The profile's capacity.
    pub fn new(c: &crate::scenario::Capacity) -> Self {
        Self { slots: c.slots, queue_limit: c.queue, overflow: c.overflow }
    }

    /// Where an attempt goes that arrives while `busy` slots generate and `queued` wait.
    pub fn admit(&self, busy: u32, queued: u32) -> Admit {
        match self.slots {
            None => Admit::Slot,
            Some(n) if busy < n => Admit::Slot,
            Some(_) if queued < self.queue_limit => Admit::Queue,
            Some(_) => Admit::Overflow,
        }
    }

    /// The status an overflowing attempt gets.
    pub fn overflow_status(&self) -> u16 {
        self.overflow.status()
    }

    /// The `Retry-After` it carries (only a 429 does: 1 s).
    pub fn overflow_retry_after(&self) -> Option<Duration> {
        (self.overflow == Overflow::TooManyRequests).then_some(Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_slots_first_then_the_queue_then_overflow() {
        let c = Capacity { slots: Some(2), queue_limit: 1, overflow: Overflow::TooManyRequests };
        assert_eq!(
            [c.admit(0, 0), c.admit(1, 0), c.admit(2, 0), c.admit(2, 1)],
            [Admit::Slot, Admit::Slot, Admit::Queue, Admit::Overflow]
        );
        assert_eq!((c.overflow_status(), c.overflow_retry_after()), (429, Some(Duration::from_secs(1))));
        let unlimited = Capacity { slots: None, ..c };
        assert_eq!(unlimited.admit(10_000, 10_000), Admit::Slot);
        let shed = Capacity { overflow: Overflow::Unavailable, ..c };
        assert_eq!((shed.overflow_status(), shed.overflow_retry_after()), (503, None));
    }
}
