//! The time check every typed log reader applies: a record whose instants or spans lie past
//! its run (or past any run) is refused where it is read, so no statistic ever sizes a series
//! by it. A record with a `u64::MAX` timestamp once aborted `report`, `whatif` and `merge`
//! with a 147 TB allocation.
//!
//! Layer 1, like its parent: it knows the record types (the ground), nothing above.

use crate::record::Stamped;

use super::MAX_RECORD_US;

/// `Ok` when every time `record` carries is within `horizon_us` (a time that may lie past the
/// run, such as a cache expiry, only within [`MAX_RECORD_US`]); else what is wrong.
pub(super) fn check<T: Stamped>(record: &T, horizon_us: u64) -> Result<(), String> {
    for s in record.stamps() {
        if s.us > MAX_RECORD_US {
            return Err(format!(
                "{} = {}: past any run (a record's times are at most 10 years, {MAX_RECORD_US} µs); not a record chaos writes",
                s.field, s.raw
            ));
        }
        if s.within_run && s.us > horizon_us {
            return Err(format!(
                "{} = {}: past the run's end ({horizon_us} µs on the run clock, margin included); not a record of this run",
                s.field, s.raw
            ));
        }
    }
    Ok(())
}
