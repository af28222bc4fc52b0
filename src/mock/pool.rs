//! Several named upstreams served from one process (a pool of providers), sharing a clock,
//! the attempt and event logs, the fault timeline and a metrics registry, with an optional
//! control API beside them.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{
    Attempt, Event, MockError, MockOptions, MockUpstream, Shared, TimelineError, UpstreamState, admin, expiry, server,
};
use crate::faults::{Entry, Timeline};
use crate::scenario::{NamedFault, Upstream};

/// Several named upstreams served from one process, sharing a clock, an attempt log and a
/// metrics registry (each has its own port and profile).
#[derive(Debug)]
pub struct MockPool {
    shared: Arc<Shared>,
    pub(super) upstreams: Vec<MockUpstream>,
    admin: Option<(SocketAddr, watch::Sender<bool>)>,
    admin_token: Option<String>,
}

impl MockPool {
    /// Binds every upstream (in order) and starts serving.
    pub async fn start(upstreams: &[Upstream], options: MockOptions) -> Result<Self, MockError> {
        let names = upstreams.iter().map(|u| u.name.clone()).collect();
        let shared = Arc::new(Shared::new(&options, names)?);
        shared.timeline.add(options.faults.clone(), 0)?;
        tokio::spawn(expiry::run(Arc::downgrade(&shared)));
        let mut started: Vec<MockUpstream> = Vec::with_capacity(upstreams.len());
        for u in upstreams {
            if started.iter().any(|s| s.name() == u.name) {
                return Err(MockError::DuplicateName(u.name.clone()));
            }
            let addr = u.listen.unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
            let listener =
                crate::net::bind(addr).map_err(|source| MockError::Bind { name: u.name.clone(), addr, source })?;
            let bound =
                listener.local_addr().map_err(|source| MockError::Bind { name: u.name.clone(), addr, source })?;
            let state = UpstreamState::new(&u.name, Some(bound), u.profile.clone(), shared.clone());
            let (stop, stop_rx) = watch::channel(false);
            let task = tokio::spawn(server::serve(listener, bound, state.clone(), stop_rx, options.grace));
            started.push(MockUpstream { addr: bound, state, stop, task: Mutex::new(Some(task)) });
        }
        let admin = match options.admin {
            Some(addr) => Some(start_admin(addr, &options, &shared).await?),
            None => None,
        };
        let admin_token = admin.as_ref().and(options.admin_token);
        Ok(Self { shared, upstreams: started, admin, admin_token })
    }

    /// The upstreams, in the order given.
    pub fn upstreams(&self) -> &[MockUpstream] {
        &self.upstreams
    }

    /// The upstream called `name`.
    pub fn get(&self, name: &str) -> Option<&MockUpstream> {
        self.upstreams.iter().find(|u| u.name() == name)
    }

    /// Every attempt record still in memory, all upstreams, in arrival order of recording.
    pub fn attempts(&self) -> Vec<Attempt> {
        self.shared.attempts.snapshot().iter().map(|a| (**a).clone()).collect()
    }

    /// Prometheus text for every upstream.
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.encode()
    }

    /// The fault timeline in force.
    pub fn faults(&self) -> Arc<Timeline> {
        self.shared.timeline.snapshot()
    }

    /// Adds faults whose `start` counts from now.
    pub fn add_faults(&self, faults: Vec<NamedFault>) -> Result<Vec<Arc<Entry>>, TimelineError> {
        self.shared.timeline.add(faults, self.shared.clock.now_us())
    }

    /// Adds faults whose `start` counts from `origin_us` on the run clock (a run's load start).
    pub fn add_faults_at(&self, faults: Vec<NamedFault>, origin_us: u64) -> Result<Vec<Arc<Entry>>, TimelineError> {
        self.shared.timeline.add(faults, origin_us)
    }

    /// Every attempt record from now on, every upstream, as it is recorded (the live page
    /// joins them to the client's requests). Drain it often: it is unbounded.
    pub fn tap_attempts(&self) -> std::sync::mpsc::Receiver<Arc<Attempt>> {
        self.shared.attempts.tap()
    }

    /// Attempts recorded so far, every upstream (not bounded by the in-memory ring).
    pub fn attempts_recorded(&self) -> u64 {
        self.shared.attempts.recorded()
    }

    /// Removes the fault called `name`.
    pub fn remove_fault(&self, name: &str) -> Result<(), TimelineError> {
        self.shared.timeline.remove(name).map(|_| ())
    }

    /// The control API's origin, when it is served.
    pub fn admin_uri(&self) -> Option<String> {
        self.admin.as_ref().map(|(addr, _)| format!("http://{addr}"))
    }

    /// The bearer token the control API requires, when it is served with one.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// Fault events so far (expiries, flushes, outages), oldest first.
    pub fn events(&self) -> Vec<Event> {
        self.shared.events.snapshot()
    }

    /// Stops every upstream, then flushes and closes the attempt log file.
    pub async fn shutdown(self) -> Result<(), MockError> {
        if let Some((_, stop)) = &self.admin {
            let _ = stop.send(true);
        }
        for u in &self.upstreams {
            let _ = u.stop.send(true);
        }
        for u in &self.upstreams {
            u.shutdown().await;
        }
        drop(self.upstreams);
        let path = self.shared.attempts.path().map_or_else(PathBuf::new, std::path::Path::to_path_buf);
        self.shared.attempts.close().map_err(|source| MockError::AttemptLog { path, source })
    }

    /// Why the attempt or event log stopped being written (a full disk), naming the file.
    pub fn log_failure(&self) -> Option<String> {
        self.shared.attempts.failure().or_else(|| self.shared.events.failure())
    }
}

async fn start_admin(
    addr: SocketAddr,
    options: &MockOptions,
    shared: &Arc<Shared>,
) -> Result<(SocketAddr, watch::Sender<bool>), MockError> {
    let token = options.admin_token.clone();
    admin::check_exposure(addr, token.as_deref()).map_err(MockError::AdminExposed)?;
    let listener = crate::net::bind(addr).map_err(|source| MockError::AdminBind { addr, source })?;
    let bound = listener.local_addr().map_err(|source| MockError::AdminBind { addr, source })?;
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(admin::serve(listener, bound, shared.clone(), token, options.admin_limits, stop_rx));
    Ok((bound, stop))
}
