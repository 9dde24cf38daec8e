//! `trellis`: repairs code in verified branches.
//!
//! One binary, two front ends over the same engine: `trellis lsp` speaks the
//! Language Server Protocol on stdio; every other subcommand is the headless
//! command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use trellis_engine::PromptPolicy;

mod cli;
mod server;
mod terminate;

use cli::Format;
use cli::ledger::LedgerCommand;

/// Unit tests count what each thread allocates, so the property tests of
/// the client-facing parsers can bound it (`trellis_core::fuzz::bounded`).
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: trellis_core::fuzz::CountingAllocator = trellis_core::fuzz::CountingAllocator;

/// Repairs code in verified branches.
///
/// Trellis runs your project's own checks (cargo check, cargo test) on your
/// workspace, groups the errors by root cause, and searches for a repair in
/// isolated copies. Only a repair under which every required check passes
/// is ever written to your files. Every decision is recorded in a
/// hash-chained ledger under `.trellis/`.
///
/// Exit codes: 0 = everything passes (or was repaired), 1 = problems
/// remain, 2 = usage, configuration or infrastructure error.
#[derive(Parser)]
#[command(name = "trellis", version, about, long_about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    // Still accepted before any subcommand and after those they do not
    // apply to, as before, but shown only in the help of the subcommands
    // that open a workspace's prompts (`PromptFlags`): clap gives a
    // subcommand's own flag of the same name the place of this hidden global.
    #[command(flatten)]
    prompts: HiddenPromptFlags,
}

/// The prompt flags of the subcommands whose engine resolves prompts
/// (`check`, `repair`, `gc`, `lsp`), listed in their help.
#[derive(Args, Clone, Copy, Debug, Default)]
struct PromptFlags {
    /// Let experimental prompt overrides and bundles resolve (recorded in the ledger).
    #[arg(long)]
    allow_experimental_prompts: bool,
    /// Let a prompt bundle replace platform sections (recorded in the ledger).
    #[arg(long)]
    allow_core_prompt_override: bool,
}

/// [`PromptFlags`] as the top level accepts them everywhere, out of every help.
#[derive(Args, Clone, Copy, Debug, Default)]
struct HiddenPromptFlags {
    #[arg(long, global = true, hide = true)]
    allow_experimental_prompts: bool,
    #[arg(long, global = true, hide = true)]
    allow_core_prompt_override: bool,
}

