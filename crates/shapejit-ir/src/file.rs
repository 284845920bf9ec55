//! Opening the files a model or its inputs come from: only regular files.
//!
//! A FIFO blocks the opener until a writer appears, a device such as
//! `/dev/zero` never ends, and a directory cannot be read or mapped: every
//! loader opens through [`open_regular`], so each of these is an error naming
//! the kind of file instead of a hang.
//!
//! **Invariant:** a file returned by [`open_regular`] was a regular file when
//! the path was checked and is one after it was opened.

use std::fs::{File, FileType};
use std::io;
use std::path::Path;

fn kind(t: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

fn not_regular(t: FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}, expected a regular file", kind(t)),
    )
}

/// Opens `path` for reading when it is a regular file (symlinks followed);
/// a FIFO, device, socket or directory is an `InvalidInput` error naming it.
pub fn open_regular(path: &Path) -> io::Result<File> {
    // Checked before opening: opening a FIFO for reading blocks.
    let before = std::fs::metadata(path)?.file_type();
    if !before.is_file() {
        return Err(not_regular(before));
    }
    let file = File::open(path)?;
    let after = file.metadata()?.file_type();
    if !after.is_file() {
        return Err(not_regular(after));
    }
    Ok(file)
}

/// Reads a regular file to a string (see [`open_regular`]).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open_regular(path)?, &mut text)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open() {
        let dir = std::env::temp_dir();
        let err = open_regular(&dir).unwrap_err();
        assert_eq!(err.to_string(), "a directory, expected a regular file");
        #[cfg(unix)]
        {
            let err = open_regular(Path::new("/dev/zero")).unwrap_err();
            assert_eq!(
                err.to_string(),
                "a character device, expected a regular file"
            );
        }
        let path = dir.join(format!("open-regular-{}", std::process::id()));
        std::fs::write(&path, "x").unwrap();
        assert_eq!(read_to_string(&path).unwrap(), "x");
        std::fs::remove_file(&path).ok();
    }
}
