//! The provider model: what an LLM provider does with the k-th request, as pure functions of
//! the scenario's profile, the seed and the fault timeline. No sockets, no tokio, no clock.
//!
//! It exists so the harness has one definition of its own provider. The mock
//! ([`crate::mock`]) serves it over HTTP with real time; the what-if ([`crate::whatif`])
//! simulates it on simulated time. Both ask this module the same questions in the same order
//! for the k-th attempt to an upstream:
//!
//! 1. its plan, drawn from the RNG keyed by (seed, upstream, k): [`decide::plan`];
//! 2. the fault ruling, from the fault stream of the same key: [`decide::ruling`];
//! 3. the plan as the faults leave it: [`decide::shaped`];
//! 4. what happens before any capacity is used (a status, a reset, a hang that never
//!    answers): [`decide::edge`];
//! 5. the rate limits in force ([`decide::limit_in_force`], [`token_bucket`]);
//! 6. a slot, a place in the queue, or overflow ([`capacity`]);
//! 7. what the attempt is recorded as: [`decide::decision_for`].
//!
//! `tests/it/provider_model.rs` sends the same seeded requests through the mock and the
//! what-if's provider and requires identical decisions and plans.
//!
//! Layer 2: builds on `scenario`, `faults`, `record` and the ground; must not depend on
//! `mock`, `load`, `analysis` or anything above them.

pub mod capacity;
pub mod decide;
pub mod latency_model;
pub mod token_bucket;

pub use capacity::{Admit, Capacity};
pub use latency_model::{LatencyModel, Plan};
pub use token_bucket::RateLimiter;
