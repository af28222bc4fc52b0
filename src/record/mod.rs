//! The records that flow one way from the parts that measure (the load generator, the mock)
//! to the parts that consume them (the live view, the recorder, the run folder, the
//! analysis): client samples, upstream attempts, mock events, 1 s windows, the identity of one shard
//! of a run several processes generate together, and the room's observations. One type per
//! run-folder file, shared by its writer and its reader.
//!
//! Ground layer: plain data with serde, no I/O; imports nothing from the crate.

mod attempt;
mod event;
mod observation;
mod sample;
mod shard;
mod stamp;
mod window;

pub use attempt::{Api, Attempt, Decision, parse_request_id};
pub use event::{Event, EventKind};
pub use observation::{Observation, ObservationKind};
pub use sample::{Outcome, Sample, SessionStep, TaskEnd, Usage, count_failed, count_served};
pub use shard::{Shard, ShardFile, ShardRole, ShardStage};
pub use stamp::{Stamp, Stamped};
pub use window::{WindowLatency, WindowSummary};
