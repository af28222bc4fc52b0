//! `chaos`: a chaos and load-testing harness for services that call LLM APIs.
//!
//! The library holds everything; the binary only parses the command line. Dependencies flow
//! one way, down these layers (`tests/architecture.rs` fails on an import that goes up):
//!
//! | layer | modules | |
//! |---|---|---|
//! | 7 | [`cli`] | parsing and the exit-code table |
//! | 6 | [`experiment`] | one run: mocks, SUT, load on one clock; then analyse → gate → render |
//! | 5 | [`report`] | renders a summary, verdict and chart series; computes nothing |
//! | 4 | [`gate`] | summary → verdict, baseline comparison |
//! | 3 | [`analysis`] | records → summary and chart series; every statistic |
//! | 2 | [`mock`], [`gateway`], [`load`], [`sut`] | side by side; only `sut` imports `gateway`; `gateway` imports the ground only |
//! | 1 | [`scenario`], [`faults`], [`run_folder`] | `scenario` may hold `faults` types, never the reverse |
//! | 0 | [`clock`], [`seed`], [`net`], [`listen`], [`words`], [`duration`], [`located`], [`record`], [`markup`] | the ground: imports nothing above it |
//!
//! A finished run goes one way: records (samples, attempts, events, windows) →
//! [`run_folder`] → [`analysis::analyse`] → [`gate::evaluate`] → [`report::render`], driven by
//! [`experiment::finish()`] for `chaos run`, `chaos report` and `chaos check` alike.
//! See the README for the file formats and the exit-code table.

pub mod analysis;
pub mod cli;
pub mod clock;
pub mod duration;
pub mod experiment;
pub mod faults;
pub mod gate;
pub mod gateway;
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
