//! Mock upstreams from profile files: a profile's sections over the defaults, pools of
//! profiles, and `[[upstream]]` tables that name a `base`, a profile file and inline keys.

use std::collections::HashSet;
use std::path::Path;

use super::{Profile, ProfileFile, ScenarioError, Source, Upstream, UpstreamSpec};

/// Reads a profile file and returns the upstreams it describes: one for a plain profile (named
/// by its `name`, or the file stem), or every member of a pool.
pub fn load_profile(path: &Path) -> Result<Vec<Upstream>, ScenarioError> {
    profile_from_source(&Source::read(path)?)
}

/// Like [`load_profile`], from text.
pub fn profile_from_source(src: &Source) -> Result<Vec<Upstream>, ScenarioError> {
    let file: ProfileFile = src.parse()?;
    let mut errors = Vec::new();
    let base = base_profile(src, &file, &mut errors);
    let upstreams = if file.upstream.is_empty() {
        vec![Upstream { name: base.name.clone(), listen: None, profile: base }]
    } else {
        resolve_members(src, &base, &file.upstream, &mut errors)
    };
    match ScenarioError::from_list(errors) {
        Some(e) => Err(e),
        None => Ok(upstreams),
    }
}

/// Defaults with one profile file's own sections applied.
pub(super) fn base_profile(src: &Source, file: &ProfileFile, errors: &mut Vec<ScenarioError>) -> Profile {
    let layer = file.layer();
    errors.extend(layer.problems().located(src, ""));
    let mut profile = Profile::default();
    profile.apply(layer);
    profile.name = file
        .name
        .clone()
        .unwrap_or_else(|| src.path.file_stem().map_or_else(|| "mock".into(), |s| s.to_string_lossy().into_owned()));
    profile
}

/// Resolves `[[upstream]]` tables: `base`, then the referenced profile file, then inline keys.
pub(super) fn resolve_members(
    src: &Source,
    base: &Profile,
    specs: &[UpstreamSpec],
    errors: &mut Vec<ScenarioError>,
) -> Vec<Upstream> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let key = |k: &str| format!("upstream[{i}].{k}");
        if let Some(problem) = crate::markup::name_problem(&spec.name) {
            errors.push(src.invalid(&key("name"), problem, crate::markup::NAME_EXPECTED));
        } else if !valid_name(&spec.name) {
            errors.push(src.invalid(&key("name"), format!("{:?}", spec.name), "a name of letters, digits, `-` or `_`"));
        } else if !seen.insert(spec.name.as_str()) {
            errors.push(src.invalid(
                &key("name"),
                format!("{:?} again", spec.name),
                "a name not used by another upstream",
            ));
        }
        let mut profile = base.clone();
        if let Some(rel) = &spec.profile {
            match referenced_profile(src, &key("profile"), rel) {
                Ok(p) => profile = p,
                Err(Referenced::Unreadable(e)) => {
                    let resolved = src.dir().join(rel);
                    let found = format!("{rel:?} ({}: {e})", resolved.display());
                    errors.push(src.invalid(&key("profile"), found, "a readable profile file, relative to this file"))
                }
                Err(Referenced::Refused(e)) => errors.push(e),
                Err(Referenced::Pool) => errors.push(src.invalid(
                    &key("profile"),
                    format!("{rel:?}, a pool"),
                    "a single profile, not a pool",
                )),
                Err(Referenced::Invalid(e)) => errors.push(e),
            }
        }
        errors.extend(spec.layer().problems().located(src, &format!("upstream[{i}]")));
        profile.apply(spec.layer());
        profile.name.clone_from(&spec.name);
        out.push(Upstream { name: spec.name.clone(), listen: spec.listen, profile });
    }
    out
}

enum Referenced {
    Unreadable(std::io::Error),
    /// Outside the trees a scenario may read from, or no regular file: not read.
    Refused(ScenarioError),
    Pool,
    Invalid(ScenarioError),
}

fn referenced_profile(src: &Source, key: &str, rel: &str) -> Result<Profile, Referenced> {
    let path = src.referenced(key, rel, "profile file").map_err(Referenced::Refused)?;
    let inner = match Source::read(&path) {
        Ok(s) => s,
        Err(ScenarioError::Read { source, .. }) => return Err(Referenced::Unreadable(source)),
        Err(e) => return Err(Referenced::Invalid(e)),
    };
    let file: ProfileFile = inner.parse().map_err(Referenced::Invalid)?;
    if !file.upstream.is_empty() {
        return Err(Referenced::Pool);
    }
    let mut errors = Vec::new();
    let profile = base_profile(&inner, &file, &mut errors);
    match ScenarioError::from_list(errors) {
        Some(e) => Err(Referenced::Invalid(e)),
        None => Ok(profile),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}
