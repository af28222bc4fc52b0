//! `chaos`: a chaos and load-testing harness for services that call LLM APIs.
//!
//! The library holds everything; the binary only parses the command line. Dependencies flow
//! one way: `cli → experiment → {mock, load, sut, analysis, report}`, `report → analysis`, `mock → faults`, and every
//! module reads `scenario` types.
//! See the README for the file formats and the exit-code table.

pub mod analysis;
pub mod cli;
pub mod clock;
pub mod duration;
pub mod experiment;
pub mod faults;
pub mod gate;
pub mod gateway;
pub mod load;
pub mod located;
pub mod mock;
pub mod net;
pub mod record;
pub mod report;
pub mod run_folder;
pub mod scenario;
pub mod seed;
pub mod sut;
pub mod words;
