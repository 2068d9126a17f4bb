//! The shipped binary's stand-ins for the unwinder (feature `shipped`).
//!
//! The shipped build (scripts/build-shipped.sh) aborts on panic and carries no
//! unwind tables, so no frame can be unwound: nothing unwinds for a panic, and
//! a backtrace (`RUST_BACKTRACE=1`) could not get past the frame that asks for
//! it. Yet std's panic hook still references two unwinder functions for that
//! backtrace, and those references alone link the whole of libunwind (about
//! 40 KB of the aarch64 binary: the DWARF call-frame parser and interpreter).
//! Defining them here satisfies the references, so the linker never pulls
//! libunwind's objects. The panic message is printed as before; the backtrace
//! it may add is empty, as it already was in effect.

use core::ffi::{c_int, c_void};

/// The unwinder's "end of stack" reason code (`_URC_END_OF_STACK`).
const END_OF_STACK: c_int = 5;

/// Walks no frames: reports the end of the stack at once, without calling
/// `trace`. Matches libunwind's signature
/// `_Unwind_Reason_Code _Unwind_Backtrace(_Unwind_Trace_Fn, void *)`.
#[no_mangle]
pub extern "C" fn _Unwind_Backtrace(
    _trace: extern "C" fn(*mut c_void, *mut c_void) -> c_int,
    _arg: *mut c_void,
) -> c_int {
    END_OF_STACK
}

/// No frame is ever handed out by `_Unwind_Backtrace` above, so this is never
/// called with one; it returns 0 (no address), as for an unknown frame.
#[no_mangle]
pub extern "C" fn _Unwind_GetIP(_context: *mut c_void) -> usize {
    0
}

/// The helpers of std's personality routine, which only an unwinder calls
/// (for a frame with a landing pad, of which this build has none); with no
/// unwinder linked they are unreachable. Their references alone would still
/// link libunwind, so each is defined here, with libunwind's signature, and
/// aborts if it were ever reached. (The linker's `--trace-symbol` lists the
/// references: these and the two above.)
macro_rules! unreachable_unwinder_helpers {
    ($($name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {$(
        #[doc = concat!("Unreachable without an unwinder: aborts (libunwind's `", stringify!($name), "`).")]
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
            $(let _ = $arg;)*
            std::process::abort()
        }
    )*};
}

unreachable_unwinder_helpers! {
    _Unwind_GetLanguageSpecificData(context: *mut c_void) -> *mut c_void;
    _Unwind_GetRegionStart(context: *mut c_void) -> usize;
    _Unwind_GetTextRelBase(context: *mut c_void) -> usize;
    _Unwind_GetDataRelBase(context: *mut c_void) -> usize;
    _Unwind_GetIPInfo(context: *mut c_void, ip_before_insn: *mut c_int) -> usize;
    _Unwind_SetGR(context: *mut c_void, reg_index: c_int, value: usize);
    _Unwind_SetIP(context: *mut c_void, value: usize);
}
