//! A file opened through the VFS: the system's file, and for a WAL the writes it holds.

use crate::vfs;
use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void};

/// The most bytes a WAL's buffer holds before it is written out, whatever follows.
pub const BUFFER_LIMIT: usize = 4 << 20;

#[cfg(test)]
thread_local! {
    /// How many writes this thread has handed to the system for WAL files.
    pub(crate) static WAL_WRITES: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The most bytes one write hands the system's VFS: `unix` takes less than 128 KiB at a
/// time (it keeps only the low 17 bits of a write's length).
const LARGEST_WRITE: usize = 124 << 10;

/// A WAL frame's header: what SQLite writes on its own before each page.
const FRAME_HEADER: usize = 24;

/// What SQLite allocates for a file of this VFS: a [`Handle`], then the system's file.
#[repr(C)]
struct Handle {
    /// What SQLite sees: its methods are [`METHODS`]. First, so a `*mut sqlite3_file` from
    /// SQLite is a `*mut Handle`.
    base: ffi::sqlite3_file,
    /// The system's file, in the same allocation, right after this handle.
    real: *mut ffi::sqlite3_file,
    /// Writes held, for a WAL; `None` for every other file.
    held: Option<Held>,
    /// For a WAL: its database's handle. For a database: its WAL's, while it is open.
    /// Each is the other's, both of one connection, used from its thread alone.
    link: *mut Handle,
    /// For a database: its name as SQLite passed it, the key its WAL finds it by.
    name: *const c_char,
}

/// A WAL's contiguous writes not yet handed to the system.
struct Held {
    /// Where in the file the first held byte goes.
    start: i64,
    bytes: Vec<u8>,
    /// The last write was the header of a commit's frame: its page completes the commit.
    commit_header: bool,
}

/// Where the system's file starts in the allocation (SQLite's allocations are aligned to 8).
const OFFSET: usize = size_of::<Handle>().next_multiple_of(16);

/// The size of a file of this VFS, over the system's `real` size.
pub(crate) fn size_with(real: c_int) -> c_int {
    // A handle is a few dozen bytes: it fits in a `c_int` with any file SQLite can make.
    c_int::try_from(OFFSET).unwrap_or(c_int::MAX).saturating_add(real)
}

/// Opens `name` with the system's VFS, inside `file` (of [`size_with`] bytes), and holds a
/// WAL's writes.
///
/// # Safety
/// Called by SQLite as a VFS's `xOpen`, with this VFS and an allocation of its `szOsFile`.
pub(crate) unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: *const c_char,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: SQLite passes this VFS.
    let base = unsafe { vfs::base(vfs) };
    let handle = file.cast::<Handle>();
    // SAFETY: the allocation is `size_with(real)` bytes: the system's file fits after
    // `OFFSET`.
    let real = unsafe { file.cast::<u8>().add(OFFSET) }.cast::<ffi::sqlite3_file>();
    // SAFETY: `handle` is the start of the allocation, aligned and large enough for a
    // `Handle`; it is written whole before anything reads it. Its methods stay null until
    // the system's file is open, so a failed open leaves nothing for SQLite to close.
    unsafe {
        handle.write(Handle {
            base: ffi::sqlite3_file { pMethods: std::ptr::null() },
            real,
            held: None,
            link: std::ptr::null_mut(),
            name: std::ptr::null(),
        })
    };
    // SAFETY: the base is a VFS valid for the process (`vfs::base`).
    let rc = match unsafe { (*base).xOpen } {
        // SAFETY: the system's open, with the system's VFS and room for its file.
        Some(open) => unsafe { open(base, name, real, flags, out_flags) },
        None => ffi::SQLITE_CANTOPEN,
    };
    // SAFETY: `real` was initialized by the system's open, which sets its methods (null
    // when there is nothing to close), even when it fails.
    if unsafe { (*real).pMethods.is_null() } {
        // SAFETY: written above and not yet dropped; SQLite will not call `close`.
        unsafe { std::ptr::drop_in_place(handle) };
        return if rc == ffi::SQLITE_OK { ffi::SQLITE_CANTOPEN } else { rc };
    }
    // SAFETY: as above; SQLite calls `close` from now on, even if the open failed.
    unsafe { (*handle).base.pMethods = &METHODS };
    if rc == ffi::SQLITE_OK && !name.is_null() {
        if flags & ffi::SQLITE_OPEN_MAIN_DB != 0 {
            // SAFETY: the handle was written above and is this connection's.
            unsafe { (*handle).name = name };
            databases().push(Open { name: name as usize, handle: handle as usize });
        } else if flags & ffi::SQLITE_OPEN_WAL != 0 {
            // SAFETY: SQLite passes a WAL's name from the block that holds its database's
            // name (the database's own `xOpen` got that same pointer).
            let database = unsafe { ffi::sqlite3_filename_database(name) };
            let found = databases().iter().find(|open| open.name == database as usize).map(|open| open.handle);
            // A WAL whose database was not opened here is written as it comes: nothing
            // would hand over its writes before the write lock is released.
            if let Some(database) = found {
                let database = database as *mut Handle;
                // SAFETY: both handles are open files of this connection (a database stays
                // open while its WAL is), used from its thread alone.
                unsafe {
                    (*database).link = handle;
                    (*handle).link = database;
                    (*handle).held = Some(Held { start: 0, bytes: Vec::new(), commit_header: false });
                }
            }
        }
    }
    rc
}

