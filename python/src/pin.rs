//! A caller's array, pinned while the engine reads or writes it without the GIL.
//!
//! Appends, `train_dict` and gathers with `out=` hand the bytes of a caller's array to
//! engine code that runs with the GIL released, so other Python threads (and, between
//! the slices of a long call, signal handlers: see `interrupt`) run meanwhile. A
//! strong reference keeps the array object alive, but not its memory: NumPy's
//! `arr.resize(n, refcheck=False)` reallocates in place, and a `bytearray` or an
//! `mmap` under an array can grow or close. A [`Pinned`] array rules those out for
//! as long as it lives, so that the engine never touches freed or reallocated
//! memory:
//!
//! - every ndarray from the array down to the one owning the memory gets a weak
//!   reference: `ndarray.resize` refuses to reallocate an array that has one, with
//!   `refcheck` on or off (ValueError). A buffer export would not do this: NumPy
//!   (2.4) resizes with `refcheck=False` under its own exports.
//! - the object under the ndarrays (a `bytearray`, `mmap`, `memoryview`, ...), when
//!   it offers the buffer protocol, gets a buffer export (a `memoryview`): such
//!   objects refuse to resize, close or release while one is held (BufferError).
//!   Objects without the protocol (zring's own `EngineBuffer`, a DLPack capsule)
//!   cannot be freed while referenced.
//!
//! Out of reach: `ndarray.__setstate__` called by hand on a live array frees its
//! memory whatever references, weak references or exports it has (it crashes
//! CPython's own `memoryview` the same way), and a DLPack producer that frees its
//! memory under its own exports (`torch.Tensor.resize_` of the exported tensor)
//! leaves every consumer, NumPy included, with freed memory.
//!
//! What is not prevented is another thread *writing* into the array meanwhile (nor
//! can it be without copying, which the fast paths must not do). The engine reads
//! and writes these bytes through plain slices with non-atomic loads and stores
//! (copies, hashing, compression, `pread`), so under Rust's memory model a concurrent
//! write is a data race, which the language leaves undefined. What the code relies on
//! to keep such a race to torn values: no length, offset or index is ever read from
//! the pinned memory (shapes and ragged offsets are copied, with the GIL held, before
//! it is released), so every access stays inside the pinned range whatever the bytes
//! are, and the memory itself stays allocated and mapped throughout. The same holds
//! for NumPy's own loops that run without the GIL. A torn input can give a record
//! whose checksum does not match its stored bytes; reads of the store then report it
//! as corrupt.

use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyMemoryView, PyWeakrefReference};

use crate::buffer::{data_ptr, is_writeable, nbytes};

/// The bytes of a C-contiguous array whose memory cannot be reallocated or freed while
/// this lives (see the module docs). Drop it with the GIL held, after the engine call.
pub struct Pinned<'py> {
    /// The array (a strong reference: the object stays alive).
    _array: Bound<'py, PyUntypedArray>,
    /// Weak references to every ndarray from the array to the memory's owner.
    _weak: Vec<Bound<'py, PyWeakrefReference>>,
    /// A buffer export of the non-ndarray object under them, if it has the protocol.
    _export: Option<Bound<'py, PyMemoryView>>,
    address: usize,
    len: usize,
}

impl<'py> Pinned<'py> {
    /// Pins a C-contiguous `array` (`what` names it in the error for one that is not).
    pub fn new(array: &Bound<'py, PyUntypedArray>, what: &str) -> PyResult<Self> {
        if !array.is_c_contiguous() {
            return Err(PyValueError::new_err(format!(
                "{what} is not C-contiguous; pass numpy.ascontiguousarray({what})"
            )));
        }
        let mut weak = Vec::new();
        let mut export = None;
        let mut next: Bound<'py, PyAny> = array.clone().into_any();
        loop {
            if next.cast::<PyUntypedArray>().is_err() {
                match PyMemoryView::from(&next) {
                    Ok(view) => export = Some(view),
                    // No buffer protocol: nothing to export (see the module docs).
                    Err(e) if e.is_instance_of::<PyTypeError>(next.py()) => {}
                    // A protocol that refuses (a released memoryview, a closed mmap):
                    // the array's memory is already gone.
                    Err(e) => return Err(e),
                }
                break;
            }
            weak.push(PyWeakrefReference::new(&next)?);
            let base = next.getattr("base")?;
            if base.is_none() {
                break;
            }
            next = base;
        }
        // Read after pinning: from here on the address and size cannot change.
        Ok(Self {
            address: data_ptr(array) as usize,
            len: nbytes(array),
            _array: array.clone(),
            _weak: weak,
            _export: export,
        })
    }

    /// Pins an array that the engine will write into: C-contiguous and writeable.
    pub fn for_writing(array: &Bound<'py, PyUntypedArray>, what: &str) -> PyResult<PinnedMut<'py>> {
        if !is_writeable(array) {
            return Err(PyValueError::new_err(format!("{what} is read-only")));
        }
        Ok(PinnedMut(Self::new(array, what)?))
    }

    /// The array's bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `address..address + len` is the memory of a C-contiguous array,
        // allocated and of this size for as long as `self` lives (pinned in `new`,
        // see the module docs); the slice borrows `self`, so it cannot outlive the
        // pin. len > 0, so the address is not null. Concurrent writes by other
        // threads are the race the module docs describe: no length or index is read
        // from these bytes.
        unsafe { std::slice::from_raw_parts(self.address as *const u8, self.len) }
    }
}

/// A [`Pinned`] array that is writeable.
pub struct PinnedMut<'py>(Pinned<'py>);

impl PinnedMut<'_> {
    /// The array's bytes, to write into.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let pin = &self.0;
        if pin.len == 0 {
            return &mut [];
        }
        // SAFETY: as in `Pinned::bytes`, and the array was writeable when pinned (a
        // flag NumPy only clears, never sets, over memory that cannot be written).
        // The unique borrow of `self` keeps this call from handing out two slices.
        unsafe { std::slice::from_raw_parts_mut(pin.address as *mut u8, pin.len) }
    }
}
