//! The C ABI `verify` calls, declared here from the public API documentation (NCCL's "API" pages —
//! communicator creation, collective operations, group calls, types — and the CUDA Runtime API /
//! HIP Runtime API references), and loaded at run time with `libloading`.
//!
//! RCCL exports the same NCCL C API (`librccl.so.1`), so one table serves both; the GPU runtime is
//! CUDA's `libcudart.so.N` or HIP's `libamdhip64.so.N`, whose functions used here share signatures
//! and differ only in the `cuda`/`hip` prefix. Only `cudaError_t`/`hipError_t` values differ in a
//! few places, which [`runtime_error_name`] knows.
//!
//! [`Nccl`] and [`Runtime`] keep their function pointers private and offer safe methods: every
//! `unsafe` call into the libraries is in this file, each with a `SAFETY` note. Device memory is a
//! [`DeviceBuffer`] (address and size, checked against each copy); communicators, streams and
//! events are opaque handles the libraries validate. `doctor`'s HIP probe uses [`Runtime`] too.

use std::ffi::{c_char, c_float, c_int, c_void, CStr};
use std::path::{Path, PathBuf};

use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

pub use super::codes::{
    nccl_result, nccl_result_name, runtime_error_name, NcclError, RuntimeError, RuntimeKind,
    CUDA_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED, ERROR_ILLEGAL_STATE, ERROR_NOT_READY,
    HIP_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED, MEMCPY_DEVICE_TO_HOST, MEMCPY_HOST_TO_DEVICE, NCCL_SUM,
};

/// `ncclComm_t`: an opaque pointer to a communicator.
pub type NcclComm = *mut c_void;

/// A device allocation from [`Runtime::malloc`] (or a part of one, [`DeviceBuffer::slice`]): its
/// address and size in bytes. Host code never dereferences the address; [`Runtime::upload`],
/// [`Runtime::download`], [`Runtime::memset`] and the collectives check their lengths against
/// `bytes`. `Copy`, like the address it wraps: [`Runtime::free`] frees the allocation once.
#[derive(Debug, Clone, Copy)]
pub struct DeviceBuffer {
    ptr: *mut c_void,
    bytes: usize,
}

impl DeviceBuffer {
    /// No allocation (address null, 0 bytes): a placeholder before [`Runtime::malloc`].
    pub fn null() -> DeviceBuffer {
        DeviceBuffer {
            ptr: std::ptr::null_mut(),
            bytes: 0,
        }
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The `len` bytes at `offset` of this buffer; `None` when they do not lie inside it.
    pub fn slice(&self, offset: usize, len: usize) -> Option<DeviceBuffer> {
        let end = offset.checked_add(len)?;
        if end > self.bytes {
            return None;
        }
        Some(DeviceBuffer {
            // `wrapping_add` computes the address without dereferencing it (it is a device
            // address); the range check above keeps it inside the allocation.
            ptr: self.ptr.cast::<u8>().wrapping_add(offset).cast(),
            bytes: len,
        })
    }
}

/// Size in bytes of an `ncclDataType_t` element (nccl.h: int8 0, uint8 1, int32 2, uint32 3, int64
/// 4, uint64 5, float16 6, float32 7, float64 8, bfloat16 9); `None` for other values.
pub fn nccl_type_size(datatype: c_int) -> Option<usize> {
    match datatype {
        0 | 1 => Some(1),
        2 | 3 | 7 => Some(4),
        4 | 5 | 8 => Some(8),
        6 | 9 => Some(2),
        _ => None,
    }
}
/// `cudaStream_t` / `hipStream_t`: an opaque pointer.
pub type Stream = *mut c_void;
/// `cudaEvent_t` / `hipEvent_t`: an opaque pointer.
pub type Event = *mut c_void;

/// `ncclUniqueId`: `struct { char internal[NCCL_UNIQUE_ID_BYTES]; }` with 128 bytes, passed by value
/// to `ncclCommInitRank`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NcclUniqueId {
    /// The opaque bytes.
    pub internal: [u8; 128],
}