/// An open database of this VFS, by the address of the name SQLite opened it with.
struct Open {
    name: usize,
    handle: usize,
}

/// The databases open through this VFS, for their WALs to find: every connection's, each
/// under a name pointer of its own.
fn databases() -> std::sync::MutexGuard<'static, Vec<Open>> {
    static DATABASES: std::sync::Mutex<Vec<Open>> = std::sync::Mutex::new(Vec::new());
    // A panic while it was held left a list that is still whole.
    DATABASES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 3,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
    xFetch: Some(fetch),
    xUnfetch: Some(unfetch),
};

/// The handle of a file SQLite passes to a method.
///
/// # Safety
/// `file` is a file of this VFS that [`open`] opened and [`close`] has not closed; SQLite
/// calls a file's methods from one thread at a time.
unsafe fn handle<'a>(file: *mut ffi::sqlite3_file) -> &'a mut Handle {
    // SAFETY: as the caller promises; `base` is the handle's first field.
    unsafe { &mut *file.cast::<Handle>() }
}

impl Handle {
    /// The system file's methods.
    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: `open` kept this handle only once the system's open set its methods,
        // which are static in the system's VFS.
        unsafe { &*(*self.real).pMethods }
    }

    /// Hands the held writes to the system as one write; the system's result.
    fn flush(&mut self) -> c_int {
        let (real, write) = (self.real, self.methods().xWrite);
        let Some(held) = self.held.as_mut().filter(|held| !held.bytes.is_empty()) else {
            return ffi::SQLITE_OK;
        };
        held.commit_header = false;
        let mut rc = ffi::SQLITE_OK;
        for (i, chunk) in held.bytes.chunks(LARGEST_WRITE).enumerate() {
            let at = held.start + (i * LARGEST_WRITE) as i64;
            rc = match (write, c_int::try_from(chunk.len())) {
                // SAFETY: the system's write of bytes this handle owns, on its own file.
                (Some(write), Ok(len)) => unsafe { write(real, chunk.as_ptr().cast(), len, at) },
                _ => ffi::SQLITE_IOERR_WRITE,
            };
            #[cfg(test)]
            WAL_WRITES.with(|writes| writes.set(writes.get() + 1));
            if rc != ffi::SQLITE_OK {
                break;
            }
        }
        // Written or not, they are gone: a failed write fails the transaction that made them,
        // which SQLite rolls back, and whose frames it writes again.
        held.bytes.clear();
        rc
    }

    /// For a database, hands its WAL's held writes over. A failure leaves nothing held: the
    /// writes belonged to a transaction that is over (rolled back), or SQLite is past the
    /// commit that wrote them out.
    fn flush_wal(&mut self) {
        if self.held.is_none() && !self.link.is_null() {
            // SAFETY: the linked WAL is open (see `Handle::link`), of this connection.
            unsafe { (*self.link).flush() };
        }
    }

    /// Flushes first if the held writes overlap `len` bytes at `offset`.
    fn flush_overlapping(&mut self, offset: i64, len: c_int) -> c_int {
        match &self.held {
            Some(held) if offset < held.start + held.bytes.len() as i64 && offset + i64::from(len) > held.start => {
                self.flush()
            }
            _ => ffi::SQLITE_OK,
        }
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: SQLite closes a file of this VFS once, and never uses it after.
    let handle = unsafe { handle(file) };
    let flushed = handle.flush();
    if !handle.link.is_null() {
        // SAFETY: the linked handle is still open (see `Handle::link`); it forgets this one.
        unsafe { (*handle.link).link = std::ptr::null_mut() };
    }
    if !handle.name.is_null() {
        databases().retain(|open| open.name != handle.name as usize);
    }
    let closed = match handle.methods().xClose {
        // SAFETY: the system's close of its own file.
        Some(close) => unsafe { close(handle.real) },
        None => ffi::SQLITE_OK,
    };
    // SAFETY: the handle was written by `open`, and this is its last use.
    unsafe { std::ptr::drop_in_place(std::ptr::from_mut(handle)) };
    if flushed == ffi::SQLITE_OK { closed } else { flushed }
}

