//! The integration suite as one test binary, so it links once (goose, hyper and plotters are
//! linked into one executable instead of one per file). Each file is a module named for what it
//! exercises; `common` holds the shared mock and HTTP helpers.

mod common;

mod architecture;
mod capacity;
mod cli;
mod control_api;
mod disk_full;
mod extreme_values;
mod faults_hang_reset;
mod faults_latency_status;
mod faults_malformed;
mod faults_outage_ttl;
mod gateway;
mod hostile_output;
mod live;
mod load;
mod merge_inputs;
mod mock_anthropic;
mod mock_capacity;
mod mock_http;
mod mock_openai_client;
mod mock_pool;
mod mock_wire;
mod planted_files;
mod provider_model;
mod replicates;
mod report_example;
mod run;
mod run_cli;
mod scenario_errors;
mod scenario_format;
mod scenarios;
mod schema;
mod sessions;
mod urls;
mod variants;
mod whatif;
mod wire_load;
mod workers;
