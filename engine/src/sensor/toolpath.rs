//! Where a stage's tool is found: the project's own environment first, then
//! `PATH`, one search for every tool that the Python and TypeScript stage
//! sets start by name.
//!
//! An editor starts the server without the project's virtualenv activated,
//! so `ty` and `ruff` installed in `.venv/bin` are not on its `PATH`; the
//! user's own shell, with the environment activated, would find them
//! there. So each tool is looked for in an ordered list of directories
//! ([`Search`]), and the first executable file of its name wins:
//!
//! - Python tools: the chosen interpreter's own directory (for a virtualenv
//!   its `bin/`, taken as the interpreter is named, never canonicalized
//!   through the link to the base Python, which would lose the
//!   environment), then poetry's environment (`poetry env info -p`, asked
//!   only when `poetry` is on `PATH` and the project is poetry's, and
//!   bounded by [`POETRY_DEADLINE`]), then `CONDA_PREFIX/bin`, then (for
//!   pyright, an npm package) the `node_modules/.bin` directories, then
//!   `PATH`.
//! - TypeScript tools: the `node_modules/.bin` of the project and of each
//!   directory above it, as `npm run` puts them on `PATH` (so the root of an
//!   npm workspace, where its packages' tools are hoisted, is searched
//!   too), then `PATH`.
//!
//! The stage spawns the absolute path found, in the view and in every
//! branch slot alike: the tool is the user's, outside every slot, and a
//! slot's sandbox reads and executes anywhere but writes only the slot
//! (`sensor/sandbox`), so the user's environment stays read-only to a
//! branch as the interpreter's already is. Relative `PATH` entries are
//! skipped: they would name a directory of the measured tree, which differs
//! per slot.
//!
//! A tool found nowhere is a [`NotFound`] naming every place searched;
//! `trellis check --verbose` names what was found and why ([`Found`]).
//! [`Search`] and its [`Search::find`] are pure over the directories and a
//! predicate; [`is_program`], [`Search::path`], [`Vars::of_process`] and
//! [`python`] (which may ask poetry) are the edge that reads the system.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use tokio::process::Command;

use super::process::{self, ProcessLimits};

/// How long `poetry env info -p` may take before the poetry environment is
/// passed over (poetry resolves its environment from its own cache, which
/// can be slow; the search goes on without it).
pub const POETRY_DEADLINE: Duration = Duration::from_secs(10);

/// Why a directory is searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The directory holding the interpreter; `venv` is its virtualenv (the
    /// directory above holding `pyvenv.cfg`), if it is one.
    Interpreter { venv: Option<PathBuf> },
    /// Poetry's environment for the project, at this prefix.
    Poetry(PathBuf),
    /// The active conda environment (`CONDA_PREFIX`).
    Conda(PathBuf),
    /// A `node_modules/.bin` of the project or a directory above it.
    NodeModules,
    /// An entry of `PATH`.
    Path,
}

impl Origin {
    /// What the directory is, beside its path in a list of places searched.
    fn label(&self) -> &'static str {
        match self {
            Origin::Interpreter { venv: Some(_) } => "the interpreter's environment",
            Origin::Interpreter { venv: None } => "the interpreter's directory",
            Origin::Poetry(_) => "poetry's environment",
            Origin::Conda(_) => "CONDA_PREFIX",
            Origin::NodeModules => "node_modules/.bin",
            Origin::Path => "PATH",
        }
    }

    /// Where a tool found in `dir` came from, for a person.
    fn describe(&self, dir: &Path) -> String {
        match self {
            Origin::Interpreter { venv: Some(env) } | Origin::Poetry(env) | Origin::Conda(env) => {
                format!("{} {}", self.label(), env.display())
            }
            Origin::Interpreter { venv: None } => format!("{} {}", self.label(), dir.display()),
            Origin::NodeModules | Origin::Path => self.label().to_owned(),
        }
    }
}

/// One directory searched, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    pub dir: PathBuf,
    pub origin: Origin,
}

/// The directories a tool is looked for in, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Search {
    places: Vec<Place>,
    /// Whether `PATH` was appended, even if it holds no directory: the
    /// error then says the tool is not on `PATH`.
    on_path: bool,
}

