//! What if: the run replayed under other retry and protection policies.
//!
//! The harness owns the provider model (latency, slots and queue, rate limits, the fault
//! timeline, all seeded) and recorded every client request, so it can answer "what would a
//! retry budget, backoff or a breaker have done here?" by simulation, for many policies at
//! once, in seconds. The run's arrivals are replayed at their intended send times through
//! [`sim`] against [`sim_provider`]; each policy's records are judged by [`measure`] with the same
//! code as the run itself.
//!
//! Calibration first: the policy that ran (the built-in gateway's, or the load's own client
//! retries when there is no SUT, or one fitted by [`infer`] for an external SUT) is simulated
//! and compared with what was measured; the report prints that line before any what-if number,
//! and says "uncalibrated" with the mismatch when it misses.
//!
//! What it produces (`whatif.json`: [`WhatIf`]) and how those numbers are measured and ranked
//! are plain statistics over records, so they live in `analysis::policy_outcomes`, where the
//! summary and the report read them; this layer is the simulation that makes them.
//!
//! Layer 5 (whatif): above `analysis`, below `gate`. Uses the provider model
//! ([`crate::provider`]) and the gateway's policy types and state machines (breaker, router),
//! never a server; pure and synchronous. Must not depend on `gate`, `report`, `experiment` or
//! `cli`.

pub mod budget;
pub mod infer;
pub mod policy;
pub mod sim;
pub mod sim_provider;

use std::collections::HashMap;

pub use policy::Policy;
pub use sim::{Arrive, Records, World, simulate};

use crate::analysis::Summary;
use crate::analysis::policy_outcomes::{Outcomes, PolicyOutcome, WHATIF_VERSION, WhatIf, measure, verdict};
use crate::record::{Attempt, Sample};
use crate::scenario::{LoadLevel, Scenario};

/// The run as the what-if reads it: the resolved scenario, the measured summary, the records.
pub struct Run<'a> {
    /// `resolved.json`.
    pub scenario: &'a Scenario,
    /// The measured summary.
    pub summary: &'a Summary,
    /// `samples.ndjson`.
    pub samples: &'a [Sample],
    /// `attempts.ndjson`.
    pub attempts: &'a [Attempt],
}

/// Why a what-if cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WhatIfError {
    /// The scenario has no load.
    #[error("the run has no load to replay")]
    NoLoad,
    /// The scenario has no mock upstream.
    #[error("the run has no mock upstream: the what-if simulates the mock's provider model")]
    NoUpstream,
    /// No request was recorded.
    #[error("the run recorded no client request to replay")]
    NoRequests,
    /// A policy would make unbounded work of the replay.
    #[error(transparent)]
    TooManyAttempts(#[from] sim::TooManyAttempts),
}

/// The world of a run: the provider side and the arrivals to replay.
pub fn world(run: &Run<'_>) -> Result<World, WhatIfError> {
    let s = run.scenario;
    let load = s.load.as_ref().ok_or(WhatIfError::NoLoad)?;
    if s.upstreams.is_empty() {
        return Err(WhatIfError::NoUpstream);
    }
    if run.samples.is_empty() {
        return Err(WhatIfError::NoRequests);
    }
    let prompts = crate::load::Prompts::new(load, s.seed);
    let mut tokens: HashMap<u32, u32> = HashMap::new();
    let mut arrivals: Vec<Arrive> = run
        .samples
        .iter()
        .map(|x| {
            let prompt_tokens = *tokens.entry(x.key).or_insert_with(|| {
                crate::mock::request::parse_chat(&prompts.body(x.id), crate::record::Api::Chat)
                    .map_or(30, |r| r.prompt_tokens)
            });
            Arrive { id: x.id, stage: x.stage, intended_us: x.intended_us, key: x.key, prompt_tokens }
        })
        .collect();
    arrivals.sort_by_key(|a| (a.intended_us, a.id));
    Ok(World {
        seed: s.seed,
        t0_us: run.summary.load_start_us,
        upstreams: s.upstreams.clone(),
        faults: s.faults.clone(),
        stream: load.stream,
        max_tokens: load.max_tokens,
        client_timeout_us: u64::try_from(load.timeout.as_std().as_micros()).unwrap_or(u64::MAX),
        arrivals,
    })
}

