//! What a retry or protection policy got the run's requests, measured or simulated: the
//! numbers the what-if compares ([`Outcomes`], by [`measure`]), its calibration against the run,
//! and the verdict that ranks policies under the objective ([`verdict`]). The simulation that
//! produces simulated outcomes is the `whatif` layer above; this module is what the summary
//! holds (`whatif.json`) and the report renders.
//!
//! Layer 4 (analysis): pure statistics over records; must not depend on `whatif`, `gate`,
//! `report`, `experiment` or `cli`.

pub mod measure;
pub mod verdict;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use measure::{Calibration, Check, Outcomes};

/// Version of `whatif.json`.
pub const WHATIF_VERSION: u32 = 1;

/// `whatif.json`: the measured run, the calibration, and every simulated policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WhatIf {
    /// Schema version.
    pub version: u32,
    /// The policy that ran, as simulated for the calibration.
    pub ran: String,
    /// Where that policy came from: `built-in gateway`, `load generator`, `inferred`.
    pub ran_source: String,
    /// How an inferred policy was fitted (empty when the policy was known).
    pub inferred: Vec<String>,
    /// What the model does not cover in this run.
    pub assumptions: Vec<String>,
    /// The run's own numbers.
    pub measured: Outcomes,
    /// The simulated policy that ran, against the measured run.
    pub calibration: Calibration,
    /// The policy that ran, simulated (first), then every other policy.
    pub policies: Vec<PolicyOutcome>,
    /// Which policy to take against the objective, with the trade-off; policies that did the
    /// same and why (inline markup).
    #[serde(default)]
    pub verdict: Vec<String>,
}

/// One simulated policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyOutcome {
    /// Name.
    pub name: String,
    /// What it is.
    pub description: Option<String>,
    /// `ran`, `shipped`, or the file it came from.
    pub source: String,
    /// Its numbers.
    pub outcomes: Outcomes,
}
