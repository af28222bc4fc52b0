//! `outage`: the upstream is gone for the window — its listener is closed (new connections are
//! refused) and open connections are dropped; afterwards it listens on the same port again.
//! It acts on the listener, not on requests, so `probability` and `ramp` do not apply.

use super::{Problems, fault_spec};

fault_spec! {
    /// Refuse connections for the window.
    OutageFault {}
}

impl OutageFault {
    pub(super) fn problems(&self, out: &mut Problems) {
        if self.probability.is_some() {
            out.push("probability", "a probability", "no probability: an outage takes the whole listener down");
        }
        if self.ramp.is_some() {
            out.push("ramp", "a ramp", "no ramp: a listener is either up or down");
        }
    }
}
