//! The VFS itself: the system's `unix` VFS with its own open, registered once per process.

use crate::file;
use rusqlite::ffi;
use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

/// The name the VFS is registered under, for `Connection::open_with_flags_and_vfs`.
pub const NAME: &str = "troupe-batched-wal";

const NAME_C: &CStr = c"troupe-batched-wal";

/// The VFS this one is built on.
const BASE: &CStr = c"unix";

/// Why the VFS could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// SQLite has no `unix` VFS to build on (not a Unix build of SQLite).
    #[error("SQLite has no `unix` VFS to build on")]
    NoBase,
    /// SQLite refused to register it, with this result code.
    #[error("SQLite refused to register the `{NAME}` VFS (result code {0})")]
    Refused(c_int),
}

/// Registers the VFS (the first call does; later ones find it registered) and returns its
/// name, to open a connection with.
pub fn register() -> Result<&'static str, RegisterError> {
    static REGISTERED: OnceLock<Result<(), RegisterError>> = OnceLock::new();
    REGISTERED.get_or_init(register_once).clone().map(|()| NAME)
}

fn register_once() -> Result<(), RegisterError> {
    // SAFETY: `sqlite3_vfs_find` takes a NUL-terminated name (or null) and initializes
    // SQLite first if it must; it returns null or a registered VFS. SQLite never frees a
    // VFS it holds, and the `unix` VFS is a static of the library: the pointer stays
    // valid for the life of the process.
    let base = unsafe { ffi::sqlite3_vfs_find(BASE.as_ptr()) };
    if base.is_null() {
        return Err(RegisterError::NoBase);
    }
    // SAFETY: `base` is a valid VFS (above); this copies its plain fields.
    let base_vfs = unsafe { std::ptr::read(base) };
    let vfs = ffi::sqlite3_vfs {
        iVersion: base_vfs.iVersion.min(3),
        szOsFile: file::size_with(base_vfs.szOsFile),
        mxPathname: base_vfs.mxPathname,
        pNext: std::ptr::null_mut(),
        zName: NAME_C.as_ptr(),
        // Every method here is given this VFS; each finds the system's through it.
        pAppData: base.cast(),
        xOpen: Some(file::open),
        xDelete: Some(delete),
        xAccess: Some(access),
        xFullPathname: Some(full_pathname),
        xDlOpen: Some(dl_open),
        xDlError: Some(dl_error),
        xDlSym: Some(dl_sym),
        xDlClose: Some(dl_close),
        xRandomness: Some(randomness),
        xSleep: Some(sleep),
        xCurrentTime: Some(current_time),
        xGetLastError: Some(get_last_error),
        xCurrentTimeInt64: Some(current_time_int64),
        xSetSystemCall: Some(set_system_call),
        xGetSystemCall: Some(get_system_call),
        xNextSystemCall: Some(next_system_call),
    };
    // Registered for the rest of the process: SQLite keeps the pointer.
    let vfs: &'static mut ffi::sqlite3_vfs = Box::leak(Box::new(vfs));
    // SAFETY: `vfs` is a complete VFS that lives as long as the process; registering it
    // (not as the default) only links it into SQLite's list.
    let rc = unsafe { ffi::sqlite3_vfs_register(vfs, 0) };
    if rc == ffi::SQLITE_OK { Ok(()) } else { Err(RegisterError::Refused(rc)) }
}

/// The system's VFS, which `vfs` (this one) is built on.
///
/// # Safety
/// `vfs` is this VFS, as SQLite passes it to its methods.
pub(crate) unsafe fn base(vfs: *mut ffi::sqlite3_vfs) -> *mut ffi::sqlite3_vfs {
    // SAFETY: the caller passes this VFS, whose `pAppData` is the base (`register_once`).
    unsafe { (*vfs).pAppData.cast() }
}

/// Forwards a VFS method to the system's VFS, with the system's VFS as its first argument;
/// `$default` when the system's has no such method.
macro_rules! forward {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $default:expr) => {
        unsafe extern "C" fn $name(vfs: *mut ffi::sqlite3_vfs $(, $arg: $ty)*) -> $ret {
            // SAFETY: SQLite calls this with this VFS; the base is valid for the process.
            let base = unsafe { base(vfs) };
            // SAFETY: the base is a VFS valid for the process.
            match unsafe { (*base).$field } {
                // SAFETY: the base's method, called as SQLite would, with the base itself.
                Some(method) => unsafe { method(base $(, $arg)*) },
                None => $default,
            }
        }
    };
}

forward!(delete, xDelete, (path: *const c_char, sync_dir: c_int) -> c_int, ffi::SQLITE_IOERR_DELETE);
forward!(access, xAccess, (path: *const c_char, flags: c_int, out: *mut c_int) -> c_int, ffi::SQLITE_IOERR_ACCESS);
forward!(full_pathname, xFullPathname, (path: *const c_char, n: c_int, out: *mut c_char) -> c_int, ffi::SQLITE_CANTOPEN);
forward!(dl_open, xDlOpen, (path: *const c_char) -> *mut c_void, std::ptr::null_mut());
forward!(dl_error, xDlError, (n: c_int, out: *mut c_char) -> (), ());
forward!(dl_sym, xDlSym, (handle: *mut c_void, symbol: *const c_char) -> Option<unsafe extern "C" fn(*mut ffi::sqlite3_vfs, *mut c_void, *const c_char)>, None);
forward!(dl_close, xDlClose, (handle: *mut c_void) -> (), ());
forward!(randomness, xRandomness, (n: c_int, out: *mut c_char) -> c_int, 0);
forward!(sleep, xSleep, (micros: c_int) -> c_int, 0);
forward!(current_time, xCurrentTime, (now: *mut f64) -> c_int, ffi::SQLITE_ERROR);
forward!(get_last_error, xGetLastError, (n: c_int, out: *mut c_char) -> c_int, 0);
forward!(current_time_int64, xCurrentTimeInt64, (now: *mut ffi::sqlite3_int64) -> c_int, ffi::SQLITE_ERROR);
forward!(set_system_call, xSetSystemCall, (name: *const c_char, call: ffi::sqlite3_syscall_ptr) -> c_int, ffi::SQLITE_NOTFOUND);
forward!(get_system_call, xGetSystemCall, (name: *const c_char) -> ffi::sqlite3_syscall_ptr, None);
forward!(next_system_call, xNextSystemCall, (name: *const c_char) -> *const c_char, std::ptr::null());
