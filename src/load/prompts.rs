//! The prompt set and each request's body.
//!
//! Prompts are generated from the run seed (`count` distinct questions of `words` words), and
//! request `id` picks one with its own RNG keyed by (seed, id): the same seed gives the same
//! prompt sequence whatever the thread scheduling. Zipf picks make a few prompts hot, so a
//! cache in the SUT has hot keys to expire together.

use rand::RngExt;
use rand_distr::{Distribution as _, Zipf};

use crate::scenario::workload::{Api, LoadTools, PromptSet, ToolChoice};
use crate::scenario::{KeyDistribution, Load, RequestIdMode};
use crate::seed::{rng_for, stream_key};
use crate::words::Words;

/// The prompts of one run, and how to build a request body.
#[derive(Debug)]
pub struct Prompts {
    texts: Vec<String>,
    zipf: Option<Zipf<f64>>,
    seed: u64,
    api: Api,
    model: String,
    stream: bool,
    max_tokens: Option<u32>,
    marker: bool,
    tools: Option<LoadTools>,
    /// Each prompt's body, built the first time it is asked (without a marker the body of a
    /// prompt never changes): a JSON value built and serialized per request was a tenth of the
    /// generator's CPU at 40k req/s.
    bodies: Vec<std::sync::OnceLock<bytes::Bytes>>,
}

impl Prompts {
    /// The prompt set of `load` for a run seeded with `seed`.
    pub fn new(load: &Load, seed: u64) -> Self {
        let PromptSet { count, distribution, exponent, words } = load.prompts;
        let texts: Vec<String> = (0..count.max(1))
            .map(|i| format!("Question {i}: {}?", Words::new(seed, mix_prompt(i)).text(words.max(1))))
            .collect();
        let bodies = texts.iter().map(|_| std::sync::OnceLock::new()).collect();
        let zipf = (distribution == KeyDistribution::Zipf)
            .then(|| Zipf::new(f64::from(count.max(1)), exponent))
            .and_then(Result::ok);
        Self {
            texts,
            zipf,
            seed,
            api: load.api,
            model: load.model.clone(),
            stream: load.stream,
            max_tokens: load.max_tokens,
            marker: matches!(load.request_id, RequestIdMode::Prompt | RequestIdMode::Both),
            tools: load.tools.clone(),
            bodies,
        }
    }

    /// Which prompt request `id` asks (0-based rank: 0 is the hottest under Zipf).
    pub fn pick(&self, id: u64) -> usize {
        let mut rng = rng_for(self.seed, stream_key("prompt"), id);
        match &self.zipf {
            Some(z) => (z.sample(&mut rng) as usize).saturating_sub(1).min(self.texts.len() - 1),
            None => rng.random_range(0..self.texts.len()),
        }
    }

    /// The prompt texts.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }

    /// The JSON body of request `id`.
    pub fn body(&self, id: u64) -> bytes::Bytes {
        let k = self.pick(id);
        if self.marker {
            return bytes::Bytes::from(self.build(k, Some(id)));
        }
        self.bodies[k].get_or_init(|| bytes::Bytes::from(self.build(k, None))).clone()
    }

    /// The JSON body asking prompt `k`, marked with request `id` when given.
    fn build(&self, k: usize, id: Option<u64>) -> Vec<u8> {
        let prompt = &self.texts[k];
        let content = match id {
            Some(id) => format!("{prompt} [chaos:r{id}]"),
            None => prompt.clone(),
        };
        let mut v = serde_json::json!({"model": self.model});
        match self.api {
            Api::Responses => v["input"] = content.into(),
            Api::Openai | Api::Anthropic => v["messages"] = serde_json::json!([{"role": "user", "content": content}]),
        }
        if self.stream {
            v["stream"] = true.into();
        }
        if let Some(n) = self.max_tokens {
            let key = if self.api == Api::Responses { "max_output_tokens" } else { "max_tokens" };
            v[key] = n.into();
        }
        if self.api == Api::Openai && self.stream {
            v["stream_options"] = serde_json::json!({"include_usage": true});
        }
        if let Some(t) = &self.tools {
            offer_tools(&mut v, self.api, t);
        }
        serde_json::to_vec(&v).unwrap_or_default()
    }
}

