//! Unit tests of the parent module.

use super::*;
use crate::scenario::{Scenario, Source};

fn load(headers: &str) -> Load {
    let text = format!(
        "name = \"t\"\n[[upstream]]\nname = \"p\"\n[load]\nheaders = {{ {headers} }}\n[[load.phase]]\nname = \"a\"\nduration = \"1s\"\nusers = 1\n"
    );
    Scenario::from_source(&Source::new("t.toml", text)).unwrap().load.unwrap()
}

#[test]
fn header_values_take_secrets_from_the_environment() {
    // PATH is set in every environment tests run in.
    let path = std::env::var("PATH").unwrap();
    let h = expand_headers(&load(r#"authorization = "Bearer ${PATH}!""#)).unwrap();
    assert_eq!(h[0].1.to_str().unwrap(), format!("Bearer {path}!"));
    let err = expand_headers(&load(r#"x-key = "${CHAOS_SURELY_UNSET_VARIABLE}""#)).unwrap_err();
    assert!(err.to_string().contains("${CHAOS_SURELY_UNSET_VARIABLE} is not set"), "{err}");
}

#[test]
fn open_stages_get_enough_users_for_their_rate() {
    assert_eq!(open_users(10.0, Duration::from_secs(60)), 300);
    assert_eq!(open_users(0.5, Duration::from_secs(5)), 16);
    assert_eq!(open_users(1000.0, Duration::from_secs(60)), 4096);
}
