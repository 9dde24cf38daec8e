//! The namespaces a slot's process enters (Linux): one unprivileged user
//! namespace that maps the user to themselves, with, as the run needs, a
//! mount namespace holding a [`Mirror`]'s mounts and the run's private
//! `/dev/shm`, and a network namespace with nothing but its own loopback.
//!
//! One `unshare` makes all of them, so the mirror and the network share
//! the user namespace that allows them. Everything in [`Prepared::enter`]
//! runs between `fork` and `exec` of a multi-threaded program: only system
//! calls on buffers made beforehand, no allocation.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

use crate::sensor::mirror::Mirror;

/// What a process's namespaces hold, as the system calls want it.
pub(in crate::sensor) struct Prepared {
    /// The `mirror-enter` failpoint: entering fails as a refused
    /// `unshare` would.
    injected_failure: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// `(source, mount point, flags)` of each bind mount, in order.
    mounts: Vec<(CString, CString, libc::c_ulong)>,
    /// Where the process starts: the workspace root a mirror shows.
    chdir: Option<CString>,
    /// A network namespace of its own, with only loopback up.
    own_network: bool,
}

impl Prepared {
    /// The namespaces for `covers` (each `(cover, hidden)` path mounted
    /// first, while the user's paths are still the user's), `mirror`'s
    /// mounts (if any), `shm` seen at `/dev/shm` (if given) and, when
    /// `own_network`, an isolated network; `None` when the run needs none
    /// of them.
    pub(in crate::sensor) fn new(
        mirror: Option<&Mirror>,
        own_network: bool,
        shm: Option<&Path>,
        covers: &[(PathBuf, PathBuf)],
    ) -> Option<Self> {
        if mirror.is_none() && !own_network && shm.is_none() && covers.is_empty() {
            return None;
        }
        let mut mounts: Vec<(CString, CString, libc::c_ulong)> = covers
            .iter()
            .map(|(cover, hidden)| (c_path(cover), c_path(hidden), libc::MS_BIND))
            .collect();
        mounts.extend(mirror.map(Mirror::binds).into_iter().flatten().map(
            |(source, point, recursive)| {
                let flags = if recursive {
                    libc::MS_BIND | libc::MS_REC
                } else {
                    libc::MS_BIND
                };
                (c_path(source), c_path(point), flags)
            },
        ));
        if let Some(shm) = shm {
            mounts.push((c_path(shm), c_path(Path::new("/dev/shm")), libc::MS_BIND));
        }
        Some(Self {
            injected_failure: false,
            // SAFETY: getuid/getgid have no preconditions.
            uid_map: format!("{0} {0} 1\n", unsafe { libc::getuid() }).into_bytes(),
            gid_map: format!("{0} {0} 1\n", unsafe { libc::getgid() }).into_bytes(),
            mounts,
            chdir: mirror.map(|mirror| c_path(&mirror.root)),
            own_network,
        })
    }

    /// These namespaces, failing to be entered as a refused `unshare`
    /// would when `injected` (the `mirror-enter` failpoint).
    pub(in crate::sensor) fn failing_when(mut self, injected: bool) -> Self {
        self.injected_failure = injected;
        self
    }

    /// In the forked child: a new user namespace (and mount and network
    /// namespaces as planned), the identity uid/gid maps, the mounts (each
    /// source and mount point resolved before a later mount covers it),
    /// loopback up, then into the mirrored root.
    pub(in crate::sensor) fn enter(&self) -> io::Result<()> {
        if self.injected_failure {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        let mut flags = libc::CLONE_NEWUSER;
        if !self.mounts.is_empty() {
            flags |= libc::CLONE_NEWNS;
        }
        if self.own_network {
            flags |= libc::CLONE_NEWNET;
        }
        // SAFETY: plain system calls on NUL-terminated buffers owned by self.
        unsafe {
            check(libc::unshare(flags))?;
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
            if !self.mounts.is_empty() {
                // Nothing mounted here propagates back to the user's namespace.
                check(libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_PRIVATE,
                    std::ptr::null(),
                ))?;
            }
            for (source, point, flags) in &self.mounts {
                check(libc::mount(
                    source.as_ptr(),
                    point.as_ptr(),
                    std::ptr::null(),
                    *flags,
                    std::ptr::null(),
                ))?;
            }
            if self.own_network {
                loopback_up()?;
            }
            if let Some(root) = &self.chdir {
                check(libc::chdir(root.as_ptr()))?;
            }
        }
        Ok(())
    }
}

fn check(status: libc::c_int) -> io::Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Brings up `lo`, the one interface of a new network namespace, which
/// starts down: tests that listen on 127.0.0.1 still work.
///
/// # Safety
/// Only system calls; callable between `fork` and `exec`.
unsafe fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket, one ioctl on a zeroed `ifreq`, and a close.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        request.ifr_ifru.ifru_flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        let status = libc::ioctl(socket, libc::SIOCSIFFLAGS, &request);
        let error = io::Error::last_os_error();
        libc::close(socket);
        if status == 0 { Ok(()) } else { Err(error) }
    }
}

/// Writes `bytes` to the file `path` with one `write`.
///
/// # Safety
/// Only system calls; callable between `fork` and `exec`.
unsafe fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated and `bytes` outlives the call.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if usize::try_from(written).ok() == Some(bytes.len()) {
            Ok(())
        } else {
            Err(error)
        }
    }
}

fn c_path(path: &Path) -> CString {
    use std::os::unix::ffi::OsStrExt;
    // A path from the file system has no interior NUL.
    CString::new(path.as_os_str().as_bytes()).unwrap_or_default()
}
