//! Why a run could not start or finish, and which of those are the user's to fix (exit 2)
//! rather than the run's (exit 3); `cli` maps them to the exit-code table.
//!
//! Layer 8, inside `experiment`: names the errors of the layers below; must not depend on the
//! CLI.

use std::path::PathBuf;

use crate::load::LoadError;
use crate::mock::MockError;
use crate::sut::SutError;

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario has no `[load]`.
    #[error("{0}: nothing to run: the scenario has no [load] section with phases or a sweep")]
    NoLoad(String),
    /// The mocks failed.
    #[error("{0}")]
    Mock(#[from] MockError),
    /// The SUT failed to start or become ready.
    #[error("{0}")]
    Sut(#[from] SutError),
    /// The load generator failed.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// The fault timeline was refused.
    #[error("faults: {0}")]
    Faults(String),
    /// A file of the run folder.
    #[error("run folder: {0}")]
    Folder(#[from] crate::run_folder::FolderError),
    /// The run folder could not be created where asked.
    #[error("run folder {0}")]
    Create(#[from] crate::run_folder::CreateError),
    /// `--worker` asked for something one shard of a run cannot do.
    #[error("{0}")]
    Worker(String),
    /// The run folder itself.
    #[error("run folder {}: {source}", path.display())]
    Io {
        /// Which file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// Whether the problem is in what the user asked for (exit 2) rather than in running it.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::NoLoad(_)
                | Self::Worker(_)
                | Self::Sut(
                    SutError::Placeholder(_)
                        | SutError::Remote { .. }
                        | SutError::Policy(_)
                        | SutError::Gateway(crate::gateway::GatewayError::Upstream { .. })
                )
                | Self::Load(LoadError::Header { .. })
                | Self::Create(
                    crate::run_folder::CreateError::NotEmpty(_) | crate::run_folder::CreateError::NotAFolder(_)
                )
        )
    }
}