impl Search {
    /// `dir`, for `origin`, after what is already searched; a directory
    /// already in the list is not searched twice.
    pub fn then(mut self, dir: PathBuf, origin: Origin) -> Self {
        if !self.places.iter().any(|p| p.dir == dir) {
            self.places.push(Place { dir, origin });
        }
        self
    }

    /// The absolute entries of the `PATH` value `path`, last.
    pub fn then_path(mut self, path: Option<&OsStr>) -> Self {
        for dir in path.into_iter().flat_map(std::env::split_paths) {
            if dir.is_absolute() {
                self = self.then(dir, Origin::Path);
            }
        }
        self.on_path = true;
        self
    }

    /// [`Search::then_path`] with this process's `PATH`.
    pub fn path(self) -> Self {
        let path = std::env::var_os("PATH");
        self.then_path(path.as_deref())
    }

    /// The `node_modules/.bin` of `dir` and of every directory above it,
    /// nearest first.
    pub fn node_modules(self, dir: &Path) -> Self {
        dir.ancestors().fold(self, |search, dir| {
            search.then(dir.join("node_modules").join(".bin"), Origin::NodeModules)
        })
    }

    /// The first of the places holding `tool` as a program (`is_program`).
    pub fn find(&self, tool: &str, is_program: impl Fn(&Path) -> bool) -> Result<Found, NotFound> {
        self.places
            .iter()
            .map(|place| (place, place.dir.join(tool)))
            .find(|(_, program)| is_program(program))
            .map(|(place, program)| Found {
                tool: tool.to_owned(),
                from: place.origin.describe(&place.dir),
                label: place.origin.label(),
                program,
            })
            .ok_or_else(|| NotFound {
                tool: tool.to_owned(),
                searched: self.clone(),
            })
    }
}

/// Where a tool was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    pub tool: String,
    /// The absolute path the stage spawns.
    pub program: PathBuf,
    /// Why there: `the interpreter's environment /proj/.venv`, `PATH`.
    pub from: String,
    /// The kind of place alone, for a fingerprint: `node_modules/.bin`.
    pub label: &'static str,
}

impl Found {
    /// What `trellis check --verbose` shows of this tool for `stage`.
    pub fn used_by(&self, stage: &str) -> ToolUse {
        ToolUse {
            stage: stage.to_owned(),
            tool: self.tool.clone(),
            program: self.program.clone(),
            from: self.from.clone(),
        }
    }
}

/// Which program a stage runs and why: one line of `trellis check
/// --verbose`, and an entry of `tools` in its JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolUse {
    pub stage: String,
    pub tool: String,
    pub program: PathBuf,
    pub from: String,
}

impl fmt::Display for ToolUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} (from {})",
            self.tool,
            self.program.display(),
            self.from
        )
    }
}

/// A tool in none of the places searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotFound {
    pub tool: String,
    searched: Search,
}

impl fmt::Display for NotFound {
    /// "`ty` was not found in /proj/.venv/bin (the interpreter's
    /// environment) or on PATH".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let places = &self.searched.places;
        let mut named: Vec<String> = Vec::new();
        for (i, place) in places.iter().enumerate() {
            let after = |origin: &Origin| i > 0 && places[i - 1].origin == *origin;
            match &place.origin {
                Origin::Path => {}
                // The directories above the first: named once, by it.
                Origin::NodeModules if after(&Origin::NodeModules) => {}
                Origin::NodeModules
                    if places.get(i + 1).map(|p| &p.origin) == Some(&Origin::NodeModules) =>
                {
                    named.push(format!(
                        "{} (node_modules/.bin, and those of the directories above)",
                        place.dir.display()
                    ));
                }
                origin => named.push(format!("{} ({})", place.dir.display(), origin.label())),
            }
        }
        if self.searched.on_path {
            named.push("on PATH".to_owned());
        }
        write!(f, "`{}` was not found", self.tool)?;
        match named.split_last() {
            None => Ok(()),
            Some((only, [])) if only == "on PATH" => write!(f, " {only}"),
            Some((only, [])) => write!(f, " in {only}"),
            Some((last, rest)) => write!(f, " in {} or {last}", rest.join(", ")),
        }
    }
}

