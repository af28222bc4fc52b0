//! Response ids (`chatcmpl-…`, `msg_…`, `req_…`) derived from (seed, upstream, arrival index),
//! so reruns produce the same ids; formatted on the stack, without allocating.

use std::time::Instant;

use hyper::header::HeaderValue;

use super::request::Api;
use super::state::UpstreamState;
use crate::seed::mix;

/// Response ids derived from (seed, upstream, arrival index), so reruns produce the same ids.
pub(crate) struct ResponseIds {
    n: u64,
    pub(crate) created: u64,
}

impl ResponseIds {
    pub(crate) fn new(state: &UpstreamState, index: u64, at: Instant) -> Self {
        Self { n: mix(state.shared.seed, state.stream_key, index), created: state.shared.clock.unix_secs_at(at) }
    }

    /// `chatcmpl-…` or `msg_…`.
    pub(crate) fn id(&self, api: Api) -> String {
        self.id_text(api).to_string()
    }

    /// The id without allocating: `chatcmpl-`, `msg_` or `resp_`, then 16 hex digits.
    pub(crate) fn id_text(&self, api: Api) -> IdText {
        let mut text = IdText { bytes: *b"chatcmpl-0000000000000000", start: 0 };
        if api == Api::Messages {
            text.start = 5;
            text.bytes[5..9].copy_from_slice(b"msg_");
        } else if api == Api::Responses {
            text.start = 4;
            text.bytes[4..9].copy_from_slice(b"resp_");
        }
        text.bytes[9..].copy_from_slice(&hex16(self.n));
        text
    }

    /// The `x-request-id` / `request-id` header value `req_…`.
    pub(crate) fn request_header(&self) -> Option<HeaderValue> {
        let mut text = *b"req_0000000000000000";
        text[4..].copy_from_slice(&hex16(self.n));
        HeaderValue::from_bytes(&text).ok()
    }
}

fn hex16(n: u64) -> [u8; 16] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    std::array::from_fn(|i| DIGITS[((n >> ((15 - i) * 4)) & 0xf) as usize])
}

/// A response id on the stack.
pub(crate) struct IdText {
    bytes: [u8; 25],
    start: usize,
}

impl std::ops::Deref for IdText {
    type Target = str;

    fn deref(&self) -> &str {
        // Only ASCII is ever written into `bytes`.
        std::str::from_utf8(&self.bytes[self.start..]).unwrap_or_default()
    }
}
