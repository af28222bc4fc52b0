//! `POST /v1/embeddings`: deterministic unit vectors derived from the seed and each input, so
//! identical texts embed identically (semantic caches behave) and different texts differ.

use base64::Engine as _;
use bytes::Bytes;
use rand::RngExt;
use serde_json::json;

use super::request::EmbeddingsRequest;
use crate::seed::{rng_for, stream_key};

/// Dimensions when the request does not ask (text-embedding-3-small's).
pub const DEFAULT_DIMENSIONS: u32 = 1536;

/// The unit vector for `text`.
pub fn vector(seed: u64, text: &str, dims: u32) -> Vec<f32> {
    let mut rng = rng_for(seed, stream_key("embeddings"), stream_key(text));
    let mut v: Vec<f32> = (0..dims).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(f32::MIN_POSITIVE);
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// The response body.
pub fn response(seed: u64, req: &EmbeddingsRequest) -> Bytes {
    let dims = req.dimensions.unwrap_or(DEFAULT_DIMENSIONS);
    let data: Vec<_> = req
        .inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            let v = vector(seed, text, dims);
            let embedding = if req.base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let tokens: usize = req.inputs.iter().map(|t| t.chars().count().div_ceil(4).max(1)).sum();
    let body = json!({"object": "list", "data": data, "model": req.model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}});
    Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_deterministic_unit_length_and_distinct() {
        let a = vector(1, "hello", 64);
        assert_eq!(a, vector(1, "hello", 64));
        assert_ne!(a, vector(1, "hullo", 64));
        let norm: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4);
    }
}
