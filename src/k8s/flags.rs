//! The values `chaos k8s render` copies into manifests, checked before anything is printed:
//! a namespace that is not an RFC 1123 label or a CPU that is not a Kubernetes quantity would
//! otherwise render manifests the API server refuses at `kubectl apply` (or, worse, that YAML
//! reads differently from what was meant). Each refusal names the flag and what is expected.
//!
//! Written by hand: the grammars are a few lines each, and the Kubernetes crates that know them
//! (`k8s-openapi`) carry them as unchecked strings.

use super::{K8sError, RenderArgs};

/// Every flag of `args` that becomes a Kubernetes name or quantity, checked.
pub(super) fn check(args: &RenderArgs) -> Result<(), K8sError> {
    let refuse = |flag: &str, value: &str, expected: &str| {
        Err(K8sError::Usage(format!("{flag} {value:?}: expected {expected}")))
    };
    if let Some(ns) = args.namespace.as_deref().filter(|ns| !dns_label(ns)) {
        return refuse(
            "--namespace",
            ns,
            "an RFC 1123 label: 1 to 63 lowercase letters, digits and `-`, starting and ending with a letter or digit",
        );
    }
    if let Some(class) = args.storage_class.as_deref().filter(|c| !dns_subdomain(c)) {
        return refuse(
            "--storage-class",
            class,
            "an RFC 1123 subdomain: at most 253 characters, dot-separated labels of lowercase letters, digits and `-`",
        );
    }
    for (flag, value, example) in [
        ("--cpu", &args.cpu, "500m, 2 or 1.5"),
        ("--memory", &args.memory, "512Mi, 2Gi or 1G"),
        ("--storage", &args.storage, "5Gi or 500Mi"),
    ] {
        if !quantity(value) {
            return refuse(flag, value, &format!("a Kubernetes quantity ≥ 0 such as {example}"));
        }
    }
    Ok(())
}

/// An RFC 1123 label: 1–63 of `a-z`, `0-9`, `-`, beginning and ending with a letter or digit.
pub(super) fn dns_label(s: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    (1..=63).contains(&s.len())
        && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && edge(s.chars().next())
        && edge(s.chars().last())
}

/// An RFC 1123 subdomain: at most 253 characters of dot-separated labels.
fn dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(dns_label)
}

/// A non-negative Kubernetes quantity: a decimal number (`2`, `1.5`, `.5`) and an optional
/// suffix, binary (`Ki` … `Ei`), decimal (`n`, `u`, `m`, `k`, `M` … `E`) or an exponent
/// (`e3`, `E-2`).
pub(super) fn quantity(s: &str) -> bool {
    let s = s.strip_prefix('+').unwrap_or(s);
    let digits = |t: &str| t.len() - t.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let whole = digits(s);
    let (fraction, rest) = match s[whole..].strip_prefix('.') {
        Some(after) => (digits(after), &after[digits(after)..]),
        None => (0, &s[whole..]),
    };
    if whole + fraction == 0 {
        return false;
    }
    match rest {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T" | "P" | "E" => true,
        exp => exp
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .is_some_and(|e| !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())),
    }
}