/// Adds `tools` and `tool_choice` to a request body, in the shape of its API.
pub(super) fn offer_tools(v: &mut serde_json::Value, api: Api, tools: &LoadTools) {
    use serde_json::json;
    let schema = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    let offered: Vec<serde_json::Value> = tools
        .names
        .iter()
        .map(|name| match api {
            Api::Openai => json!({"type": "function", "function": {"name": name, "parameters": schema}}),
            Api::Responses => json!({"type": "function", "name": name, "parameters": schema}),
            Api::Anthropic => json!({"name": name, "input_schema": schema}),
        })
        .collect();
    v["tools"] = offered.into();
    v["tool_choice"] = match (api, tools.choice) {
        (Api::Anthropic, ToolChoice::Auto) => json!({"type": "auto"}),
        (Api::Anthropic, ToolChoice::Required) => json!({"type": "any"}),
        (Api::Anthropic, ToolChoice::None) => json!({"type": "none"}),
        (_, ToolChoice::Auto) => "auto".into(),
        (_, ToolChoice::Required) => "required".into(),
        (_, ToolChoice::None) => "none".into(),
    };
}

fn mix_prompt(i: u32) -> u64 {
    0x9e37_79b9_7f4a_7c15 ^ u64::from(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{Scenario, Source};

    fn load(extra: &str) -> Load {
        let text = format!(
            "name = \"t\"\n[[upstream]]\nname = \"p\"\n[load]\n{extra}\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
        );
        Scenario::from_source(&Source::new("t.toml", text)).unwrap().load.unwrap()
    }

    #[test]
    fn the_seed_fixes_the_prompts_and_the_sequence() {
        let a = Prompts::new(&load(""), 1);
        let b = Prompts::new(&load(""), 1);
        assert_eq!(a.texts(), b.texts());
        assert_eq!((0..50).map(|i| a.pick(i)).collect::<Vec<_>>(), (0..50).map(|i| b.pick(i)).collect::<Vec<_>>());
        assert_ne!(Prompts::new(&load(""), 2).texts(), a.texts());
        assert_eq!(a.texts().len(), 100);
    }

    #[test]
    fn zipf_makes_the_first_prompts_hot() {
        let p = Prompts::new(&load("prompts = { count = 100, distribution = \"zipf\", exponent = 1.2 }"), 1);
        let hot = (0..10_000).filter(|&i| p.pick(i) == 0).count();
        let cold = (0..10_000).filter(|&i| p.pick(i) == 99).count();
        // P(rank 1) = 1 / H(100, 1.2) ≈ 1 / 3.6 ≈ 0.28; P(rank 100) ≈ 0.28 / 100^1.2 ≈ 0.0011.
        assert!((2500..3100).contains(&hot), "{hot}");
        assert!(cold < 40, "{cold}");
    }

    #[test]
    fn the_marker_carries_the_id_when_asked() {
        let both = Prompts::new(&load("request_id = \"both\""), 1);
        assert!(String::from_utf8(both.body(7).to_vec()).unwrap().contains("[chaos:r7]"));
        let header_only = Prompts::new(&load(""), 1);
        assert!(!String::from_utf8(header_only.body(7).to_vec()).unwrap().contains("[chaos:"), "header is the default");
        let streamed = Prompts::new(&load("stream = true\napi = \"anthropic\""), 1);
        let v: serde_json::Value = serde_json::from_slice(&streamed.body(1)).unwrap();
        assert_eq!((v["stream"].as_bool(), v["max_tokens"].as_u64()), (Some(true), Some(256)));
    }
}
