//! Files: read-only maps of inputs, and outputs that appear only when whole.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use kestrel_core::vqf::write::Sink;

/// A read-only memory map of a whole file.
pub struct Mapped {
    map: Option<memmap2::Mmap>,
    path: PathBuf,
}

impl Mapped {
    /// Maps `path` read-only.
    pub fn open(path: &Path) -> Result<Mapped, String> {
        let file = File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let len = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        if len == 0 {
            return Ok(Mapped {
                map: None,
                path: path.to_owned(),
            });
        }
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating or rewriting the file while it is mapped can
        // change the bytes or raise SIGBUS on access; Kestrel never writes to
        // files it maps, and documents this limit (docs/architecture.md).
        // Every byte is treated as untrusted and validated before use.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .map_err(|e| format!("{}: mmap: {e}", path.display()))?;
        Ok(Mapped {
            map: Some(map),
            path: path.to_owned(),
        })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The path mapped.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// An output file that becomes visible at its final path only by
/// [`Output::commit`]: it is created unnamed (`O_TMPFILE`) in the target's
/// directory, so a crash, a kill or an error leaves nothing behind and never
/// touches an existing file at the final path. Where the file system has no
/// `O_TMPFILE`, a hidden `.NAME.partial` file is used and removed on error.
pub struct Output {
    file: Option<BufWriter<File>>,
    target: PathBuf,
    named_temp: Option<PathBuf>,
}

impl Output {
    /// Starts an output for `target`.
    pub fn create(target: &Path) -> Result<Output, String> {
        let dir = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let tmp = OpenOptions::new()
            .read(true)
            .write(true)
            .mode(0o644)
            .custom_flags(libc::O_TMPFILE)
            .open(&dir);
        let (file, named_temp) = match tmp {
            Ok(f) => (f, None),
            Err(_) => {
                let name = target
                    .file_name()
                    .ok_or_else(|| format!("{}: not a file name", target.display()))?;
                let partial = dir.join(format!(".{}.partial", name.to_string_lossy()));
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .open(&partial)
                    .map_err(|e| format!("{}: {e}", partial.display()))?;
                (f, Some(partial))
            }
        };
        Ok(Output {
            file: Some(BufWriter::with_capacity(1 << 20, file)),
            target: target.to_owned(),
            named_temp,
        })
    }

    fn writer(&mut self) -> Result<&mut BufWriter<File>, String> {
        self.file
            .as_mut()
            .ok_or_else(|| "output already committed".to_string())
    }

    /// Overwrites bytes at `offset` (after everything was written).
    pub fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<(), String> {
        let target = self.target.display().to_string();
        let w = |e: std::io::Error| format!("{target}: {e}");
        let file = self.writer()?;
        file.flush().map_err(w)?;
        let f = file.get_mut();
        f.seek(SeekFrom::Start(offset)).map_err(w)?;
        f.write_all(bytes).map_err(w)?;
        f.seek(SeekFrom::End(0)).map_err(w)?;
        Ok(())
    }

    /// Flushes to disk and maps the written bytes read-only, for checking.
    pub fn finish_and_map(&mut self) -> Result<memmap2::Mmap, String> {
        let target = self.target.display().to_string();
        let w = |e: std::io::Error| format!("{target}: {e}");
        let file = self.writer()?;
        file.flush().map_err(w)?;
        file.get_ref().sync_all().map_err(w)?;
        // SAFETY: the file is ours alone (unnamed, or a hidden temp file this
        // process created) and is not written while the map is alive.
        unsafe { memmap2::Mmap::map(file.get_ref()) }.map_err(w)
    }

    /// Makes the file appear at its final path (atomically replacing an
    /// existing one).
    pub fn commit(mut self) -> Result<(), String> {
        let target = self.target.clone();
        let err = |e: std::io::Error| format!("{}: {e}", target.display());
        let file = self.writer()?;
        file.flush().map_err(err)?;
        file.get_ref().sync_all().map_err(err)?;
        let file = self
            .file
            .take()
            .map(|w| w.into_parts().0)
            .ok_or_else(|| "output already committed".to_string())?;
        match self.named_temp.take() {
            Some(partial) => std::fs::rename(&partial, &target).map_err(|e| {
                let _ = std::fs::remove_file(&partial);
                err(e)
            }),
            None => {
                use std::os::fd::AsRawFd;
                let dir = target
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let name = target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let link = dir.join(format!(".{name}.{}.link", std::process::id()));
                let proc_path = format!("/proc/self/fd/{}\0", file.as_raw_fd());
                let link_c = std::ffi::CString::new(link.as_os_str().as_encoded_bytes())
                    .map_err(|_| err(std::io::Error::other("path has a NUL byte")))?;
                // SAFETY: both paths are NUL-terminated C strings that live
                // across the call; linkat does not keep them.
                let rc = unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        proc_path.as_ptr().cast(),
                        libc::AT_FDCWD,
                        link_c.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                };
                if rc != 0 {
                    return Err(err(std::io::Error::last_os_error()));
                }
                std::fs::rename(&link, &target).map_err(|e| {
                    let _ = std::fs::remove_file(&link);
                    err(e)
                })
            }
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // Not committed: an unnamed file vanishes with its descriptor; a
        // named temp file is removed. (After commit, `named_temp` was renamed.)
        if let Some(p) = &self.named_temp {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Sink for Output {
    fn write(&mut self, bytes: &[u8]) -> Result<(), kestrel_core::Error> {
        let io = kestrel_core::Error::Io {
            what: "writing the output file",
        };
        self.file
            .as_mut()
            .ok_or(io)?
            .write_all(bytes)
            .map_err(|_| io)
    }
}