unsafe extern "C" fn read(file: *mut ffi::sqlite3_file, out: *mut c_void, len: c_int, offset: i64) -> c_int {
    // SAFETY: a file of this VFS, from SQLite.
    let handle = unsafe { handle(file) };
    let flushed = handle.flush_overlapping(offset, len);
    if flushed != ffi::SQLITE_OK {
        return flushed;
    }
    match handle.methods().xRead {
        // SAFETY: the system's read, with SQLite's own arguments.
        Some(read) => unsafe { read(handle.real, out, len, offset) },
        None => ffi::SQLITE_IOERR_READ,
    }
}

unsafe extern "C" fn write(file: *mut ffi::sqlite3_file, data: *const c_void, len: c_int, offset: i64) -> c_int {
    // SAFETY: a file of this VFS, from SQLite.
    let handle = unsafe { handle(file) };
    if handle.held.is_none() {
        return match handle.methods().xWrite {
            // SAFETY: the system's write, with SQLite's own arguments.
            Some(write) => unsafe { write(handle.real, data, len, offset) },
            None => ffi::SQLITE_IOERR_WRITE,
        };
    }
    let Ok(size) = usize::try_from(len) else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    // SAFETY: SQLite passes `len` readable bytes at `data`, kept until the call returns.
    let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
    let follows = match &handle.held {
        Some(held) => held.bytes.is_empty() || (offset >= held.start && offset <= held.start + held.bytes.len() as i64),
        None => false,
    };
    if !follows {
        let flushed = handle.flush();
        if flushed != ffi::SQLITE_OK {
            return flushed;
        }
    }
    let Some(held) = handle.held.as_mut() else {
        return ffi::SQLITE_IOERR_WRITE;
    };
    if held.bytes.is_empty() {
        held.start = offset;
    }
    // Within or right after what is held (SQLite rewrites a frame it wrote earlier in the
    // same transaction in place).
    let at = usize::try_from(offset - held.start).unwrap_or(usize::MAX);
    let end = at.saturating_add(size);
    if end > held.bytes.len() {
        held.bytes.resize(end, 0);
    }
    held.bytes[at..end].copy_from_slice(bytes);
    // A frame's header holds, at bytes 4 to 8, the database's size after the commit it
    // ends, and zero in every other frame: the page that follows completes a commit.
    let completes_commit = std::mem::replace(&mut held.commit_header, false);
    if size == FRAME_HEADER && bytes[4..8] != [0; 4] {
        held.commit_header = true;
    }
    if completes_commit || held.bytes.len() > BUFFER_LIMIT { handle.flush() } else { ffi::SQLITE_OK }
}

/// Forwards a method to the system's file, after flushing what it holds: `$default` when
/// the system's file has no such method.
macro_rules! flush_then_forward {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*), $default:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> c_int {
            // SAFETY: a file of this VFS, from SQLite.
            let handle = unsafe { handle(file) };
            let flushed = handle.flush();
            if flushed != ffi::SQLITE_OK {
                return flushed;
            }
            match handle.methods().$field {
                // SAFETY: the system's method on its own file, with SQLite's arguments.
                Some(method) => unsafe { method(handle.real $(, $arg)*) },
                None => $default,
            }
        }
    };
}

