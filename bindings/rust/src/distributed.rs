//! Groups of ranks, one per device, and the collectives over them (docs/distributed.md). Each
//! rank is used by its own thread; every rank calls the same collectives in the same order.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use crate::llm::Device;
use crate::{check, make, sys, Array, Error, Result};

/// One rank of a group. Dropping it releases this handle; the group lives while any rank or op
/// holds it.
pub struct Group {
    h: sys::kiln_group,
}

// SAFETY: a rank's handle is an immutable reference to a thread-safe group.
unsafe impl Send for Group {}
unsafe impl Sync for Group {}

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: h came from kiln_group_local and is freed once, here.
        unsafe { sys::kiln_group_free(self.h) };
    }
}

impl Group {
    /// One rank per device of this process, rank i on `devices[i]`: CUDA devices (distinct) get
    /// an NCCL communicator each; CPU devices are threads meeting in shared memory.
    pub fn local(devices: &[Device]) -> Result<Vec<Group>> {
        let c: Vec<sys::kiln_device> = devices.iter().map(|d| d.to_c()).collect();
        let mut hs: Vec<sys::kiln_group> = vec![ptr::null_mut(); devices.len()];
        if devices.is_empty() {
            return Ok(Vec::new());
        }
        // SAFETY: both buffers hold devices.len() entries.
        check(unsafe { sys::kiln_group_local(c.as_ptr(), c.len(), hs.as_mut_ptr()) })?;
        Ok(hs.into_iter().map(|h| Group { h }).collect())
    }

    /// This rank's index in its group.
    pub fn rank(&self) -> Result<i32> {
        let mut r: c_int = 0;
        check(unsafe { sys::kiln_group_rank(&mut r, self.h) })?;
        Ok(r)
    }

    /// How many ranks the group has.
    pub fn size(&self) -> Result<i32> {
        let mut n: c_int = 0;
        check(unsafe { sys::kiln_group_size(&mut n, self.h) })?;
        Ok(n)
    }

    /// Ends the group for all its ranks, from any thread: each rank waiting in a collective,
    /// and each later collective, fails with `why` (a rank that failed before a collective
    /// would otherwise leave the others waiting in it for ever).
    pub fn abort(&self, why: &str) -> Result<()> {
        let c = CString::new(why).map_err(|_| Error::new("[kiln_group_abort] the reason contains a NUL byte"))?;
        check(unsafe { sys::kiln_group_abort(self.h, c.as_ptr()) })
    }
}

fn handle(g: Option<&Group>) -> sys::kiln_group {
    g.map_or(ptr::null_mut(), |g| g.h)
}

impl Array {
    /// The sum of every rank's array; `None` is the group of one rank (a copy).
    pub fn all_sum(&self, group: Option<&Group>) -> Result<Array> {
        make(|o| unsafe { sys::kiln_all_sum(o, self.h, handle(group)) })
    }

    /// Every rank's array joined along `axis`, in rank order.
    pub fn all_gather(&self, group: Option<&Group>, axis: i32) -> Result<Array> {
        make(|o| unsafe { sys::kiln_all_gather(o, self.h, handle(group), axis) })
    }

    /// The sum over the ranks, then this rank's part of axis 0.
    pub fn reduce_scatter(&self, group: Option<&Group>) -> Result<Array> {
        make(|o| unsafe { sys::kiln_reduce_scatter(o, self.h, handle(group)) })
    }
}
