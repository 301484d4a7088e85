//! An environment build's run: its request (the recipe's script over the lockfile's files,
//! its network reaching sf's registry proxy, its output directory), executed in the
//! `[env.build]` executor behind a proxy started for it, and the verdict on how it went.

use std::collections::BTreeMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sf_host::contracts::{
    CancelToken, ExecutorError, PROXY_PORT, RunAnswer, RunBounds, RunCommand, RunEnvironment,
    RunNetwork, RunOutput, RunRequest, RunStatus,
};
use sf_host::registry_proxy::{ProxyConfig, ProxyListener, ProxyLog, RegistryProxy};
use sf_host::snapshot::SnapshotFile;

use super::{Options, Recipe, recipe};
use crate::backends::Backends;
use crate::error::AppError;

/// The most bytes of a build's output kept (its stdout and stderr each).
const OUTPUT_LIMIT: u64 = 4 * 1024 * 1024;

/// Runs `run` in the `[env.build]` executor, its network reaching a registry proxy that
/// allows the recipe's registries and `[env.network] allow`: the run's answer and what the
/// proxy saw.
pub(super) fn execute(
    backends: &Backends,
    run: &BuildRun,
) -> Result<(RunAnswer, ProxyLog), AppError> {
    let config = backends.config()?;
    let mut allow: Vec<String> = run
        .recipe
        .registries()
        .iter()
        .map(|host| (*host).to_owned())
        .collect();
    allow.extend(config.env().allow.iter().cloned());
    let executor_config = config
        .build_executor_record()
        .and_then(|record| config.clone().with_executor_record(&record))
        .map_err(|detail| AppError::new("config-invalid", format!("[env.build]: {detail}")))?;
    let executor = backends.executor_of(&executor_config)?;
    run_behind_proxy(run, &allow, |request| {
        executor.run(request, &CancelToken::new())
    })
}

/// What a build's run is made of.
pub(super) struct BuildRun {
    pub(super) recipe: Recipe,
    /// The lockfile's name in the run's program directory.
    pub(super) lockfile: String,
    pub(super) at: PathBuf,
    pub(super) out: PathBuf,
    pub(super) inputs: Vec<SnapshotFile>,
    /// The groups and extras to install and the toolchain bound for the run.
    pub(super) options: Options,
    pub(super) timeout: Duration,
}

impl BuildRun {
    /// The run's request, its network reaching the proxy at `proxy`.
    fn request(&self, proxy: &Path) -> RunRequest {
        let proxy_url = format!("http://127.0.0.1:{PROXY_PORT}");
        let toolchain = self.options.toolchain.as_ref();
        let toolchain_at = toolchain.map(|toolchain| toolchain.at.display().to_string());
        let env = BTreeMap::from([
            ("SF_TOOLCHAIN".to_owned(), toolchain_at.unwrap_or_default()),
            ("SF_ENV".to_owned(), self.at.display().to_string()),
            ("SF_LOCKFILE".to_owned(), self.lockfile.clone()),
            ("SF_GROUPS".to_owned(), self.options.groups.join(" ")),
            ("SF_EXTRAS".to_owned(), self.options.extras.join(" ")),
            ("SF_UV_VERSION".to_owned(), recipe::UV_VERSION.to_owned()),
            ("HTTPS_PROXY".to_owned(), proxy_url.clone()),
            ("https_proxy".to_owned(), proxy_url),
            ("PYTHONDONTWRITEBYTECODE".to_owned(), "1".to_owned()),
        ]);
        RunRequest {
            label: None,
            program_tree: None,
            command: Some(RunCommand {
                argv: vec!["sh".into(), "-c".into(), self.recipe.script().into()],
                cwd: sf_host::contracts::executor::PROGRAM_DIR.into(),
                env,
                environment: toolchain.map(|toolchain| RunEnvironment {
                    digest: toolchain.digest.clone(),
                    tree: toolchain.tree.clone(),
                    at: toolchain.at.display().to_string(),
                }),
                results: None,
                resources: Default::default(),
                scratch_executable: self.recipe.executes_scratch(),
                network: Some(RunNetwork {
                    proxy: proxy.to_path_buf(),
                }),
                output: Some(RunOutput {
                    at: self.at.display().to_string(),
                    dir: self.out.clone(),
                }),
            }),
            program: self.inputs.clone(),
            entry: self.lockfile.as_str().into(),
            args: Vec::new(),
            input: Vec::new(),
            harness: Vec::new(),
            bounds: RunBounds::new(self.timeout, OUTPUT_LIMIT),
        }
    }
}

/// Runs `run` with its network reaching a registry proxy that allows `allow`, started for
/// the run and stopped after it: the run's answer and what the proxy saw.
fn run_behind_proxy(
    run: &BuildRun,
    allow: &[String],
    execute: impl FnOnce(&RunRequest) -> Result<RunAnswer, ExecutorError>,
) -> Result<(RunAnswer, ProxyLog), AppError> {
    let private = tempfile::Builder::new()
        .prefix("sf-env-build-")
        .tempdir()
        .map_err(|error| AppError::new("unavailable", format!("a private directory: {error}")))?;
    let socket = private.path().join("proxy.sock");
    let listener = UnixListener::bind(&socket)
        .map_err(|error| AppError::new("unavailable", format!("{}: {error}", socket.display())))?;
    let proxy = RegistryProxy::start(
        ProxyListener::Unix(listener),
        ProxyConfig::allowing(allow.iter().cloned()),
    )
    .map_err(|error| AppError::invalid("[env.network] allow", error))?;
    let answer = execute(&run.request(&socket));
    let log = proxy.stop();
    let answer = answer.map_err(|error| {
        AppError::new(
            error.code(),
            format!("the build's run did not start: {error}"),
        )
    })?;
    Ok((answer, log))
}

/// Refuses a build whose run did not exit 0, or that tried to reach a host the proxy
/// refused (even if the tool carried on without it): the message names the hosts.
pub(super) fn check_succeeded(
    recipe: Recipe,
    lockfile: &str,
    answer: &RunAnswer,
    log: &ProxyLog,
    stderr: &str,
) -> Result<(), AppError> {
    let refused: Vec<String> = log
        .refused
        .iter()
        .map(|refusal| format!("{} ({})", refusal.target, refusal.why))
        .collect();
    let exited = answer.status == RunStatus::Exited && answer.exit_code == Some(0);
    if exited && refused.is_empty() {
        return Ok(());
    }
    let how = match (answer.status, answer.exit_code) {
        (RunStatus::Exited, Some(code)) => format!("exited {code}"),
        (status, _) => format!("ended {}", status.code()),
    };
    let mut message = format!("the {} build of {lockfile} {how}", recipe.name());
    if !refused.is_empty() {
        message.push_str(&format!(
            "; it tried to reach hosts the registry proxy refused: {} (add a registry to \
             [env.network] allow only if the build must reach it)",
            refused.join(", ")
        ));
    }
    let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
    if !tail.is_empty() {
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        let tail = format!("{}\n", tail.join("\n"));
        message.push_str(&format!(
            "; the last lines it wrote:\n{}",
            sf_host::text_escape::block("stderr, its end", tail.as_bytes())
        ));
    }
    Err(AppError::new("build-failed", message))
}
