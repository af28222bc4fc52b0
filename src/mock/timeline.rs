//! The live fault timeline of a mock process: read on every request, replaced whole when the
//! control API changes it (readers never wait on writers for long), with a version counter
//! that wakes the listeners (outages) and the expiry scheduler.

use std::sync::{Arc, RwLock};

use tokio::sync::watch;

use crate::faults::{Entry, Fault, NetworkFault, Problems, Timeline};
use crate::scenario::NamedFault;

/// Why a change to the timeline was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimelineError {
    /// A fault's values are invalid.
    #[error("invalid fault `{name}`: {}", describe(problems))]
    Invalid {
        /// The fault's name.
        name: String,
        /// What is wrong (key, found, expected).
        problems: Problems,
    },
    /// The name is taken.
    #[error("a fault named `{0}` already exists")]
    Duplicate(String),
    /// No fault has this name.
    #[error("no fault named `{0}`")]
    Unknown(String),
    /// `match.upstream` names no upstream of this mock.
    #[error("fault `{fault}` matches upstream `{upstream}`, which this mock does not serve")]
    UnknownUpstream {
        /// The fault's name.
        fault: String,
        /// The upstream it names.
        upstream: String,
    },
}

fn describe(p: &Problems) -> String {
    p.to_string()
}

/// The timeline shared by every upstream of one mock process.
#[derive(Debug)]
pub struct LiveTimeline {
    current: RwLock<Arc<Timeline>>,
    version: watch::Sender<u64>,
    upstreams: Vec<String>,
}

impl LiveTimeline {
    /// An empty timeline for a mock serving `upstreams`.
    pub fn new(upstreams: Vec<String>) -> Self {
        Self { current: RwLock::new(Arc::new(Timeline::default())), version: watch::Sender::new(0), upstreams }
    }

    /// The timeline in force now.
    pub fn snapshot(&self) -> Arc<Timeline> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Notified whenever the timeline changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// Appends faults read from files (the run's scenario, `--faults`) whose `start` counts
    /// from `origin_us`; all or nothing.
    pub fn add(&self, faults: Vec<NamedFault>, origin_us: u64) -> Result<Vec<Arc<Entry>>, TimelineError> {
        let named = faults.into_iter().map(|f| (f.name, f.fault)).collect();
        self.place(named, |f| f, |name, fault| Entry::new(name, fault, origin_us))
    }

    /// Appends faults that came over the network (the control API), named; all or nothing.
    /// Their flush hooks never run a command ([`NetworkFault`] cannot carry one).
    pub fn add_from_network(
        &self,
        faults: Vec<(String, NetworkFault)>,
        origin_us: u64,
    ) -> Result<Vec<Arc<Entry>>, TimelineError> {
        self.place(faults, NetworkFault::fault, |name, fault| Entry::from_network(name, fault, origin_us))
    }

    fn place<T>(
        &self,
        faults: Vec<(String, T)>,
        fault_of: impl Fn(&T) -> &Fault,
        entry: impl Fn(String, T) -> Entry,
    ) -> Result<Vec<Arc<Entry>>, TimelineError> {
        for (name, f) in &faults {
            self.check(name, fault_of(f))?;
        }
        let mut added = Vec::with_capacity(faults.len());
        self.change(|entries| {
            for (name, _) in &faults {
                if entries.iter().any(|e| *e.name == **name) || faults.iter().filter(|(g, _)| g == name).count() > 1 {
                    return Err(TimelineError::Duplicate(name.clone()));
                }
            }
            for (name, f) in faults {
                let placed = Arc::new(entry(name, f));
                added.push(placed.clone());
                entries.push(placed);
            }
            Ok(())
        })?;
        Ok(added)
    }

    /// Removes the fault called `name`.
    pub fn remove(&self, name: &str) -> Result<Arc<Entry>, TimelineError> {
        let mut removed = None;
        self.change(|entries| {
            let i = entries.iter().position(|e| &*e.name == name).ok_or_else(|| TimelineError::Unknown(name.into()))?;
            removed = Some(entries.remove(i));
            Ok(())
        })?;
        removed.ok_or_else(|| TimelineError::Unknown(name.into()))
    }

    /// Removes every fault.
    pub fn clear(&self) {
        let _ = self.change(|entries| {
            entries.clear();
            Ok(())
        });
    }

    /// The name the next fault without one would get.
    pub fn next_default_name(&self, fault: &Fault) -> String {
        let taken = self.snapshot();
        (taken.entries().len()..)
            .map(|i| Timeline::default_name(fault, i))
            .find(|n| !taken.entries().iter().any(|e| *e.name == **n))
            .unwrap_or_else(|| fault.kind().to_string())
    }

    fn check(&self, name: &str, fault: &Fault) -> Result<(), TimelineError> {
        let problems = fault.problems();
        if !problems.is_empty() {
            return Err(TimelineError::Invalid { name: name.into(), problems });
        }
        if let Some(u) = fault.envelope().matches.upstream.as_deref().filter(|u| !self.upstreams.iter().any(|k| k == u))
        {
            return Err(TimelineError::UnknownUpstream { fault: name.into(), upstream: u.into() });
        }
        Ok(())
    }

    fn change(
        &self,
        edit: impl FnOnce(&mut Vec<Arc<Entry>>) -> Result<(), TimelineError>,
    ) -> Result<(), TimelineError> {
        {
            let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
            let mut entries = current.entries().to_vec();
            edit(&mut entries)?;
            *current = Arc::new(Timeline::new(entries));
        }
        self.version.send_modify(|v| *v += 1);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::StatusFault;

    fn status(name: &str) -> NamedFault {
        NamedFault {
            name: name.into(),
            fault: Fault::Status(StatusFault { code: 503, ..Default::default() }),
            group: None,
        }
    }

    #[test]
    fn adds_removes_and_refuses_duplicates_atomically() {
        let t = LiveTimeline::new(vec!["primary".into()]);
        t.add(vec![status("a")], 0).unwrap();
        assert!(matches!(t.add(vec![status("b"), status("a")], 0), Err(TimelineError::Duplicate(n)) if n == "a"));
        assert_eq!(t.snapshot().entries().len(), 1, "nothing of a refused batch is added");
        t.remove("a").unwrap();
        assert!(matches!(t.remove("a"), Err(TimelineError::Unknown(_))));
    }

    #[test]
    fn refuses_invalid_faults_and_unknown_upstreams() {
        let t = LiveTimeline::new(vec!["primary".into()]);
        let bad = NamedFault {
            name: "x".into(),
            fault: Fault::Status(StatusFault { code: 200, ..Default::default() }),
            group: None,
        };
        assert!(matches!(t.add(vec![bad], 0), Err(TimelineError::Invalid { .. })));
        let mut elsewhere = status("y");
        if let Fault::Status(s) = &mut elsewhere.fault {
            s.matches.upstream = Some("nowhere".into());
        }
        assert!(matches!(t.add(vec![elsewhere], 0), Err(TimelineError::UnknownUpstream { .. })));
    }

    #[test]
    fn every_change_bumps_the_version() {
        let t = LiveTimeline::new(vec![]);
        let rx = t.subscribe();
        t.add(vec![status("a")], 0).unwrap();
        t.clear();
        assert_eq!(*rx.borrow(), 2);
    }
}
