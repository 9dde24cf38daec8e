//! Which Python measures a workspace: `[python] interpreter`, else the
//! active `VIRTUAL_ENV`, else the workspace's own `.venv`, else `python3`
//! on `PATH`; the first that names an existing file wins, in that order.
//!
//! The interpreter is always the user's, named by an absolute path into the
//! user's workspace (or wherever the environment lives), never a path into
//! a branch slot: every branch runs the same environment read-only, and a
//! virtualenv inside the workspace is left out of snapshots altogether
//! (`snapshot/scan.rs`, a directory holding `pyvenv.cfg`), so no slot ever
//! holds a copy of its site-packages. The directory holding the
//! interpreter, as named (a virtualenv's `bin/`, not the base Python its
//! `python` links to), is also the first place the Python tools are looked
//! for (`sensor/toolpath.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sensor::toolpath::ToolUse;

/// Where the interpreter came from, for a person reading the fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Configured,
    VirtualEnv,
    DotVenv,
    Path,
}

impl Source {
    fn describe(self) -> &'static str {
        match self {
            Source::Configured => "[python] interpreter",
            Source::VirtualEnv => "VIRTUAL_ENV",
            Source::DotVenv => ".venv",
            Source::Path => "PATH",
        }
    }
}

/// The interpreter and its identity, found once per session.
#[derive(Clone, Debug)]
pub struct Interpreter {
    pub program: OsString,
    pub source: Source,
    /// `Python 3.11.7`, or why it cannot run.
    pub version: Result<String, String>,
}

impl Interpreter {
    /// Finds and identifies the interpreter for `workspace`. The program
    /// kept is the interpreter's own `sys.executable` (absolute, and past
    /// any shim such as pyenv's), so every branch runs that very file.
    pub async fn detect(workspace: &Path, configured: Option<&Path>) -> Self {
        let virtual_env = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty());
        let (chosen, source) = choose(workspace, configured, virtual_env.as_deref());
        let identified = super::tool::probe(&chosen, &["-c", IDENTIFY], workspace)
            .await
            .and_then(|text| identify(&text).ok_or_else(|| format!("it printed {text:?}")));
        match identified {
            Ok((program, version)) => Self {
                program,
                source,
                version: Ok(version),
            },
            Err(missing) => Self {
                program: chosen,
                source,
                version: Err(format!(
                    "the Python interpreter from {} cannot run: {missing}",
                    source.describe()
                )),
            },
        }
    }

    /// The virtual environment the interpreter belongs to (the directory
    /// holding `pyvenv.cfg` above `bin/python`), for tools that take an
    /// environment rather than an interpreter.
    pub fn virtual_env(&self) -> Option<OsString> {
        let prefix = Path::new(&self.program).parent()?.parent()?;
        prefix
            .join("pyvenv.cfg")
            .is_file()
            .then(|| prefix.as_os_str().to_owned())
    }

    /// What `trellis check --verbose` shows of the interpreter `stage` runs
    /// its tool with (`python -m pytest`).
    pub fn used_by(&self, stage: &str) -> ToolUse {
        ToolUse {
            stage: stage.to_owned(),
            tool: "python".to_owned(),
            program: PathBuf::from(&self.program),
            from: self.source.describe().to_owned(),
        }
    }

    /// The identity that goes into a fingerprint: version and where it is.
    pub fn identity(&self) -> String {
        match &self.version {
            Ok(version) => format!(
                "{version} ({} from {})",
                Path::new(&self.program).display(),
                self.source.describe()
            ),
            Err(_) => "unavailable".to_owned(),
        }
    }
}

/// Prints the interpreter's path and version on two lines.
const IDENTIFY: &str = "import sys; print(sys.executable); print('Python', sys.version.split()[0])";

/// `(sys.executable, "Python 3.11.7")` from what [`IDENTIFY`] printed.
fn identify(text: &str) -> Option<(OsString, String)> {
    let mut lines = text.lines().map(str::trim);
    let executable = lines.next().filter(|l| Path::new(l).is_absolute())?;
    let version = lines.next().filter(|l| l.starts_with("Python "))?;
    Some((executable.into(), version.to_owned()))
}

/// The interpreter by the precedence in the module doc. A configured
/// relative path is the workspace's; a configured path that does not exist
/// is still chosen, so running it says so instead of quietly measuring
/// another environment.
/// The package directories (`lib/python*/site-packages`) of the
/// virtualenv the workspace's interpreter belongs to, if it belongs to
/// one: what every slot imports from in place.
pub fn site_packages(workspace: &Path, configured: Option<&Path>) -> Vec<PathBuf> {
    let virtual_env = std::env::var_os("VIRTUAL_ENV").filter(|v| !v.is_empty());
    let (chosen, _) = choose(workspace, configured, virtual_env.as_deref());
    let Some(prefix) = Path::new(&chosen).parent().and_then(Path::parent) else {
        return Vec::new();
    };
    if !prefix.join("pyvenv.cfg").is_file() {
        return Vec::new();
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(prefix.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("python"))
        .map(|entry| entry.path().join("site-packages"))
        .filter(|dir| dir.is_dir())
        .collect();
    found.sort();
    found
}

fn choose(
    workspace: &Path,
    configured: Option<&Path>,
    virtual_env: Option<&std::ffi::OsStr>,
) -> (OsString, Source) {
    if let Some(path) = configured {
        return (workspace.join(path).into_os_string(), Source::Configured);
    }
    if let Some(env) = virtual_env {
        let python = Path::new(env).join("bin/python");
        if python.is_file() {
            return (python.into_os_string(), Source::VirtualEnv);
        }
    }
    let dot_venv: PathBuf = workspace.join(".venv/bin/python");
    if dot_venv.is_file() {
        return (dot_venv.into_os_string(), Source::DotVenv);
    }
    ("python3".into(), Source::Path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn venv(dir: &Path) -> PathBuf {
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("python"), "").unwrap();
        bin.join("python")
    }

    #[test]
    fn configured_beats_virtual_env_beats_dot_venv_beats_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let dot = venv(&root.join(".venv"));
        let active = venv(&dir.path().join("active"));
        let env = dir.path().join("active").into_os_string();
        let configured = choose(&root, Some(Path::new("tools/py")), Some(&env));
        assert_eq!(
            configured,
            (root.join("tools/py").into_os_string(), Source::Configured)
        );
        assert_eq!(
            choose(&root, None, Some(&env)),
            (active.into_os_string(), Source::VirtualEnv)
        );
        assert_eq!(
            choose(&root, None, None),
            (dot.into_os_string(), Source::DotVenv)
        );
        let bare = dir.path().join("bare");
        assert_eq!(choose(&bare, None, None), ("python3".into(), Source::Path));
    }

    #[test]
    fn the_identity_is_the_absolute_executable_and_its_version() {
        assert_eq!(
            identify("/venv/bin/python\nPython 3.11.7\n"),
            Some(("/venv/bin/python".into(), "Python 3.11.7".to_owned()))
        );
        assert_eq!(identify("python3\nPython 3.11.7\n"), None);
        assert_eq!(identify("/usr/bin/python3\n"), None);
    }

    #[test]
    fn a_virtual_env_without_a_python_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone").into_os_string();
        let dot = venv(&dir.path().join(".venv"));
        assert_eq!(
            choose(dir.path(), None, Some(&gone)),
            (dot.into_os_string(), Source::DotVenv)
        );
    }
}
