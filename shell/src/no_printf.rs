//! The shipped binary's stand-in for musl's `pthread_setname_np` (feature
//! `shipped`).
//!
//! musl's version can name any thread: for another thread than the caller it
//! writes `/proc/self/task/TID/comm`, a path it formats with `snprintf`. That
//! one call links all of printf into the static binary (`vfprintf`, its
//! argument walker and its float formatting `fmt_fp`: about 10 KB of the
//! aarch64 binary), and nothing else in the program uses printf. std only ever
//! names the thread that is running (a spawned thread names itself before it
//! runs its closure), so this version names the calling thread with
//! `prctl(PR_SET_NAME)`, as musl does for that case, and refuses any other
//! thread with `ENOSYS`. Defined here, it keeps the linker from pulling musl's
//! object, and with it printf.

use core::ffi::{c_char, c_int, c_ulong};

/// Names the calling thread (`thread` must be `pthread_self()`; any other
/// thread gets `ENOSYS`). Like musl, a name longer than 15 bytes is `ERANGE`.
///
/// # Safety
/// `name` points to a NUL-terminated string (the function's C contract).
#[no_mangle]
pub unsafe extern "C" fn pthread_setname_np(thread: libc::pthread_t, name: *const c_char) -> c_int {
    // SAFETY: pthread_self has no preconditions; pthread_equal compares two handles.
    if unsafe { libc::pthread_equal(thread, libc::pthread_self()) } == 0 {
        return libc::ENOSYS;
    }
    // SAFETY: `name` is NUL-terminated (the caller's contract), so strlen reads within it.
    if unsafe { libc::strlen(name) } > 15 {
        return libc::ERANGE;
    }
    // SAFETY: PR_SET_NAME reads at most 16 bytes from `name`, a NUL-terminated
    // string of at most 15 bytes (checked above); the other arguments are unused.
    let rc = unsafe { libc::prctl(libc::PR_SET_NAME, name as c_ulong, 0, 0, 0) };
    if rc == 0 {
        0
    } else {
        // SAFETY: __errno_location returns this thread's errno, valid to read.
        unsafe { *libc::__errno_location() }
    }
}
