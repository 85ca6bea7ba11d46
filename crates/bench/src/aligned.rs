//! A page-aligned buffer, as O_DIRECT requires.

use std::alloc::{alloc_zeroed, dealloc, Layout};

pub struct AlignedBuf {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the buffer is uniquely owned; it is plain memory.
unsafe impl Send for AlignedBuf {}

const ALIGN: usize = 4096;

impl AlignedBuf {
    pub fn new(len: usize) -> Option<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(ALIGN).next_multiple_of(ALIGN), ALIGN).ok()?;
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        Some(AlignedBuf { ptr, layout })
    }

    pub fn as_mut_slice(&mut self, len: usize) -> &mut [u8] {
        let len = len.min(self.layout.size());
        // SAFETY: ptr is valid for layout.size() bytes and uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }

    pub fn as_slice(&self, len: usize) -> &[u8] {
        let len = len.min(self.layout.size());
        // SAFETY: ptr is valid for layout.size() bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}