/// Forwards a method to the system's file as it is: `$default` when it has no such method.
macro_rules! forward {
    ($name:ident, $field:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty, $default:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file $(, $arg: $ty)*) -> $ret {
            // SAFETY: a file of this VFS, from SQLite.
            let handle = unsafe { handle(file) };
            match handle.methods().$field {
                // SAFETY: the system's method on its own file, with SQLite's arguments.
                Some(method) => unsafe { method(handle.real $(, $arg)*) },
                None => $default,
            }
        }
    };
}

flush_then_forward!(truncate, xTruncate, (size: i64), ffi::SQLITE_IOERR_TRUNCATE);
flush_then_forward!(sync, xSync, (flags: c_int), ffi::SQLITE_IOERR_FSYNC);
flush_then_forward!(file_size, xFileSize, (size: *mut i64), ffi::SQLITE_IOERR_FSTAT);
flush_then_forward!(file_control, xFileControl, (op: c_int, arg: *mut c_void), ffi::SQLITE_NOTFOUND);
forward!(lock, xLock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_LOCK);
forward!(unlock, xUnlock, (level: c_int) -> c_int, ffi::SQLITE_IOERR_UNLOCK);
forward!(check_reserved_lock, xCheckReservedLock, (out: *mut c_int) -> c_int, ffi::SQLITE_IOERR_CHECKRESERVEDLOCK);
forward!(sector_size, xSectorSize, () -> c_int, 4096);
forward!(device_characteristics, xDeviceCharacteristics, () -> c_int, 0);
forward!(shm_map, xShmMap, (page: c_int, size: c_int, extend: c_int, out: *mut *mut c_void) -> c_int, ffi::SQLITE_IOERR_SHMMAP);

/// A database's lock on its shared memory: its WAL's writes are handed over first. When a
/// write transaction ends without a commit (rolled back), SQLite releases the WAL's write
/// lock here, and the frames it wrote must be in the file before another connection may
/// write there, as they would be on the system's VFS.
unsafe extern "C" fn shm_lock(file: *mut ffi::sqlite3_file, offset: c_int, n: c_int, flags: c_int) -> c_int {
    // SAFETY: a file of this VFS, from SQLite.
    let handle = unsafe { handle(file) };
    handle.flush_wal();
    match handle.methods().xShmLock {
        // SAFETY: the system's method on its own file, with SQLite's arguments.
        Some(lock) => unsafe { lock(handle.real, offset, n, flags) },
        None => ffi::SQLITE_IOERR_SHMLOCK,
    }
}

/// A database's barrier, which SQLite crosses between writing a commit's index and
/// publishing it: its WAL's writes are handed over first (they already are, at the end of
/// the commit's last frame).
unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: a file of this VFS, from SQLite.
    let handle = unsafe { handle(file) };
    handle.flush_wal();
    if let Some(barrier) = handle.methods().xShmBarrier {
        // SAFETY: the system's method on its own file.
        unsafe { barrier(handle.real) }
    }
}
forward!(shm_unmap, xShmUnmap, (delete: c_int) -> c_int, ffi::SQLITE_OK);
forward!(unfetch, xUnfetch, (offset: i64, page: *mut c_void) -> c_int, ffi::SQLITE_OK);

unsafe extern "C" fn fetch(file: *mut ffi::sqlite3_file, offset: i64, len: c_int, out: *mut *mut c_void) -> c_int {
    // SAFETY: a file of this VFS, from SQLite.
    let handle = unsafe { handle(file) };
    match handle.methods().xFetch {
        // SAFETY: the system's method on its own file, with SQLite's arguments.
        Some(fetch) => unsafe { fetch(handle.real, offset, len, out) },
        None => {
            // No memory map: SQLite reads instead.
            // SAFETY: SQLite passes a place for the pointer.
            unsafe { *out = std::ptr::null_mut() };
            ffi::SQLITE_OK
        }
    }
}