/// Whether `path` is a file someone may execute (following links).
pub fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The environment variables the Python search reads, taken once from the
/// process ([`Vars::of_process`]) so that the search itself takes values.
#[derive(Clone, Debug, Default)]
pub struct Vars {
    pub path: Option<OsString>,
    pub conda_prefix: Option<OsString>,
}

impl Vars {
    pub fn of_process() -> Self {
        Vars {
            path: std::env::var_os("PATH"),
            conda_prefix: std::env::var_os("CONDA_PREFIX"),
        }
    }
}

/// The places a Python tool of the project whose interpreter is
/// `interpreter` is looked for before `PATH`, under the variables `vars`.
pub async fn python(workspace: &Path, interpreter: &Path, vars: &Vars) -> Search {
    let mut search = Search::default();
    if let Some(dir) = interpreter.parent().filter(|d| d.is_absolute()) {
        let venv = dir
            .parent()
            .filter(|prefix| prefix.join("pyvenv.cfg").is_file())
            .map(Path::to_path_buf);
        search = search.then(dir.to_path_buf(), Origin::Interpreter { venv });
    }
    if let Some(env) = poetry_env(workspace, vars.path.as_deref()).await {
        search = search.then(env.join("bin"), Origin::Poetry(env));
    }
    if let Some(prefix) = conda_prefix(vars.conda_prefix.as_deref()) {
        search = search.then(prefix.join("bin"), Origin::Conda(prefix));
    }
    search
}

/// The active conda environment named by `CONDA_PREFIX`'s value, if it is
/// an absolute path.
fn conda_prefix(value: Option<&OsStr>) -> Option<PathBuf> {
    value
        .map(PathBuf::from)
        .filter(|prefix| prefix.is_absolute())
}

/// Poetry's environment for the project at `workspace`: asked of poetry
/// only when it is the project's tool ([`uses_poetry`]) and `poetry` is on
/// `path` (a `PATH` value), within [`POETRY_DEADLINE`]; `None` otherwise,
/// or when poetry cannot say.
async fn poetry_env(workspace: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    let pyproject = std::fs::read_to_string(workspace.join("pyproject.toml")).ok();
    if !uses_poetry(
        pyproject.as_deref(),
        workspace.join("poetry.lock").is_file(),
    ) {
        return None;
    }
    let poetry = Search::default()
        .then_path(path)
        .find("poetry", is_program)
        .ok()?;
    let mut cmd = Command::new(&poetry.program);
    cmd.args(["env", "info", "-p"])
        .current_dir(workspace)
        .env("NO_COLOR", "1");
    let limits = ProcessLimits {
        deadline: POETRY_DEADLINE,
        stdout_cap: 64 * 1024,
        stderr_cap: 64 * 1024,
    };
    match process::probe(cmd, "poetry env info -p", &limits, "").await {
        Ok(output) => poetry_env_of(&String::from_utf8_lossy(&output.stdout)),
        Err(why) => {
            tracing::debug!(reason = %why, "no poetry environment");
            None
        }
    }
}

/// Whether the project is poetry's: it has a `poetry.lock`, or its
/// `pyproject.toml` (the text `pyproject`) has a `[tool.poetry]` table.
fn uses_poetry(pyproject: Option<&str>, has_lock: bool) -> bool {
    has_lock
        || pyproject
            .and_then(|text| text.parse::<toml::Table>().ok())
            .is_some_and(|table| {
                table
                    .get("tool")
                    .and_then(toml::Value::as_table)
                    .is_some_and(|tool| tool.contains_key("poetry"))
            })
}