/// The NCCL C API functions `verify` calls, resolved from one library; the calls are its methods.
pub struct Nccl {
    /// Path given to `dlopen`.
    pub path: PathBuf,
    /// `ncclResult_t ncclGetVersion(int* version)`.
    get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    /// `ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId)`.
    get_unique_id: unsafe extern "C" fn(*mut NcclUniqueId) -> c_int,
    /// `ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank)`.
    comm_init_rank: unsafe extern "C" fn(*mut NcclComm, c_int, NcclUniqueId, c_int) -> c_int,
    /// `ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist)`.
    comm_init_all: unsafe extern "C" fn(*mut NcclComm, c_int, *const c_int) -> c_int,
    /// `ncclResult_t ncclCommDestroy(ncclComm_t comm)`.
    comm_destroy: unsafe extern "C" fn(NcclComm) -> c_int,
    /// `ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
    /// ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)`.
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        NcclComm,
        Stream,
    ) -> c_int,
    /// `ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
    /// ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)`.
    all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, NcclComm, Stream) -> c_int,
    /// `ncclResult_t ncclGroupStart(void)`.
    group_start: unsafe extern "C" fn() -> c_int,
    /// `ncclResult_t ncclGroupEnd(void)`.
    group_end: unsafe extern "C" fn() -> c_int,
    /// `const char* ncclGetErrorString(ncclResult_t result)`.
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    /// `const char* ncclGetLastError(ncclComm_t comm)` (NCCL ≥ 2.13; absent in older RCCL).
    get_last_error: Option<unsafe extern "C" fn(NcclComm) -> *const c_char>,
    _lib: Library,
}

/// Why a library could not be loaded (leaf error: `doctor`'s HIP probe tells the two apart).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// `dlopen` failed (the source is `dlerror`'s text: a missing file or dependency).
    #[error("cannot load {}", path.display())]
    Open {
        /// The path or name given to `dlopen`.
        path: PathBuf,
        /// The loader's error.
        #[source]
        source: libloading::Error,
    },
    /// A required symbol is missing: not the library the caller expected.
    #[error("{} does not export {name}", path.display())]
    MissingSymbol {
        /// The library.
        path: PathBuf,
        /// The symbol.
        name: String,
        /// The loader's error.
        #[source]
        source: libloading::Error,
    },
}

fn open(path: &Path) -> Result<Library, LoadError> {
    // SAFETY: loading runs the library's constructors; that is the point of verify and of
    // doctor's probe, and both happen in a child process, so a crash there cannot take rcclfix
    // down.
    unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|source| LoadError::Open {
        path: path.to_owned(),
        source,
    })
}

/// Resolve `name` in `lib` as a function pointer of type `T`.
///
/// Safety: `T` must be the function's true C signature.
unsafe fn sym<T: Copy>(lib: &Library, path: &Path, name: &str) -> Result<T, LoadError> {
    // SAFETY: the caller guarantees `T` is the symbol's signature.
    let s =
        unsafe { lib.get::<T>(name.as_bytes()) }.map_err(|source| LoadError::MissingSymbol {
            path: path.to_owned(),
            name: name.to_owned(),
            source,
        })?;
    Ok(*s)
}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the library returns a NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

