//! Reading the files a workspace names: its `trellis.toml` and the sections
//! of its bundles.
//!
//! Only regular files are read (a symlink to one is followed), opened
//! without blocking so a FIFO cannot stall start-up, and never past a cap,
//! so a link to `/dev/zero` or a huge file cannot exhaust memory. This
//! module never writes and never walks directories.

use std::io::Read as _;
use std::path::Path;

/// The largest `trellis.toml` read, as the engine's configuration reader.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The largest bundle section read: far over any compiled section's budget.
pub const MAX_SECTION_BYTES: u64 = 1 << 20;

/// The text of the regular file at `path`, `None` when nothing is there;
/// anything else (not a regular file, over `cap` bytes, not UTF-8, an I/O
/// error) is the reason it was refused.
pub fn read_regular(path: &Path, cap: u64) -> Result<Option<String>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read: {e}")),
    };
    let metadata = file.metadata().map_err(|e| format!("cannot read: {e}"))?;
    if !metadata.is_file() {
        return Err("not a regular file; only a regular file is read".to_owned());
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > cap {
        return Err(format!("larger than {} KiB", cap >> 10));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|e| format!("cannot read: not UTF-8 ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_none_and_a_small_one_is_its_text() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_regular(&dir.path().join("absent"), 8), Ok(None));
        std::fs::write(dir.path().join("f"), "12345678").unwrap();
        assert_eq!(
            read_regular(&dir.path().join("f"), 8),
            Ok(Some("12345678".into()))
        );
        let error = read_regular(&dir.path().join("f"), 7).unwrap_err();
        assert!(error.contains("larger than"), "{error}");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        let error = read_regular(&fifo, 1 << 20).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