/// The environment `poetry env info -p` printed: its first line, if it is
/// an absolute path (poetry prints nothing when the project has none yet).
fn poetry_env_of(printed: &str) -> Option<PathBuf> {
    let line = printed.lines().next()?.trim();
    Some(PathBuf::from(line)).filter(|p| p.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search() -> Search {
        Search::default()
            .then(
                "/p/.venv/bin".into(),
                Origin::Interpreter {
                    venv: Some("/p/.venv".into()),
                },
            )
            .then("/cache/env/bin".into(), Origin::Poetry("/cache/env".into()))
            .then("/conda/bin".into(), Origin::Conda("/conda".into()))
            .then_path(Some(OsStr::new("/usr/local/bin:relative/bin:/usr/bin")))
    }

    fn holding(programs: &'static [&'static str]) -> impl Fn(&Path) -> bool {
        move |path| programs.iter().any(|p| path == Path::new(p))
    }

    #[test]
    fn the_interpreters_environment_comes_before_poetry_conda_and_path() {
        let everywhere = holding(&[
            "/p/.venv/bin/ty",
            "/cache/env/bin/ty",
            "/conda/bin/ty",
            "/usr/bin/ty",
        ]);
        let found = search().find("ty", everywhere).unwrap();
        assert_eq!(found.program, Path::new("/p/.venv/bin/ty"));
        assert_eq!(found.from, "the interpreter's environment /p/.venv");
        assert_eq!(
            found.used_by("python.typecheck").to_string(),
            "ty: /p/.venv/bin/ty (from the interpreter's environment /p/.venv)"
        );
        let later = holding(&["/cache/env/bin/ty", "/conda/bin/ty", "/usr/bin/ty"]);
        assert_eq!(
            search().find("ty", later).unwrap().from,
            "poetry's environment /cache/env"
        );
        let conda = holding(&["/conda/bin/ty", "/usr/bin/ty"]);
        assert_eq!(
            search().find("ty", conda).unwrap().from,
            "CONDA_PREFIX /conda"
        );
        let path = search().find("ty", holding(&["/usr/bin/ty"])).unwrap();
        assert_eq!(
            (path.program.as_path(), path.from.as_str()),
            (Path::new("/usr/bin/ty"), "PATH")
        );
    }

    #[test]
    fn path_is_searched_in_order_and_relative_entries_never() {
        let found = search()
            .find("ruff", holding(&["/usr/bin/ruff", "/usr/local/bin/ruff"]))
            .unwrap();
        assert_eq!(found.program, Path::new("/usr/local/bin/ruff"));
        assert!(
            search()
                .find("ruff", holding(&["relative/bin/ruff"]))
                .is_err()
        );
    }

    #[test]
    fn a_tool_found_nowhere_names_every_place_searched() {
        let missing = search().find("ty", |_| false).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "`ty` was not found in /p/.venv/bin (the interpreter's environment), \
             /cache/env/bin (poetry's environment), /conda/bin (CONDA_PREFIX) or on PATH"
        );
        let path_only = Search::default().then_path(None).find("node", |_| false);
        assert_eq!(
            path_only.unwrap_err().to_string(),
            "`node` was not found on PATH"
        );
        let plain_dir = Search::default()
            .then("/usr/bin".into(), Origin::Interpreter { venv: None })
            .find("ty", |_| false);
        assert_eq!(
            plain_dir.unwrap_err().to_string(),
            "`ty` was not found in /usr/bin (the interpreter's directory)"
        );
    }

    #[test]
    fn node_modules_are_searched_from_the_project_up_and_a_directory_only_once() {
        let search = Search::default()
            .node_modules(Path::new("/mono/packages/a"))
            .then("/mono/node_modules/.bin".into(), Origin::Path)
            .then_path(Some(OsStr::new("/usr/bin")));
        let dirs: Vec<&Path> = search.places.iter().map(|p| p.dir.as_path()).collect();
        assert_eq!(
            dirs,
            [
                "/mono/packages/a/node_modules/.bin",
                "/mono/packages/node_modules/.bin",
                "/mono/node_modules/.bin",
                "/node_modules/.bin",
                "/usr/bin",
            ]
            .map(Path::new)
        );
        assert_eq!(
            search.find("tsc", |_| false).unwrap_err().to_string(),
            "`tsc` was not found in /mono/packages/a/node_modules/.bin \
             (node_modules/.bin, and those of the directories above) or on PATH"
        );
        let hoisted = search
            .find(
                "tsc",
                holding(&["/mono/node_modules/.bin/tsc", "/usr/bin/tsc"]),
            )
            .unwrap();
        assert_eq!(hoisted.program, Path::new("/mono/node_modules/.bin/tsc"));
        assert_eq!(
            (hoisted.from.as_str(), hoisted.label),
            ("node_modules/.bin", "node_modules/.bin")
        );
    }

    #[test]
    fn a_project_is_poetrys_by_its_lock_or_its_tool_poetry_table() {
        assert!(uses_poetry(None, true));
        assert!(uses_poetry(Some("[tool.poetry]\nname = \"p\"\n"), false));
        assert!(uses_poetry(
            Some("[tool.poetry.dependencies]\npython = \"^3.11\"\n"),
            false
        ));
        assert!(!uses_poetry(
            Some("[project]\nname = \"p\"\n[tool.ruff]\n"),
            false
        ));
        assert!(!uses_poetry(Some("not toml ["), false));
        assert!(!uses_poetry(None, false));
    }

    #[test]
    fn poetrys_environment_is_the_absolute_path_it_printed() {
        assert_eq!(
            poetry_env_of("/home/u/.cache/pypoetry/virtualenvs/p-x-py3.11\n"),
            Some(PathBuf::from(
                "/home/u/.cache/pypoetry/virtualenvs/p-x-py3.11"
            ))
        );
        assert_eq!(poetry_env_of(""), None);
        assert_eq!(poetry_env_of("no environment\n"), None);
        assert_eq!(
            conda_prefix(Some(OsStr::new("/opt/conda/envs/x"))),
            Some("/opt/conda/envs/x".into())
        );
        assert_eq!(conda_prefix(Some(OsStr::new(""))), None);
        assert_eq!(conda_prefix(None), None);
    }

    #[tokio::test]
    async fn the_interpreters_own_directory_is_searched_as_named_not_through_its_link() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base/bin");
        let venv = dir.path().join("proj/.venv");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::write(venv.join("pyvenv.cfg"), "home = base\n").unwrap();
        std::fs::write(base.join("python3"), "").unwrap();
        std::os::unix::fs::symlink(base.join("python3"), venv.join("bin/python")).unwrap();
        let vars = Vars::default();
        let search = python(&dir.path().join("proj"), &venv.join("bin/python"), &vars).await;
        assert_eq!(
            search.places[0],
            Place {
                dir: venv.join("bin"),
                origin: Origin::Interpreter {
                    venv: Some(venv.clone())
                },
            }
        );
        // A bare name (python3 found on PATH but not run) adds no place.
        let bare = python(&dir.path().join("proj"), Path::new("python3"), &vars).await;
        assert_eq!(bare, Search::default());
    }

    #[tokio::test]
    async fn poetrys_environment_is_asked_of_the_poetry_on_path_for_a_poetry_project() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let [project, bin, env] = ["proj", "bin", "env"].map(|d| dir.path().join(d));
        for d in [&project, &bin, &env] {
            std::fs::create_dir_all(d).unwrap();
        }
        let poetry = bin.join("poetry");
        let script = format!(
            "#!/bin/sh\n[ \"$*\" = \"env info -p\" ] && echo {}\n",
            env.display()
        );
        std::fs::write(&poetry, script).unwrap();
        std::fs::set_permissions(&poetry, std::fs::Permissions::from_mode(0o755)).unwrap();
        let vars = Vars {
            path: Some(bin.clone().into_os_string()),
            conda_prefix: Some("/opt/conda".into()),
        };
        let interpreter = Path::new("/usr/bin/python3");
        // Not poetry's project: poetry is not asked.
        let plain = python(&project, interpreter, &vars).await;
        assert_eq!(
            plain.places.iter().map(|p| &p.origin).collect::<Vec<_>>(),
            [
                &Origin::Interpreter { venv: None },
                &Origin::Conda("/opt/conda".into())
            ]
        );
        std::fs::write(project.join("poetry.lock"), "").unwrap();
        let search = python(&project, interpreter, &vars).await;
        assert_eq!(
            search.places[1],
            Place {
                dir: env.join("bin"),
                origin: Origin::Poetry(env.clone()),
            }
        );
        assert_eq!(search.places[2].origin, Origin::Conda("/opt/conda".into()));
        // Without poetry on PATH there is no poetry environment.
        let without = Vars { path: None, ..vars };
        let search = python(&project, interpreter, &without).await;
        assert!(
            search
                .places
                .iter()
                .all(|p| !matches!(p.origin, Origin::Poetry(_)))
        );
    }

    #[test]
    fn only_an_executable_file_is_a_program() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ty");
        std::fs::write(&file, "").unwrap();
        assert!(!is_program(&file));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(is_program(&file));
        assert!(!is_program(dir.path()));
        assert!(!is_program(&dir.path().join("missing")));
    }
}
