//! The one-line way to start a mock from Rust tests: `MockUpstream::builder()…start()`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use super::{MockError, MockOptions, MockPool, MockUpstream};
use crate::clock::Clock;
use crate::faults::{Fault, Timeline};
use crate::scenario::{NamedFault, Profile, Upstream};

/// Builds a single [`MockUpstream`].
#[derive(Debug)]
pub struct MockUpstreamBuilder {
    name: String,
    profile: Profile,
    listen: SocketAddr,
    options: MockOptions,
}

impl Default for MockUpstreamBuilder {
    fn default() -> Self {
        Self {
            name: "mock".into(),
            profile: Profile::default(),
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            options: MockOptions::default(),
        }
    }
}

impl MockUpstreamBuilder {
    /// Upstream name (appears in attempt records and metrics).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The behaviour to serve.
    pub fn profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    /// Address to listen on (default `127.0.0.1:0`).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Seed for decisions and content.
    pub fn seed(mut self, seed: u64) -> Self {
        self.options.seed = seed;
        self
    }

    /// Shares a run clock with other components.
    pub fn clock(mut self, clock: Clock) -> Self {
        self.options.clock = clock;
        self
    }

    /// Also writes every attempt record to an NDJSON file.
    pub fn attempt_log(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.attempt_log = Some(path.into());
        self
    }

    /// Adds a fault to the timeline (its `start` counts from when the mock starts), e.g.
    /// `.fault(Fault::latency(3.0).after(Duration::from_secs(10)))`.
    pub fn fault(mut self, fault: Fault) -> Self {
        let position = self.options.faults.len();
        let name = fault.envelope().name.map_or_else(|| Timeline::default_name(&fault, position), str::to_string);
        self.options.faults.push(NamedFault { name, fault, group: None });
        self
    }

    /// Binds and starts serving.
    pub async fn start(self) -> Result<MockUpstream, MockError> {
        let upstream = Upstream { name: self.name, listen: Some(self.listen), profile: self.profile };
        let mut pool = MockPool::start(std::slice::from_ref(&upstream), self.options).await?;
        Ok(pool.upstreams.remove(0))
    }
}
