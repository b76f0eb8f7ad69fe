//! Files only their owner can read (SPEC S4): the data directory is 0700 and every file Payrail
//! makes in it 0600, whatever the process umask. Files are opened with the mode explicitly (the
//! umask can only take bits away), and a directory or file left wider by an older release or
//! by hand is tightened at start, with a log line saying so: the data directory itself and
//! everything below it.
//!
//! SQLite creates its `-wal` and `-shm` files with the mode of the database file, so creating
//! the database file 0600 before SQLite opens it is enough for all three.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

#[cfg(unix)]
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;

/// The mode bits of `meta` if group or others have any access, else `None`.
pub fn loose_mode(meta: &std::fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        let mode = meta.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Creates `dir` (and missing parents) 0700, or tightens it to 0700 if it exists wider.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.as_os_str().is_empty() {
        return Ok(());
    }
    if !dir.exists() {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        builder.mode(DIR_MODE);
        builder.create(dir)?;
    } else if !dir.is_dir() {
        // Never chmod a file someone named by mistake (it would become executable).
        return Err(std::io::Error::new(std::io::ErrorKind::NotADirectory, format!("{} is not a directory", dir.display())));
    }
    tighten(dir, DIR_MODE)
}

/// Sets `path` to `mode` if it exists and group or others have access to it (logged).
pub fn tighten(path: &Path, mode: u32) -> std::io::Result<()> {
    let Ok(meta) = std::fs::metadata(path) else { return Ok(()) };
    if let Some(was) = loose_mode(&meta) {
        #[cfg(unix)]
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        tracing::warn!(path = %path.display(), was = %format!("{was:o}"), now = %format!("{mode:o}"), "tightened permissions: only the owner may read Payrail's data (SPEC S4)");
    }
    Ok(())
}

/// Tightens everything below `dir` that group or others can reach: directories to 0700, files
/// to 0600 (each logged). Symbolic links are neither followed nor changed. A directory or file
/// made wider by hand or by another program is unreachable through `dir` at 0700 already; this
/// keeps it private if `dir` is ever opened up or copied with its modes. Best effort: what
/// cannot be read or changed (owned by another user) is logged and left.
pub fn tighten_tree(dir: &Path) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries = match std::fs::read_dir(&at) {
            Ok(entries) => entries,
            Err(err) => {
                tracing::warn!(path = %at.display(), error = %err, "could not read a data directory folder to check its permissions");
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else { continue };
            let tightened = if kind.is_dir() {
                pending.push(path.clone());
                tighten(&path, DIR_MODE)
            } else if kind.is_symlink() {
                Ok(())
            } else {
                // Files, and whatever else was left here (a FIFO, a socket).
                tighten_file(&path)
            };
            if let Err(err) = tightened {
                tracing::warn!(path = %path.display(), error = %err, "could not make a data directory entry owner-only (SPEC S4)");
            }
        }
    }
}

/// Tightens an existing file to 0600 (see [`tighten`]).
pub fn tighten_file(path: &Path) -> std::io::Result<()> {
    tighten(path, FILE_MODE)
}

/// Open options that create files 0600.
pub fn options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    options.mode(FILE_MODE);
    options
}

/// Open options that create (or truncate) a file for writing, 0600 when created: for
/// `std::fs` as they are, for `tokio::fs` through `tokio::fs::OpenOptions::from`.
pub fn create_options() -> OpenOptions {
    let mut options = options();
    options.write(true).create(true).truncate(true);
    options
}

/// Creates `path` 0600 if it does not exist (an empty file), and tightens it if it does.
pub fn touch(path: &Path) -> std::io::Result<()> {
    options().write(true).create(true).truncate(false).open(path)?;
    tighten_file(path)
}

/// Writes a new file 0600; fails with `AlreadyExists` if it is there.
pub fn write_new(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut file = options().write(true).create_new(true).open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

/// Replaces `path` atomically with a 0600 file: written beside it, synced, renamed over it.
pub fn replace(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_file_name(format!(".{}.tmp-{}", path.file_name().and_then(|n| n.to_str()).unwrap_or("file"), std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    write_new(&tmp, contents)?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn s4_directories_and_files_are_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("a/b");
        ensure_private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700);
        std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&data).unwrap();
        assert_eq!(mode(&data), 0o700, "a wider directory is tightened");
        let file = data.join("f");
        touch(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        touch(&file).unwrap();
        assert_eq!(mode(&file), 0o600);
        replace(&file, b"x").unwrap();
        assert_eq!((mode(&file), std::fs::read(&file).unwrap()), (0o600, b"x".to_vec()));
    }

    /// Found by the security audit: a folder or file made wider by something else below the
    /// data directory stayed wide.
    #[test]
    fn s4_everything_below_the_data_directory_is_tightened_and_links_are_left() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let deep = data.join("bank/outbound");
        std::fs::create_dir_all(&deep).unwrap();
        for folder in [&data.join("bank"), &deep] {
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let file = deep.join("file.ach");
        std::fs::write(&file, b"x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let outside = dir.path().join("outside");
        std::fs::write(&outside, b"y").unwrap();
        std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::symlink(&outside, data.join("link")).unwrap();
        let fifo = data.join("pipe");
        assert!(std::process::Command::new("mkfifo").args(["-m", "666"]).arg(&fifo).status().unwrap().success());
        tighten_tree(&data);
        assert_eq!((mode(&data.join("bank")), mode(&deep), mode(&file)), (0o700, 0o700, 0o600));
        assert_eq!(std::fs::symlink_metadata(&fifo).unwrap().permissions().mode() & 0o777, 0o600, "a FIFO left here too");
        assert_eq!(mode(&outside), 0o644, "a link's target outside is not changed");
    }

    /// Found by the hostile audit: `--data-dir` naming a file made that file 0700.
    #[test]
    fn s4_a_file_named_as_the_data_directory_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("keys.json");
        std::fs::write(&file, b"{}").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = ensure_private_dir(&file).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
        assert_eq!(mode(&file), 0o644);
    }
}
