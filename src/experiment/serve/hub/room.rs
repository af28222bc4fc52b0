//! What the room does to the live state: notes stamped on the run clock and appended to
//! `observations.ndjson` (bounded in count, size and characters), and the facilitator's faults
//! while they last. Whoever can reach the page can call these; nothing here runs a program.

use crate::clock::Clock;
use crate::record::{Observation, ObservationKind};
use crate::run_folder::{RunFile, RunFolder};
use crate::scenario::NamedFault;

use super::views::{MockControl, ObservationView};
use super::{Adhoc, Live, MAX_NOTE_CHARS, MAX_NOTES, MAX_NOTES_BYTES, Refused, fault_views, frame, secs};

impl Live {
    /// Stamps `text` on the run clock, appends it to `observations.ndjson` and shows it.
    pub fn observe(&self, kind: ObservationKind, text: &str, author: Option<&str>) -> Result<ObservationView, Refused> {
        // Whoever can reach the page can write here: control and bidi characters are made
        // visible as the note comes in, so no page, log or report shows them raw.
        let text = crate::markup::visible_lines(text.trim());
        let text = text.as_str();
        if text.is_empty() {
            return Err(Refused::Bad("the observation is empty".into()));
        }
        if text.chars().count() > MAX_NOTE_CHARS {
            return Err(Refused::Bad(format!("the observation is longer than {MAX_NOTE_CHARS} characters")));
        }
        let author = author
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(|a| crate::markup::visible(&a.chars().take(80).collect::<String>()));
        let mut s = self.lock();
        let (Some(clock), Some(folder)) = (s.clock, s.folder.clone()) else {
            return Err(Refused::NotNow("no run is going: observations are stamped on a run's clock".into()));
        };
        if s.closed {
            return Err(Refused::NotNow(
                "the run has ended and its report is written: observations are taken while it runs".into(),
            ));
        }
        let (count, bytes) = s.notes_taken;
        if kind == ObservationKind::Note && (count >= MAX_NOTES || bytes + text.len() > MAX_NOTES_BYTES) {
            return Err(Refused::Full(format!(
                "the observation log is full ({count} notes, {} KiB; at most {MAX_NOTES} notes and {} KiB a run): this one is not recorded",
                bytes / 1024,
                MAX_NOTES_BYTES / 1024
            )));
        }
        let t_us = clock.now_us();
        let line = Observation {
            t_us,
            at: humantime::format_rfc3339_millis(clock.wall_at(t_us)).to_string(),
            kind,
            text: text.to_string(),
            author: author.clone(),
        };
        if s.notes.is_none() {
            let appender = RunFolder::open(folder)
                .appender(RunFile::Observations)
                .map_err(|e| Refused::NotNow(format!("cannot write {}: {e}", RunFile::Observations.name())))?;
            s.notes = Some(appender);
        }
        let written = s.notes.as_mut().map(|n| n.append(&line).and_then(|()| n.flush()));
        if let Some(Err(e)) = written {
            return Err(Refused::NotNow(format!("cannot write {}: {e}", RunFile::Observations.name())));
        }
        let view = ObservationView {
            // Before the load starts a note is stamped relative to where it will start: now.
            t_s: secs(t_us, s.t0_us.unwrap_or(t_us)),
            at: line.at,
            kind: match kind {
                ObservationKind::Note => "note",
                ObservationKind::Action => "action",
            },
            text: line.text,
            author,
        };
        if kind == ObservationKind::Note {
            s.notes_taken = (count + 1, bytes + text.len());
        }
        s.shown.edit().observations.push(view.clone());
        drop(s);
        self.metrics.observation(view.kind);
        self.send(frame("observation", &view));
        Ok(view)
    }

    /// No more observations: the analysis reads them now.
    pub fn close_notes(&self) {
        let mut s = self.lock();
        s.closed = true;
        if let Some(n) = &mut s.notes
            && let Err(e) = n.flush()
        {
            tracing::warn!("{e}");
        }
    }

    /// Where a facilitator's fault goes: the mocks' control API, and the run's clock.
    pub fn control(&self) -> Result<(MockControl, Clock, u64), Refused> {
        let s = self.lock();
        if s.closed || s.shown.get().end.is_some() {
            return Err(Refused::NotNow("the run has ended".into()));
        }
        let (Some(t0), Some(clock)) = (s.t0_us, s.clock) else {
            return Err(Refused::NotNow("the load has not started yet".into()));
        };
        let Some(admin) = s.mock_admin.clone() else {
            return Err(Refused::NotNow(
                "this run's upstreams are a shared mock: change its faults with `chaos fault --mock`".into(),
            ));
        };
        Ok((admin, clock, t0))
    }

    /// A name for the next facilitator fault of `kind`.
    pub fn next_adhoc_name(&self, kind: &str) -> String {
        let mut s = self.lock();
        s.adhoc_count += 1;
        format!("adhoc-{}-{kind}", s.adhoc_count)
    }

    /// A facilitator's fault was placed: `fault`'s start counts from the load start.
    pub fn adhoc_started(&self, fault: NamedFault, start_us: u64) {
        let mut s = self.lock();
        s.adhoc.push(Adhoc { fault: fault.clone(), start_us });
        if let Some(r) = &mut s.shown.edit().run {
            r.faults.extend(fault_views(&[fault], true));
        }
        let bytes = frame("run", &s.shown.get().run);
        drop(s);
        self.send(bytes);
    }

    /// A facilitator's fault `name` was removed at `now_us`: its window ends there. Returns
    /// whether it was one of theirs.
    pub fn adhoc_stopped(&self, name: &str, now_us: u64) -> bool {
        let mut s = self.lock();
        let Some(t0) = s.t0_us else { return false };
        let Some(a) = s.adhoc.iter_mut().find(|a| a.fault.name == name) else { return false };
        let ran = std::time::Duration::from_micros(now_us.saturating_sub(a.start_us));
        let env = a.fault.fault.envelope_mut();
        let shorter = env.duration.is_none_or(|d| d.as_std() > ran);
        if shorter {
            *env.duration = Some(ran.into());
        }
        let end_s = secs(a.start_us, t0) + ran.as_secs_f64();
        if let Some(f) =
            s.shown.edit().run.as_mut().and_then(|r| r.faults.iter_mut().find(|f| f.adhoc && f.name == name))
            && shorter
        {
            f.end_s = Some(end_s);
        }
        let bytes = frame("run", &s.shown.get().run);
        drop(s);
        self.send(bytes);
        true
    }

    /// The facilitator's faults, their `start` from the load start and their `duration` as
    /// long as they ran: for the run's record (`resolved.json`, the summary's fault windows).
    pub fn adhoc_faults(&self) -> Vec<NamedFault> {
        self.lock().adhoc.iter().map(|a| a.fault.clone()).collect()
    }
}
