//! `chaos k8s render`: its flags, parsed into [`crate::k8s::RenderArgs`]; the manifests are
//! rendered by [`crate::k8s`] and printed here.

use std::path::PathBuf;
use std::time::SystemTime;

use super::CliError;
use crate::scenario::Duration;

/// Arguments of `chaos k8s`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: K8sCommand,
}

#[derive(Debug, clap::Subcommand)]
enum K8sCommand {
    /// Print the manifests that run a scenario from N worker pods (kubectl apply -f -).
    Render(RenderFlags),
}

/// Flags of `chaos k8s render`.
#[derive(Debug, clap::Args)]
pub struct RenderFlags {
    /// The scenario file.
    pub scenario: PathBuf,
    /// Worker pods (shards of the load).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub workers: u32,
    /// The container image (built from the repository's Dockerfile and pushed where the
    /// cluster pulls from).
    #[arg(long, default_value = concat!("chaos:", env!("CARGO_PKG_VERSION")))]
    pub image: String,
    /// The load starts this long after rendering (every pod must be running by then).
    #[arg(long, default_value = "60s")]
    pub start_in: Duration,
    /// The shared start instant instead (RFC 3339).
    #[arg(long, value_name = "TIME", value_parser = super::run::parse_instant, conflicts_with = "start_in")]
    pub start_at: Option<SystemTime>,
    /// Prefix of every object's name (default: `chaos-<scenario>`).
    #[arg(long)]
    pub name: Option<String>,
    /// Namespace of every object (default: kubectl's current one).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Storage class of the results volume (it must offer ReadWriteMany).
    #[arg(long)]
    pub storage_class: Option<String>,
    /// Size of the results volume.
    #[arg(long, default_value = "5Gi")]
    pub storage: String,
    /// CPU each worker pod requests (and is limited to).
    #[arg(long, default_value = "2")]
    pub cpu: String,
    /// Memory each worker pod requests (and is limited to).
    #[arg(long, default_value = "2Gi")]
    pub memory: String,
    /// The scenario's time scale, as `chaos run --time-scale`.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// The variant to run (a scenario with variants runs one per rendering).
    #[arg(long)]
    pub variant: Option<String>,
    /// A non-Service host the workers may send load to (the scenario's allow_remote must name
    /// it too). Without it, load goes only to loopback and the in-cluster Services the
    /// scenario names.
    #[arg(long)]
    pub allow_remote: Vec<String>,
    /// Start no mock Deployment: each worker pod runs the scenario's mocks itself.
    #[arg(long)]
    pub no_mock: bool,
}

impl From<&RenderFlags> for crate::k8s::RenderArgs {
    fn from(f: &RenderFlags) -> Self {
        Self {
            scenario: f.scenario.clone(),
            workers: f.workers,
            image: f.image.clone(),
            start_in: f.start_in,
            start_at: f.start_at,
            name: f.name.clone(),
            namespace: f.namespace.clone(),
            storage_class: f.storage_class.clone(),
            storage: f.storage.clone(),
            cpu: f.cpu.clone(),
            memory: f.memory.clone(),
            time_scale: f.time_scale,
            variant: f.variant.clone(),
            allow_remote: f.allow_remote.clone(),
            no_mock: f.no_mock,
        }
    }
}

impl From<crate::k8s::K8sError> for CliError {
    fn from(e: crate::k8s::K8sError) -> Self {
        use crate::k8s::K8sError as K;
        match e {
            K::Scenario(e) => CliError::Scenario(e),
            K::Usage(m) => CliError::Usage(m),
            K::Io { context, source } => CliError::Io { context, source },
        }
    }
}

pub(super) fn run(args: &Args) -> Result<(), CliError> {
    match &args.command {
        K8sCommand::Render(r) => super::run::print(&crate::k8s::render(&r.into(), SystemTime::now())?),
    }
}

#[cfg(test)]
mod tests {
    use super::CliError;
    use crate::cli::Exit;
    use crate::k8s::{K8sError, RenderArgs, render};

    /// A flag the renderer refuses ends `chaos k8s render` with the usage exit code (2), and
    /// a file it cannot read with the harness's I/O code, as before the renderer moved out.
    #[test]
    fn render_errors_keep_their_exit_codes() {
        let flags = RenderArgs {
            scenario: "scenarios/slow-upstream.toml".into(),
            workers: 3,
            image: "chaos:test".into(),
            start_in: crate::scenario::Duration::from_secs(60),
            start_at: None,
            name: None,
            namespace: Some("Bad_Namespace".into()),
            storage_class: None,
            storage: "5Gi".into(),
            cpu: "2".into(),
            memory: "2Gi".into(),
            time_scale: 1.0,
            variant: Some("hardened".into()),
            allow_remote: Vec::new(),
            no_mock: false,
        };
        let e = CliError::from(render(&flags, std::time::SystemTime::now()).unwrap_err());
        assert_eq!(e.exit(), Exit::Usage, "{e}");
        let missing = RenderArgs { scenario: "no/such/scenario.toml".into(), namespace: None, ..flags };
        let e = CliError::from(render(&missing, std::time::SystemTime::now()).unwrap_err());
        assert_eq!(e.exit(), Exit::Usage, "{e}");
        let io =
            CliError::from(K8sError::Io { context: "reading x".into(), source: std::io::ErrorKind::NotFound.into() });
        assert_eq!(io.to_string(), "reading x: entity not found");
    }
}
