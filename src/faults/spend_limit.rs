//! `spend_limit`: the account's spend limit is exhausted. The provider answers 429 with its
//! quota error (OpenAI `insufficient_quota`; Anthropic a `rate_limit_error` about the spend
//! limit) and `x-should-retry: false`: retrying cannot help until someone raises the limit,
//! and the official SDKs do not retry it. A gateway that retries it anyway, or fails over
//! to the same account, turns one refusal into a storm.

use super::{Action, Problems, fault_spec};

fault_spec! {
    /// Answer 429: the spend limit is exhausted (not to be retried).
    SpendLimitFault {}
}

impl SpendLimitFault {
    pub(super) fn problems(&self, _out: &mut Problems) {}

    pub(super) fn action(&self) -> Action {
        Action::Status { code: 429, retry_after: None, should_retry: Some(false), spend_limit: true }
    }
}