impl HiddenPromptFlags {
    /// The policy of the flags given before the subcommand or after it.
    fn policy(self, own: PromptFlags) -> PromptPolicy {
        PromptPolicy {
            allow_experimental: self.allow_experimental_prompts || own.allow_experimental_prompts,
            allow_core_override: self.allow_core_prompt_override || own.allow_core_prompt_override,
        }
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run the checks on a workspace and show the problems, grouped by root cause.
    ///
    /// Runs `cargo check --workspace --all-targets` and `cargo test
    /// --workspace` in a private copy (your own target/ is never locked) and
    /// prints one line per root cause, with the id `--cluster` takes. Exits 0
    /// when every required check passes.
    Check {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Also show the precise terms: energy, clusters, strategies (see docs/user-guide.md).
        #[arg(long, short)]
        verbose: bool,
        #[command(flatten)]
        prompts: PromptFlags,
    },
    /// Search for a verified repair; with --commit, write it to your files.
    ///
    /// Each step takes one root cause and tries at most --max-branches
    /// candidate fixes (from the compiler's own suggestions), one at a time
    /// in an isolated copy, and keeps the one that leaves the fewest and
    /// least severe problems (docs/user-guide.md explains the rule). Without
    /// --commit nothing is written: the verified diff is shown. With --commit the
    /// diff is written only if the search reached a state where every
    /// required check passes, and only if your files did not change
    /// meanwhile.
    Repair {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        /// Write the repair to your files, if every required check passes on it.
        #[arg(long)]
        commit: bool,
        /// Candidate fixes tried per step, 1 to 3.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=3))]
        max_branches: u8,
        /// Repair this root cause first (an id shown by `trellis check`).
        #[arg(long)]
        cluster: Option<String>,
        /// Attach a prompt bundle from `trellis bundles` (`ID`, `ID@N` or
        /// `ID@sha256:HEX`; repeatable), resolved once when the repair starts.
        #[arg(long = "bundle", value_name = "REF")]
        bundles: Vec<String>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Also show the precise terms: energy, clusters, strategies (see docs/user-guide.md).
        #[arg(long, short)]
        verbose: bool,
        #[command(flatten)]
        prompts: PromptFlags,
    },
    /// Remove stored content and branch workspaces nothing needs any more.
    ///
    /// Removes blobs in `.trellis/objects` that no resumable repair can read
    /// and, in the cache directory, the branch workspaces of projects that
    /// no longer exist (and, past 8 GiB, those idle longest). Never what a
    /// running trellis holds. `trellis repair` does the same when it ends.
    Gc {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        /// Report what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        #[command(flatten)]
        prompts: PromptFlags,
    },
    /// Say what this machine gives Trellis: whether a branch's builds and tests are sandboxed.
    ///
    /// Where the kernel offers Landlock and user namespaces, every build,
    /// test and tool a branch runs may write only the branch, and code a
    /// model wrote reaches no network but its own loopback. Where it does
    /// not, branches copy your build artifacts instead of linking them, and
    /// model-written code is refused unless `[sandbox] require = false`.
    Doctor {
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// Serve the Language Server Protocol on stdin/stdout (for editors).
    Lsp {
        #[command(flatten)]
        prompts: PromptFlags,
    },
    /// Show the last repair search: the candidate fixes it tried, the limits left.
    ///
    /// With --verbose: every search, each candidate's state, the budget left
    /// and the failed attempts that are never repeated, in the terms the
    /// ledger records them with.
    Status {
        /// A directory of the project (default: the current directory); its root is found above it, as cargo finds it.
        path: Option<PathBuf>,
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Also show the precise terms: energy, clusters, strategies (see docs/user-guide.md).
        #[arg(long, short)]
        verbose: bool,
    },
    /// Inspect the decision ledger in `.trellis/ledger.db`.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// The typed prompt library: list, render, diff, lint, manifest, evaluate, activate.
    ///
    /// `list`, `render` and `diff` use the library built into this binary;
    /// `lint`, `manifest`, `evaluate` and `activate` act on the library sources
    /// under `./prompts` (run them from the Trellis source tree);
    /// `explain-session` reads `./.trellis/ledger.db`.
    Prompts {
        #[command(subcommand)]
        command: cli::prompts::PromptsCommand,
    },
    /// The model's resident context, turn by turn, as the ledger recorded it.
    Context {
        #[command(subcommand)]
        command: cli::context::ContextCommand,
    },
    /// The workspace's versioned prompt bundles: write, list, show, diff, default, history, prune.
    ///
    /// A bundle replaces the text of compiled prompt sections (never a tool,
    /// gate, budget or stage). Every write is compiled first and stored as
    /// a new version in `.trellis/bundles.db`; `trellis repair --bundle REF`
    /// (and the editor's repair) attach versions, frozen for that repair.
    /// Refs: `ID` (the default), `ID@N`, `ID@sha256:HEX`. See docs/model.md.
    Bundles {
        #[command(subcommand)]
        command: cli::bundles::BundlesCommand,
    },
}

fn detail(verbose: bool) -> cli::render::Detail {
    if verbose {
        cli::render::Detail::Verbose
    } else {
        cli::render::Detail::Plain
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let given = cli.prompts;
    // Logs go to stderr only: in `trellis lsp` stdout carries the protocol,
    // elsewhere it carries the report. `RUST_LOG` chooses what is logged
    // (errors alone without it).
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = runtime.block_on(async {
        terminate::on_termination_signals();
        match cli.command {
            Command::Check {
                path,
                format,
                verbose,
                prompts,
            } => cli::check::run(path, format, detail(verbose), given.policy(prompts)).await,
            Command::Repair {
                path,
                commit,
                max_branches,
                cluster,
                bundles,
                format,
                verbose,
                prompts,
            } => {
                let detail = detail(verbose);
                let options = trellis_engine::RepairOptions {
                    max_branches: max_branches.into(),
                    target_cluster: cluster,
                    bundles,
                };
                let prompts = given.policy(prompts);
                cli::repair::run(path, commit, options, format, detail, prompts).await
            }
            Command::Status {
                path,
                format,
                verbose,
            } => cli::status::run(path, format, detail(verbose)),
            Command::Gc {
                path,
                dry_run,
                format,
                prompts,
            } => cli::gc::run(path, dry_run, format, given.policy(prompts)),
            Command::Ledger { command } => cli::ledger::run(command),
            Command::Doctor { format } => cli::doctor::run(format),
            Command::Lsp { prompts } => match server::serve_stdio(given.policy(prompts)).await {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    2
                }
            },
            Command::Prompts { command } => cli::prompts::run(command),
            Command::Context { command } => cli::context::run(command),
            Command::Bundles { command } => {
                cli::bundles::run(command, given.policy(PromptFlags::default()))
            }
        }
    });
    ExitCode::from(code)
}
