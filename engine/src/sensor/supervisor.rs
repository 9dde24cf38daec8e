//! Children that die with Trellis, even when Trellis is killed (Linux).
//!
//! `run_bounded` kills a tool's process group when it returns, times out or
//! is cancelled, but a SIGKILLed Trellis runs no code. `PR_SET_PDEATHSIG` on
//! `cargo` alone would not help either: the signal kills `cargo`, and the
//! `rustc`s and test binaries it started live on. So the process Trellis
//! spawns is a small supervisor, forked in the child before `exec` (see
//! [`install`]): it forks again, the grandchild execs the tool (in the
//! supervisor's process group, with `PR_SET_PDEATHSIG` = SIGKILL tied to the
//! single-threaded supervisor), and the supervisor waits. It mirrors the
//! tool's exit status, and when Trellis dies it kills the whole group,
//! itself included.
//!
//! Parent death is detected by `getppid()` changing, never by the death
//! signal alone: `PR_SET_PDEATHSIG` fires when the *thread* that forked
//! exits, and tokio's blocking threads come and go. The death signal
//! (SIGUSR1) only wakes the supervisor early; a 100 ms poll catches the rest.
//!
//! Everything in the supervisor runs between `fork` and `exec` of a
//! multi-threaded program: only async-signal-safe calls, no allocation, no
//! locks. It never returns to the caller's code.

use tokio::process::Command;

/// How often the supervisor looks whether Trellis is still alive.
const POLL: libc::timespec = libc::timespec {
    tv_sec: 0,
    tv_nsec: 100_000_000,
};

/// Makes `cmd` run under a supervisor that kills its process group when
/// this process dies. `cmd` must be a process-group leader (`process_group(0)`).
pub fn install(cmd: &mut Command) {
    // SAFETY: getpid has no preconditions.
    let trellis = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the forked child and calls only
    // async-signal-safe functions (fork, prctl, sigprocmask, sigtimedwait,
    // waitpid, getppid, kill, close, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::getppid() != trellis {
                // Trellis died between fork and here.
                libc::_exit(137);
            }
            let supervisor = libc::getpid();
            match libc::fork() {
                -1 => Err(std::io::Error::last_os_error()),
                0 => {
                    // The tool: dies with its supervisor, then execs.
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != supervisor {
                        libc::_exit(137);
                    }
                    Ok(())
                }
                tool => supervise(tool, trellis),
            }
        });
    }
}

/// Waits for `tool`, exits as it did, and kills the process group if
/// `trellis` dies first.
///
/// # Safety
/// Only in a freshly forked child; never returns.
unsafe fn supervise(tool: libc::pid_t, trellis: libc::pid_t) -> ! {
    // SAFETY: plain system calls on local values, in a forked child.
    unsafe {
        let mut wake: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut wake);
        libc::sigaddset(&mut wake, libc::SIGCHLD);
        libc::sigaddset(&mut wake, libc::SIGUSR1);
        libc::sigprocmask(libc::SIG_BLOCK, &wake, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGUSR1);
        // Hold no pipe open: not the output pipes (their end is the tool's
        // end), not the exec-error pipe of `spawn` (it would wait for us).
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..1024 {
                libc::close(fd);
            }
        }
        loop {
            let mut status = 0;
            if libc::waitpid(tool, &mut status, libc::WNOHANG) == tool {
                exit_like(status);
            }
            if libc::getppid() != trellis {
                // Trellis is gone: the group (the tool, everything it
                // started, and this process) goes with it.
                libc::kill(0, libc::SIGKILL);
                libc::_exit(137);
            }
            libc::sigtimedwait(&wake, std::ptr::null_mut(), &POLL);
        }
    }
}

/// Ends the supervisor the way the tool ended, so `run_bounded` sees the
/// tool's exit code or signal.
///
/// # Safety
/// Only in the supervisor.
unsafe fn exit_like(status: libc::c_int) -> ! {
    // SAFETY: plain system calls in the single-threaded supervisor.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            libc::signal(signal, libc::SIG_DFL);
            let mut only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut only);
            libc::sigaddset(&mut only, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt as _;
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::Command;
    use crate::sensor::process::{Confinement, ProcessLimits, run_bounded};

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", script]);
        cmd
    }

    async fn run(script: &str) -> std::process::ExitStatus {
        let limits = ProcessLimits::with_deadline(Duration::from_secs(60));
        run_bounded(
            sh(script),
            Confinement::Unconfined,
            &limits,
            &CancellationToken::new(),
        )
        .await
        .unwrap()
        .status
    }

    #[tokio::test]
    async fn the_tool_runs_under_the_supervisor_in_its_process_group() {
        let limits = ProcessLimits::with_deadline(Duration::from_secs(60));
        // The tool's parent is the supervisor, which leads the group.
        let output = run_bounded(
            sh("echo $PPID; ps -o pgid= -p $$"),
            Confinement::Unconfined,
            &limits,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
        let text = String::from_utf8(output.stdout).unwrap();
        let mut lines = text.split_whitespace();
        let (parent, group) = (lines.next().unwrap(), lines.next().unwrap());
        assert_eq!(parent, group, "{text}");
        assert_ne!(parent, std::process::id().to_string());
    }

    /// `PR_SET_PDEATHSIG` fires when the spawning *thread* exits; tokio's
    /// blocking threads come and go, so that alone must not end the tool.
    #[test]
    fn the_tool_outlives_the_thread_that_spawned_it() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let handle = runtime.handle().clone();
        let mut child = std::thread::spawn(move || {
            let _entered = handle.enter();
            let mut cmd = Command::new("sleep");
            cmd.arg("30").process_group(0);
            super::install(&mut cmd);
            cmd.spawn().unwrap()
        })
        .join()
        .unwrap();
        // Longer than the supervisor's poll: it woke on the death signal,
        // saw its parent alive, and went on waiting.
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the tool died with its spawning thread"
        );
        let pgid = libc::pid_t::try_from(child.id().unwrap()).unwrap();
        // SAFETY: killpg has no memory-safety preconditions.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
        let status = runtime.block_on(child.wait()).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    #[tokio::test]
    async fn the_supervisor_exits_as_the_tool_did() {
        assert_eq!(run("exit 7").await.code(), Some(7));
        assert!(run("true").await.success());
        assert_eq!(run("kill -TERM $$").await.signal(), Some(libc::SIGTERM));
    }
}
