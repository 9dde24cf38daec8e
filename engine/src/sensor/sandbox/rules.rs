//! The Landlock rules of one run, made in the parent: read and execute
//! everywhere, write only beneath the run's own directories and to the few
//! device files every tool opens for writing. The ruleset is created before
//! the fork; the child only enforces it ([`Enforce::apply`]), a `prctl` and
//! one system call, so nothing allocates between `fork` and `exec`.

use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
};

/// The Landlock version whose rights the rules are written for (Linux
/// 6.12): file access with truncation, cross-directory renames and device
/// ioctls, and the scopes that keep signals and abstract sockets inside
/// the sandbox. An older kernel enforces what it knows; the probe decides
/// whether that is enough.
const ABI_WRITTEN_FOR: ABI = ABI::V6;

/// Device files a tool may open for writing: the sinks and sources every
/// shell redirection and runtime uses. Never a terminal.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// A created ruleset, to be enforced once in the child.
pub(super) struct Enforce(Option<RulesetCreated>);

/// The rules for a process that may write only beneath `writable`.
pub(super) fn ruleset(writable: &[&Path]) -> Result<Enforce, String> {
    let all = AccessFs::from_all(ABI_WRITTEN_FOR);
    let read = AccessFs::from_read(ABI_WRITTEN_FOR) | AccessFs::IoctlDev;
    let device = BitFlags::from(AccessFs::WriteFile) | AccessFs::Truncate | AccessFs::IoctlDev;
    let failed = |what: &str, error: &dyn std::fmt::Display| format!("{what}: {error}");
    let mut created = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .and_then(|ruleset| ruleset.scope(Scope::from_all(ABI_WRITTEN_FOR)))
        .and_then(Ruleset::create)
        .map_err(|e| failed("a Landlock ruleset cannot be created", &e))?
        .add_rule(PathBeneath::new(open(Path::new("/"))?, read))
        .map_err(|e| failed("the read rule cannot be added", &e))?;
    for device_path in DEVICES {
        // A missing device is a system without it: nothing to allow.
        let Ok(fd) = open(Path::new(device_path)) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, device))
            .map_err(|e| failed(device_path, &e))?;
    }
    for dir in writable {
        created = created
            .add_rule(PathBeneath::new(open_dir(dir)?, all))
            .map_err(|e| failed(&dir.display().to_string(), &e))?;
    }
    Ok(Enforce(Some(created)))
}

impl Enforce {
    /// In the forked child: no new privileges, then the rules, for this
    /// process and everything it starts. Fails when the kernel enforces
    /// none of them. Only system calls; callable between `fork` and `exec`.
    pub(super) fn apply(&mut self) -> io::Result<()> {
        let Some(ruleset) = self.0.take() else {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        };
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced && status.no_new_privs => {
                Ok(())
            }
            Ok(_) => Err(io::Error::from_raw_os_error(libc::ENOSYS)),
            Err(_) => Err(io::Error::from_raw_os_error(libc::EPERM)),
        }
    }
}

/// An `O_PATH` handle of `path`, following links (the system's own paths).
fn open(path: &Path) -> Result<OwnedFd, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// An `O_PATH` handle of the directory `dir`, refusing a link in its place:
/// what is writable is the directory Trellis made, never where a link
/// would lead.
fn open_dir(dir: &Path) -> Result<OwnedFd, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .map(OwnedFd::from)
        .map_err(|e| format!("{}: {e}", dir.display()))
}