// The pointer arguments below are device addresses and runtime/NCCL handles that host code never
// dereferences; they go straight to the C API, which validates them and returns an error code.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl Nccl {
    /// `dlopen` the library (`RTLD_NOW | RTLD_LOCAL`) and resolve every function.
    ///
    /// Errors: the file cannot be loaded (the `dlerror` text names a missing dependency), or a
    /// required symbol is missing (not an NCCL-API library).
    pub fn load(path: &Path) -> Result<Nccl, LoadError> {
        let lib = open(path)?;
        // SAFETY: the signatures above follow the NCCL API documentation.
        unsafe {
            Ok(Nccl {
                path: path.to_owned(),
                get_version: sym(&lib, path, "ncclGetVersion")?,
                get_unique_id: sym(&lib, path, "ncclGetUniqueId")?,
                comm_init_rank: sym(&lib, path, "ncclCommInitRank")?,
                comm_init_all: sym(&lib, path, "ncclCommInitAll")?,
                comm_destroy: sym(&lib, path, "ncclCommDestroy")?,
                all_reduce: sym(&lib, path, "ncclAllReduce")?,
                all_gather: sym(&lib, path, "ncclAllGather")?,
                group_start: sym(&lib, path, "ncclGroupStart")?,
                group_end: sym(&lib, path, "ncclGroupEnd")?,
                get_error_string: sym(&lib, path, "ncclGetErrorString")?,
                get_last_error: sym(&lib, path, "ncclGetLastError").ok(),
                _lib: lib,
            })
        }
    }

    /// Turn an `ncclResult_t` into `Ok` or an [`NcclError`] naming `call`.
    pub fn check(&self, call: &str, r: c_int, comm: NcclComm) -> Result<(), NcclError> {
        if r == nccl_result::SUCCESS {
            return Ok(());
        }
        // SAFETY: both functions take plain values and return static strings.
        let text = cstr(unsafe { (self.get_error_string)(r) });
        let last = self
            .get_last_error
            // SAFETY: takes the communicator handle (or null), returns a string the library owns.
            .map(|f| cstr(unsafe { f(comm) }))
            .filter(|s| !s.is_empty());
        Err(NcclError {
            call: call.to_owned(),
            result: r,
            name: nccl_result_name(r).to_owned(),
            text,
            last,
        })
    }

    /// `ncclGetVersion`: the version code, MAJOR·10000 + MINOR·100 + PATCH (≥ 2.9).
    pub fn version(&self) -> Result<i32, NcclError> {
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        let r = unsafe { (self.get_version)(&mut v) };
        self.check("ncclGetVersion", r, std::ptr::null_mut())?;
        Ok(v)
    }

    /// Address of `ncclGetVersion` in this process, to find the mapped file it came from.
    pub fn symbol_address(&self) -> usize {
        self.get_version as usize
    }

    /// `ncclGetUniqueId`: a new communicator id (rank 0 creates it, the other ranks receive it).
    pub fn unique_id(&self) -> Result<NcclUniqueId, NcclError> {
        let mut uid = NcclUniqueId { internal: [0; 128] };
        // SAFETY: writes one 128-byte `ncclUniqueId`.
        let r = unsafe { (self.get_unique_id)(&mut uid) };
        self.check("ncclGetUniqueId", r, std::ptr::null_mut())?;
        Ok(uid)
    }

    /// `ncclCommInitAll`: one communicator per device of `devices`, in this process.
    pub fn comm_init_all(&self, devices: &[c_int]) -> Result<Vec<NcclComm>, NcclError> {
        let mut comms: Vec<NcclComm> = vec![std::ptr::null_mut(); devices.len()];
        // SAFETY: `comms` has room for `devices.len()` handles and `devices` that many ints.
        let r = unsafe {
            (self.comm_init_all)(comms.as_mut_ptr(), devices.len() as c_int, devices.as_ptr())
        };
        self.check("ncclCommInitAll", r, std::ptr::null_mut())?;
        Ok(comms)
    }

    /// `ncclCommInitRank`: this process's communicator as `rank` of `nranks`.
    pub fn comm_init_rank(
        &self,
        nranks: usize,
        id: NcclUniqueId,
        rank: usize,
    ) -> Result<NcclComm, NcclError> {
        let mut comm: NcclComm = std::ptr::null_mut();
        // SAFETY: writes one handle; the id is passed by value.
        let r = unsafe { (self.comm_init_rank)(&mut comm, nranks as c_int, id, rank as c_int) };
        self.check("ncclCommInitRank", r, std::ptr::null_mut())?;
        Ok(comm)
    }

    /// `ncclCommDestroy`.
    pub fn comm_destroy(&self, comm: NcclComm) -> Result<(), NcclError> {
        // SAFETY: `comm` came from `comm_init_*`; the library validates it.
        let r = unsafe { (self.comm_destroy)(comm) };
        self.check("ncclCommDestroy", r, std::ptr::null_mut())
    }

    /// `ncclGroupStart`.
    pub fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        let r = unsafe { (self.group_start)() };
        self.check("ncclGroupStart", r, std::ptr::null_mut())
    }

    /// `ncclGroupEnd`.
    pub fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        let r = unsafe { (self.group_end)() };
        self.check("ncclGroupEnd", r, std::ptr::null_mut())
    }

    /// `ncclAllReduce` of `count` elements of `datatype` with `op`, enqueued on `stream`.
    ///
    /// Errors: an `ncclInvalidArgument` [`NcclError`] (without calling the library) when a buffer
    /// holds fewer than `count` elements or `datatype` is unknown; else the library's result.
    #[allow(clippy::too_many_arguments)]
    pub fn all_reduce(
        &self,
        send: DeviceBuffer,
        recv: DeviceBuffer,
        count: usize,
        datatype: c_int,
        op: c_int,
        comm: NcclComm,
        stream: Stream,
    ) -> Result<(), NcclError> {
        let need = self.elements("ncclAllReduce", count, datatype)?;
        if send.bytes < need || recv.bytes < need {
            return Err(self.too_small("ncclAllReduce"));
        }
        // SAFETY: both buffers are device allocations holding `count` elements (checked above);
        // comm and stream are handles of this library and runtime, which validate them.
        let r = unsafe { (self.all_reduce)(send.ptr, recv.ptr, count, datatype, op, comm, stream) };
        self.check("ncclAllReduce", r, comm)
    }

    /// `ncclAllGather` of `count` elements of `datatype` per rank into `recv` (`nranks × count`
    /// elements), enqueued on `stream`. Errors like [`Nccl::all_reduce`].
    #[allow(clippy::too_many_arguments)]
    pub fn all_gather(
        &self,
        send: DeviceBuffer,
        recv: DeviceBuffer,
        count: usize,
        datatype: c_int,
        nranks: usize,
        comm: NcclComm,
        stream: Stream,
    ) -> Result<(), NcclError> {
        let need = self.elements("ncclAllGather", count, datatype)?;
        if send.bytes < need || need.checked_mul(nranks).is_none_or(|n| recv.bytes < n) {
            return Err(self.too_small("ncclAllGather"));
        }
        // SAFETY: `send` holds `count` elements and `recv` `nranks × count` (checked above);
        // comm and stream are handles of this library and runtime, which validate them.
        let r = unsafe { (self.all_gather)(send.ptr, recv.ptr, count, datatype, comm, stream) };
        self.check("ncclAllGather", r, comm)
    }

    /// `count` elements of `datatype` in bytes, or an `ncclInvalidArgument` error.
    fn elements(&self, call: &str, count: usize, datatype: c_int) -> Result<usize, NcclError> {
        nccl_type_size(datatype)
            .and_then(|s| s.checked_mul(count))
            .ok_or_else(|| NcclError {
                call: call.to_owned(),
                result: 4,
                name: nccl_result_name(4).to_owned(),
                text: format!("unknown datatype {datatype} or count {count} too large"),
                last: None,
            })
    }

    fn too_small(&self, call: &str) -> NcclError {
        NcclError {
            call: call.to_owned(),
            result: 4,
            name: nccl_result_name(4).to_owned(),
            text: "a device buffer is smaller than the collective needs".into(),
            last: None,
        }
    }
}

