//! `chaos`: a chaos and load-testing harness for services that call LLM APIs.
//!
//! The library holds everything; the binary only parses the command line. Dependencies flow
//! one way, down the layers of `docs/architecture.md` (cli → experiment → report → gate →
//! whatif → analysis → mock, gateway, load, sut, k8s → provider → scenario, faults,
//! run_folder → the ground); `tests/it/architecture.rs` reads that table and fails on an import
//! that goes up.
//!
//! A finished run goes one way: records (samples, attempts, events, windows) →
//! [`run_folder`] → [`analysis::analyse`] → [`gate::evaluate`] → [`report::render`], driven by
//! [`experiment::finish()`] for `chaos run`, `chaos report` and `chaos check` alike.
//! See `docs/` for the file formats and `docs/cli.md` for the exit-code table.

pub mod analysis;
pub mod cli;
pub mod clock;
pub mod duration;
pub mod experiment;
pub mod faults;
pub mod gate;
pub mod gateway;
pub mod k8s;
pub mod listen;
pub mod load;
pub mod located;
pub mod markup;
pub mod mock;
pub mod net;
pub mod provider;
pub mod record;
pub mod report;
pub mod run_folder;
pub mod scenario;
pub mod seed;
pub mod sut;
pub mod whatif;
pub mod words;