/// The policy that ran: the built-in gateway's, the load generator's own retries when the load
/// went straight to the mock, or (for any other SUT) one fitted from the attempt log.
pub fn ran_policy(run: &Run<'_>) -> (Policy, String, Vec<String>) {
    let s = run.scenario;
    if let Some(cfg) = crate::sut::declared_policy(s.sut.as_ref()) {
        return (Policy::from_gateway(cfg), "built-in gateway".into(), Vec::new());
    }
    let load = s.load.as_ref();
    if s.sut.is_none() {
        let r = load.map(|l| l.retry.clone()).unwrap_or_default();
        let policy = Policy {
            name: "load generator".into(),
            description: Some("the load's own client, straight to the mock".into()),
            client: crate::gateway::config::ClientConfig { pool_size: 100_000, ..Default::default() },
            retry: crate::gateway::config::RetryConfig {
                max_retries: r.max_retries,
                on_status: r.on_status,
                on_timeout: r.on_timeout,
                on_connect_error: r.on_connect_error,
                backoff: r.backoff.map(|b| crate::gateway::config::Backoff { base: b.base, max: b.max }),
                honour_retry_after: r.honour_retry_after,
                ..Default::default()
            },
            ..Policy::default()
        };
        return (policy, "load generator".into(), Vec::new());
    }
    let timeout = load.map_or(30_000_000, |l| u64::try_from(l.timeout.as_std().as_micros()).unwrap_or(u64::MAX));
    let fitted = infer::infer(run.samples, run.attempts, timeout);
    (fitted.policy, "inferred".into(), fitted.notes)
}

/// What the model does not cover in this run.
fn assumptions(run: &Run<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let Some(load) = run.scenario.load.as_ref() else { return out };
    if load.stages.iter().any(|st| matches!(st.level, LoadLevel::Closed { .. })) {
        out.push(
            "closed load is replayed as open at the recorded send times: a slower policy would also have delayed the next request of each user"
                .into(),
        );
    }
    if run.scenario.sut.is_some() && load.retry.max_retries > 0 {
        out.push("the load generator's own retries are not replayed, only the SUT's policy".into());
    }
    if !run.scenario.triggers.is_empty() {
        out.push("faults fired during the run (verification, probe cells) are not on the replayed timeline".into());
    }
    if load.api != crate::scenario::workload::Api::Openai || load.endpoint != "/v1/chat/completions" {
        out.push("modelled as chat completions (one upstream call per client request)".into());
    }
    out
}

/// Simulates the policy that ran (for the calibration) and then `others`, each with its source.
pub fn whatif(run: &Run<'_>, others: &[(Policy, String)]) -> Result<WhatIf, WhatIfError> {
    let world = world(run)?;
    let (ran, ran_source, inferred) = ran_policy(run);
    let measured = measure::outcomes(run.summary, run.samples, run.attempts);
    let sim = |p: &Policy| -> Result<Outcomes, WhatIfError> {
        let r = simulate(&world, p)?;
        Ok(measure::outcomes(run.summary, &r.samples, &r.attempts))
    };
    let ran_out = sim(&ran)?;
    let calibration = measure::calibrate(&measured, &ran_out);
    let mut policies = vec![PolicyOutcome {
        name: ran.name.clone(),
        description: ran.description.clone(),
        source: "ran".into(),
        outcomes: ran_out,
    }];
    for (p, source) in others {
        let p = if source == "shipped" { policy::on_client_of(p.clone(), &ran) } else { p.clone() };
        policies.push(PolicyOutcome {
            name: p.name.clone(),
            description: p.description.clone(),
            source: source.clone(),
            outcomes: sim(&p)?,
        });
    }
    let mut w = WhatIf {
        version: WHATIF_VERSION,
        ran: ran.name,
        ran_source,
        inferred,
        assumptions: assumptions(run),
        measured,
        calibration,
        policies,
        verdict: Vec::new(),
    };
    w.verdict = verdict::verdict(&w, run.summary.objective.map(|o| o.target), &run.summary.findings);
    Ok(w)
}

#[cfg(test)]
mod tests;