/// Format an NCCL version code: 22803 → `2.28.3` (codes below 10000 are the old `MAJOR·1000 +
/// MINOR·100 + PATCH` form).
pub fn format_nccl_version(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// The GPU runtime functions `verify` calls.
pub struct Runtime {
    /// CUDA or HIP.
    pub kind: RuntimeKind,
    /// Path given to `dlopen`.
    pub path: PathBuf,
    set_device: unsafe extern "C" fn(c_int) -> c_int,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> c_int,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> c_int,
    free: unsafe extern "C" fn(*mut c_void) -> c_int,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int,
    memset: unsafe extern "C" fn(*mut c_void, c_int, usize) -> c_int,
    stream_create: unsafe extern "C" fn(*mut Stream) -> c_int,
    stream_query: unsafe extern "C" fn(Stream) -> c_int,
    stream_synchronize: unsafe extern "C" fn(Stream) -> c_int,
    event_create: unsafe extern "C" fn(*mut Event) -> c_int,
    event_record: unsafe extern "C" fn(Event, Stream) -> c_int,
    event_elapsed_time: unsafe extern "C" fn(*mut c_float, Event, Event) -> c_int,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_last_error: unsafe extern "C" fn() -> c_int,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int,
    /// `RuntimeGetVersion` (doctor's probe; optional, so a minimal runtime still loads).
    runtime_get_version: Option<unsafe extern "C" fn(*mut c_int) -> c_int>,
    /// `DeviceGetPCIBusId(char*, int len, int device)` (doctor's probe; optional).
    device_get_pci_bus_id: Option<unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int>,
    _lib: Library,
}

// The pointer arguments below are device addresses and runtime/NCCL handles that host code never
// dereferences; they go straight to the C API, which validates them and returns an error code.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl Runtime {
    /// `dlopen` the runtime (`RTLD_NOW | RTLD_LOCAL`) and resolve every function with the
    /// `cuda`/`hip` prefix. Errors like [`Nccl::load`].
    pub fn load(kind: RuntimeKind, path: &Path) -> Result<Runtime, LoadError> {
        let lib = open(path)?;
        let p = kind.prefix();
        let n = |s: &str| format!("{p}{s}");
        // SAFETY: the signatures follow the CUDA/HIP runtime API references.
        unsafe {
            let set_device = sym(&lib, path, &n("SetDevice"))?;
            let event_elapsed_time = match sym(&lib, path, &n("EventElapsedTime")) {
                Ok(f) => f,
                Err(_) => sym(&lib, path, &n("EventElapsedTime_v2"))?,
            };
            Ok(Runtime {
                kind,
                path: path.to_owned(),
                set_device,
                get_device_count: sym(&lib, path, &n("GetDeviceCount"))?,
                malloc: sym(&lib, path, &n("Malloc"))?,
                free: sym(&lib, path, &n("Free"))?,
                memcpy: sym(&lib, path, &n("Memcpy"))?,
                memset: sym(&lib, path, &n("Memset"))?,
                stream_create: sym(&lib, path, &n("StreamCreate"))?,
                stream_query: sym(&lib, path, &n("StreamQuery"))?,
                stream_synchronize: sym(&lib, path, &n("StreamSynchronize"))?,
                event_create: sym(&lib, path, &n("EventCreate"))?,
                event_record: sym(&lib, path, &n("EventRecord"))?,
                event_elapsed_time,
                get_error_string: sym(&lib, path, &n("GetErrorString"))?,
                get_last_error: sym(&lib, path, &n("GetLastError"))?,
                device_get_attribute: sym(&lib, path, &n("DeviceGetAttribute"))?,
                runtime_get_version: sym(&lib, path, &n("RuntimeGetVersion")).ok(),
                device_get_pci_bus_id: sym(&lib, path, &n("DeviceGetPCIBusId")).ok(),
                _lib: lib,
            })
        }
    }

    /// Address of `SetDevice` in this process, to find the mapped file it came from.
    pub fn symbol_address(&self) -> usize {
        self.set_device as usize
    }

    /// Turn a runtime return code into `Ok` or a [`RuntimeError`] naming `call` (without prefix).
    pub fn check(&self, call: &str, code: c_int) -> Result<(), RuntimeError> {
        if code == 0 {
            return Ok(());
        }
        Err(self.error(format!("{}{call}", self.kind.prefix()), code))
    }

    /// A [`RuntimeError`] for `code`, with the runtime's own text for it.
    pub fn error(&self, call: String, code: c_int) -> RuntimeError {
        // SAFETY: returns a static string for any code.
        let text = cstr(unsafe { (self.get_error_string)(code) });
        RuntimeError {
            call,
            code,
            name: runtime_error_name(self.kind, code),
            text,
        }
    }

    /// `GetLastError`: the last error any runtime call returned in this thread (and reset it).
    pub fn last_error(&self) -> i32 {
        // SAFETY: no arguments.
        unsafe { (self.get_last_error)() }
    }

    /// `GetDeviceCount`.
    pub fn device_count(&self) -> Result<i32, RuntimeError> {
        let mut n: c_int = 0;
        // SAFETY: writes one int.
        self.check("GetDeviceCount", unsafe { (self.get_device_count)(&mut n) })?;
        Ok(n)
    }

    /// `SetDevice`.
    pub fn set_device(&self, dev: i32) -> Result<(), RuntimeError> {
        // SAFETY: plain value.
        self.check("SetDevice", unsafe { (self.set_device)(dev) })
    }

    /// `DeviceGetAttribute(attr, dev)`: the attribute's value.
    pub fn device_attribute(&self, attr: c_int, dev: i32) -> Result<i32, RuntimeError> {
        let mut v: c_int = -1;
        // SAFETY: writes one int.
        self.check("DeviceGetAttribute", unsafe {
            (self.device_get_attribute)(&mut v, attr, dev)
        })?;
        Ok(v)
    }

    /// The `hostNativeAtomicSupported` attribute of this runtime flavour.
    pub fn host_native_atomic_attribute(&self) -> c_int {
        match self.kind {
            RuntimeKind::Hip => HIP_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED,
            RuntimeKind::Cuda => CUDA_ATTR_HOST_NATIVE_ATOMIC_SUPPORTED,
        }
    }

    /// Whether the link between `dev` and the host supports native atomics
    /// (`hostNativeAtomicSupported`); `None` when the runtime cannot say.
    pub fn host_native_atomics(&self, dev: i32) -> Option<bool> {
        match self.device_attribute(self.host_native_atomic_attribute(), dev) {
            Ok(v) => Some(v != 0),
            Err(_) => {
                self.last_error();
                None
            }
        }
    }

    /// `RuntimeGetVersion` (HIP: e.g. 60443483 for 6.4.43483); `None` when the library lacks it.
    pub fn runtime_version(&self) -> Option<Result<i32, RuntimeError>> {
        let f = self.runtime_get_version?;
        let mut v: c_int = 0;
        // SAFETY: writes one int.
        Some(
            self.check("RuntimeGetVersion", unsafe { f(&mut v) })
                .map(|()| v),
        )
    }

    /// `DeviceGetPCIBusId`: the device's PCI address as the runtime prints it (`0000:03:00.0`);
    /// `None` when the library lacks the call.
    pub fn pci_bus_id(&self, dev: i32) -> Option<Result<String, RuntimeError>> {
        let f = self.device_get_pci_bus_id?;
        let mut buf = [0 as c_char; 64];
        // SAFETY: the runtime writes at most `buf.len()` bytes, NUL included.
        let r = unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) };
        if let Err(e) = self.check("DeviceGetPCIBusId", r) {
            return Some(Err(e));
        }
        // Terminated even if the runtime filled the whole buffer.
        buf[buf.len() - 1] = 0;
        Some(Ok(cstr(buf.as_ptr())))
    }

    /// `Malloc` `bytes` on the current device.
    pub fn malloc(&self, bytes: usize) -> Result<DeviceBuffer, RuntimeError> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer.
        self.check("Malloc", unsafe { (self.malloc)(&mut p, bytes.max(1)) })?;
        Ok(DeviceBuffer { ptr: p, bytes })
    }

    /// `Free` an allocation from [`Runtime::malloc`] (once).
    pub fn free(&self, buf: DeviceBuffer) -> Result<(), RuntimeError> {
        // SAFETY: the address came from `malloc` (or is null, which `Free` accepts).
        self.check("Free", unsafe { (self.free)(buf.ptr) })
    }

    /// A `cudaErrorInvalidValue`/`hipErrorInvalidValue` for a copy that does not fit, without
    /// calling the runtime.
    fn does_not_fit(&self, call: &str, want: usize, have: usize) -> RuntimeError {
        RuntimeError {
            call: format!("{}{call}", self.kind.prefix()),
            code: 1,
            name: runtime_error_name(self.kind, 1),
            text: format!("{want} bytes do not fit a device buffer of {have}"),
        }
    }

    /// Synchronous `Memcpy` host → device of `src.len()` bytes into the start of `dst`.
    ///
    /// Errors: `src` is longer than `dst` (invalid value, nothing copied), or the runtime's error.
    pub fn upload(&self, dst: DeviceBuffer, src: &[u8]) -> Result<(), RuntimeError> {
        if src.len() > dst.bytes {
            return Err(self.does_not_fit("Memcpy", src.len(), dst.bytes));
        }
        // SAFETY: `dst` is a device allocation at least `src.len()` long (checked above).
        self.check("Memcpy", unsafe {
            (self.memcpy)(
                dst.ptr,
                src.as_ptr().cast(),
                src.len(),
                MEMCPY_HOST_TO_DEVICE,
            )
        })
    }

    /// `Memset` the first `bytes` bytes of `dst` to `value` (ordered on the default stream, like
    /// `Memcpy`). Errors like [`Runtime::upload`].
    pub fn memset(&self, dst: DeviceBuffer, value: u8, bytes: usize) -> Result<(), RuntimeError> {
        if bytes > dst.bytes {
            return Err(self.does_not_fit("Memset", bytes, dst.bytes));
        }
        // SAFETY: `dst` is a device allocation at least `bytes` long (checked above).
        self.check("Memset", unsafe {
            (self.memset)(dst.ptr, value as c_int, bytes)
        })
    }

    /// Synchronous `Memcpy` device → host of `dst.len()` bytes from the start of `src`.
    /// Errors like [`Runtime::upload`].
    pub fn download(&self, dst: &mut [u8], src: DeviceBuffer) -> Result<(), RuntimeError> {
        if dst.len() > src.bytes {
            return Err(self.does_not_fit("Memcpy", dst.len(), src.bytes));
        }
        // SAFETY: `src` is a device allocation at least `dst.len()` long (checked above), and
        // `dst` is host memory of that length.
        self.check("Memcpy", unsafe {
            (self.memcpy)(
                dst.as_mut_ptr().cast(),
                src.ptr,
                dst.len(),
                MEMCPY_DEVICE_TO_HOST,
            )
        })
    }

    /// `StreamCreate` on the current device.
    pub fn stream_create(&self) -> Result<Stream, RuntimeError> {
        let mut s: Stream = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("StreamCreate", unsafe { (self.stream_create)(&mut s) })?;
        Ok(s)
    }

    /// `StreamQuery`: `Ok(true)` when all work is done, `Ok(false)` while pending.
    pub fn stream_done(&self, s: Stream) -> Result<bool, RuntimeError> {
        // SAFETY: `s` came from `stream_create`.
        let r = unsafe { (self.stream_query)(s) };
        if r == ERROR_NOT_READY {
            return Ok(false);
        }
        self.check("StreamQuery", r)?;
        Ok(true)
    }

    /// `StreamSynchronize` (blocks; only used where the stream is known to be done or nearly).
    pub fn stream_synchronize(&self, s: Stream) -> Result<(), RuntimeError> {
        // SAFETY: `s` came from `stream_create`.
        self.check("StreamSynchronize", unsafe { (self.stream_synchronize)(s) })
    }

    /// `EventCreate` on the current device.
    pub fn event_create(&self) -> Result<Event, RuntimeError> {
        let mut e: Event = std::ptr::null_mut();
        // SAFETY: writes one handle.
        self.check("EventCreate", unsafe { (self.event_create)(&mut e) })?;
        Ok(e)
    }

    /// `EventRecord`.
    pub fn event_record(&self, e: Event, s: Stream) -> Result<(), RuntimeError> {
        // SAFETY: handles from this runtime.
        self.check("EventRecord", unsafe { (self.event_record)(e, s) })
    }

    /// `EventElapsedTime` in milliseconds between two completed events.
    pub fn elapsed_ms(&self, start: Event, stop: Event) -> Result<f32, RuntimeError> {
        let mut ms: c_float = 0.0;
        // SAFETY: handles from this runtime; writes one float.
        self.check("EventElapsedTime", unsafe {
            (self.event_elapsed_time)(&mut ms, start, stop)
        })?;
        Ok(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_buffer_slices_stay_inside_the_allocation() {
        let b = DeviceBuffer {
            ptr: 0x1000 as *mut c_void,
            bytes: 64,
        };
        let s = b.slice(16, 32).unwrap();
        assert_eq!((s.ptr as usize, s.bytes()), (0x1010, 32));
        assert!(b.slice(33, 32).is_none());
        assert!(b.slice(usize::MAX, 2).is_none());
        assert_eq!(b.slice(64, 0).unwrap().bytes(), 0);
    }

    #[test]
    fn nccl_type_sizes_follow_nccl_h() {
        assert_eq!(nccl_type_size(7), Some(4));
        assert_eq!(nccl_type_size(6), Some(2));
        assert_eq!(nccl_type_size(9), Some(2));
        assert_eq!(nccl_type_size(42), None);
    }
}
