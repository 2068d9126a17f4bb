//! Files: read-only maps of inputs, and outputs that appear only when whole.

use crate::error::{Context, Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use kestrel_core::vqf::write::Sink;

/// A read-only memory map of a whole file.
///
/// While it lives, its address range is known to a SIGBUS handler: if the
/// file shrinks under the mapping (another process truncates it) and a page
/// past the new end is touched, the process prints one line naming the file
/// and exits with code 1 instead of dying of SIGBUS (see [`sigbus`]).
pub struct Mapped {
    map: Option<memmap2::Mmap>,
    path: PathBuf,
    slot: Option<usize>,
}

impl Mapped {
    /// Maps `path` read-only.
    pub fn open(path: &Path) -> Result<Mapped> {
        let file = File::open(path).with_context(|| path.display())?;
        let len = file.metadata().with_context(|| path.display())?.len();
        if len == 0 {
            return Ok(Mapped {
                map: None,
                path: path.to_owned(),
                slot: None,
            });
        }
        // SAFETY: the map is read-only and private to this process. Another
        // process truncating or rewriting the file while it is mapped can
        // change the bytes or raise SIGBUS on access; Kestrel never writes to
        // files it maps, and documents this limit (docs/architecture/shell.md).
        // Every byte is treated as untrusted and validated before use.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("{}: mmap", path.display()))?;
        let slot = sigbus::register(
            map.as_ptr() as usize,
            map.len(),
            format!(
                "kestrel: {}: the file changed while in use (truncated by another \
                 process?); stopping\n",
                path.display()
            ),
        );
        Ok(Mapped {
            map: Some(map),
            path: path.to_owned(),
            slot,
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

impl Drop for Mapped {
    fn drop(&mut self) {
        // Forget the range before the map (a field) is unmapped.
        if let Some(slot) = self.slot {
            sigbus::unregister(slot);
        }
    }
}

/// A clean exit instead of a crash when a mapped file shrinks under us.
///
/// What can and cannot be done: a read-only `MAP_SHARED` (or `MAP_PRIVATE`)
/// mapping shows the file's page cache; when another process truncates the
/// file, touching a page past the new end raises SIGBUS, and no mapping flag
/// prevents it (only copying the whole file into memory would, which a 4 GB
/// board cannot afford). The fault cannot be turned into an error value at
/// the faulting read either (the core reads through plain slices). So the
/// handler only recognises a fault inside a registered mapping, writes one
/// pre-formatted line to stderr and `_exit(1)`s: both async-signal-safe. A
/// fault anywhere else is not ours: the previous action (std's, or the
/// default) is put back and the handler returns, so the access faults again
/// and is handled as before. A file rewritten in place at the same length
/// raises nothing: the new bytes are read as they are (docs/reliability.md).
pub mod sigbus {
    use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
    use std::sync::OnceLock;

    // Enough for a checkpoint of many shards mapped at once (conversion).
    const SLOTS: usize = 256;

    struct Slot {
        start: AtomicUsize,
        /// 0: free.
        len: AtomicUsize,
        msg: AtomicPtr<u8>,
        msg_len: AtomicUsize,
        /// 1 while owned by a `Mapped` (claimed before the fields are set).
        used: AtomicUsize,
    }

    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Slot = Slot {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        msg: AtomicPtr::new(std::ptr::null_mut()),
        msg_len: AtomicUsize::new(0),
        used: AtomicUsize::new(0),
    };

    static RANGES: [Slot; SLOTS] = [FREE; SLOTS];

    /// The action in place before ours (`sigaction` copies it on install).
    struct Prev(libc::sigaction);
    // SAFETY: a plain C struct of integers and a handler address, written
    // once before it is shared and only read afterwards.
    unsafe impl Sync for Prev {}
    // SAFETY: as above: no pointer into thread-local data.
    unsafe impl Send for Prev {}

    static PREV: OnceLock<Option<Prev>> = OnceLock::new();

    extern "C" fn on_sigbus(
        _sig: libc::c_int,
        info: *mut libc::siginfo_t,
        _ctx: *mut libc::c_void,
    ) {
        // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t; for
        // SIGBUS si_addr is the faulting address.
        let addr = unsafe { (*info).si_addr() } as usize;
        for s in &RANGES {
            let len = s.len.load(Ordering::Acquire);
            let start = s.start.load(Ordering::Acquire);
            if len != 0 && addr.wrapping_sub(start) < len {
                let msg = s.msg.load(Ordering::Acquire);
                let n = s.msg_len.load(Ordering::Acquire);
                // SAFETY: write(2) and _exit(2) are async-signal-safe; the
                // message is a leaked (never freed) buffer of n bytes,
                // published before the range.
                unsafe {
                    if !msg.is_null() {
                        libc::write(2, msg as *const libc::c_void, n);
                    }
                    libc::_exit(1);
                }
            }
        }
        // Not a mapped model: the previous action takes over when the
        // faulting instruction runs again.
        let prev = PREV.get().and_then(|p| p.as_ref());
        // SAFETY: sigaction(2) is async-signal-safe; `prev` is a valid
        // action the kernel gave us, or we build the default one.
        unsafe {
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            let act = prev.map_or(&dfl as *const _, |p| &p.0 as *const _);
            libc::sigaction(libc::SIGBUS, act, std::ptr::null_mut());
        }
    }

    fn install() {
        PREV.get_or_init(|| {
            // SAFETY: a zeroed sigaction is a valid value; we fill the
            // handler, flags and an empty mask, and sigaction(2) copies
            // both structs. The handler is async-signal-safe (above).
            unsafe {
                let mut act: libc::sigaction = std::mem::zeroed();
                act.sa_sigaction = on_sigbus as *const () as usize;
                act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut act.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(libc::SIGBUS, &act, &mut old) == 0 {
                    Some(Prev(old))
                } else {
                    None
                }
            }
        });
    }

    /// Registers `[start, start + len)`; returns the slot, or None when all
    /// slots are taken (that mapping then keeps the default SIGBUS death).
    pub fn register(start: usize, len: usize, msg: String) -> Option<usize> {
        install();
        let msg: &'static mut str = Box::leak(msg.into_boxed_str());
        for (i, s) in RANGES.iter().enumerate() {
            if s.used
                .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                s.msg.store(msg.as_mut_ptr(), Ordering::Release);
                s.msg_len.store(msg.len(), Ordering::Release);
                s.start.store(start, Ordering::Release);
                s.len.store(len, Ordering::Release);
                return Some(i);
            }
        }
        None
    }

    /// Forgets slot `i` (before its mapping goes away).
    pub fn unregister(i: usize) {
        if let Some(s) = RANGES.get(i) {
            s.len.store(0, Ordering::Release);
            s.used.store(0, Ordering::Release);
        }
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
    /// Why the last [`Sink::write`] failed (the core's error cannot carry
    /// it): see [`Output::explain`].
    write_failure: Option<std::io::Error>,
}

impl Output {
    /// Starts an output for `target`.
    pub fn create(target: &Path) -> Result<Output> {
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
                    .with_context(|| partial.display())?;
                (f, Some(partial))
            }
        };
        Ok(Output {
            file: Some(BufWriter::with_capacity(1 << 20, file)),
            target: target.to_owned(),
            named_temp,
            write_failure: None,
        })
    }

    /// `e`, or, when a write to this output failed, the operating system's
    /// reason ("No space left on device") naming the target: the error a
    /// caller of [`Sink::write`] should report.
    pub fn explain(&mut self, e: Error) -> Error {
        match self.write_failure.take() {
            Some(io) => Error::from(io).context(format!("writing {}", self.target.display())),
            None => e,
        }
    }

    fn writer(&mut self) -> Result<&mut BufWriter<File>> {
        self.file
            .as_mut()
            .ok_or_else(|| Error::msg("output already committed"))
    }

    /// Overwrites bytes at `offset` (after everything was written).
    pub fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let target = format!("writing {}", self.target.display());
        let w = |e: std::io::Error| Error::from(e).context(&target);
        let file = self.writer()?;
        file.flush().map_err(w)?;
        let f = file.get_mut();
        f.seek(SeekFrom::Start(offset)).map_err(w)?;
        f.write_all(bytes).map_err(w)?;
        f.seek(SeekFrom::End(0)).map_err(w)?;
        Ok(())
    }

    /// Flushes to disk and maps the written bytes read-only, for checking.
    pub fn finish_and_map(&mut self) -> Result<memmap2::Mmap> {
        let target = format!("writing {}", self.target.display());
        let w = |e: std::io::Error| Error::from(e).context(&target);
        let file = self.writer()?;
        file.flush().map_err(w)?;
        file.get_ref().sync_all().map_err(w)?;
        // SAFETY: the file is ours alone (unnamed, or a hidden temp file this
        // process created) and is not written while the map is alive.
        unsafe { memmap2::Mmap::map(file.get_ref()) }.map_err(w)
    }

    /// Makes the file appear at its final path (atomically replacing an
    /// existing one).
    pub fn commit(mut self) -> Result<()> {
        let target = self.target.clone();
        let err = |e: std::io::Error| Error::from(e).context(target.display());
        let file = self.writer()?;
        file.flush().map_err(err)?;
        file.get_ref().sync_all().map_err(err)?;
        let file = self
            .file
            .take()
            .map(|w| w.into_parts().0)
            .ok_or_else(|| Error::msg("output already committed"))?;
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
        let file = self.file.as_mut().ok_or(io)?;
        file.write_all(bytes).map_err(|e| {
            self.write_failure = Some(e);
            io
        })
    }
}
