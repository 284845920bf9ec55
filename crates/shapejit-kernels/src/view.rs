//! Strided views: a slice plus the geometry ([`StridedShape`]) that indexes it.
//!
//! Strides are in elements and may be 0 (broadcast) or negative (reversed).
//!
//! **Invariant:** a [`View`]/[`ViewMut`] addresses only elements inside its slice:
//! `offset + Σ (shape[i]-1)·stride[i]` stays in `0..len` for every index (checked by
//! the constructors; an empty view addresses nothing).

use crate::error::KernelError;

/// Largest rank a kernel handles (after the caller's own dims are counted).
pub const MAX_RANK: usize = 16;

/// Shape, strides and offset, stored inline (no heap).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedShape {
    rank: usize,
    shape: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    offset: usize,
}

impl StridedShape {
    /// Geometry from parts; fails when the rank is too large or the lengths differ.
    pub fn new(
        shape: &[usize],
        strides: &[isize],
        offset: usize,
    ) -> Result<StridedShape, KernelError> {
        if shape.len() > MAX_RANK {
            return Err(KernelError::RankTooLarge(shape.len()));
        }
        if shape.len() != strides.len() {
            return Err(KernelError::Invalid(format!(
                "shape {shape:?} and strides {strides:?} have different lengths"
            )));
        }
        let mut res = StridedShape {
            rank: shape.len(),
            shape: [0; MAX_RANK],
            strides: [0; MAX_RANK],
            offset,
        };
        res.shape[..shape.len()].copy_from_slice(shape);
        res.strides[..shape.len()].copy_from_slice(strides);
        Ok(res)
    }

    /// Row-major contiguous geometry of `shape` at offset 0.
    pub fn contiguous(shape: &[usize]) -> Result<StridedShape, KernelError> {
        let mut strides = [0isize; MAX_RANK];
        if shape.len() > MAX_RANK {
            return Err(KernelError::RankTooLarge(shape.len()));
        }
        let mut acc: isize = 1;
        for i in (0..shape.len()).rev() {
            strides[i] = acc;
            acc = acc.saturating_mul(shape[i].max(1) as isize);
        }
        StridedShape::new(shape, &strides[..shape.len()], 0)
    }

    /// Dims.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.rank]
    }

    /// Strides in elements.
    pub fn strides(&self) -> &[isize] {
        &self.strides[..self.rank]
    }

    /// Offset of element `[0, ...]`.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// True when row-major contiguous (strides of size-1 dims ignored).
    pub fn is_contiguous(&self) -> bool {
        let mut expected: isize = 1;
        for i in (0..self.rank).rev() {
            if self.shape[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected = expected.saturating_mul(self.shape[i] as isize);
        }
        true
    }

    /// `(lowest, one past highest)` element index addressed; `None` when empty
    /// (or on arithmetic overflow, reported as not fitting by [`Self::fits`]).
    fn extent(&self) -> Option<Option<(isize, isize)>> {
        if self.shape().contains(&0) {
            return Some(None);
        }
        let mut lo = isize::try_from(self.offset).ok()?;
        let mut hi = lo;
        for (&d, &s) in self.shape().iter().zip(self.strides()) {
            let span = (d as isize - 1).checked_mul(s)?;
            if span < 0 {
                lo = lo.checked_add(span)?;
            } else {
                hi = hi.checked_add(span)?;
            }
        }
        Some(Some((lo, hi.checked_add(1)?)))
    }

    /// Checks that every addressed element is below `len`.
    pub fn fits(&self, len: usize) -> Result<(), KernelError> {
        let ok = match self.extent() {
            Some(None) => true,
            Some(Some((lo, hi))) => lo >= 0 && hi as usize <= len,
            None => false,
        };
        if ok {
            Ok(())
        } else {
            Err(KernelError::OutOfBounds {
                shape: self.shape().to_vec(),
                strides: self.strides().to_vec(),
                offset: self.offset,
                len,
            })
        }
    }

    /// Output dim `i` is dim `perm[i]`; `perm` must be a permutation.
    pub fn permuted(&self, perm: &[usize]) -> Result<StridedShape, KernelError> {
        let mut seen = [false; MAX_RANK];
        if perm.len() != self.rank
            || perm
                .iter()
                .any(|&p| p >= self.rank || std::mem::replace(&mut seen[p], true))
        {
            return Err(KernelError::Invalid(format!(
                "{perm:?} is not a permutation of {} dims",
                self.rank
            )));
        }
        let mut res = *self;
        for (i, &p) in perm.iter().enumerate() {
            res.shape[i] = self.shape[p];
            res.strides[i] = self.strides[p];
        }
        Ok(res)
    }

    /// NumPy-broadcasts to `shape` (right-aligned; size-1 dims get stride 0).
    pub fn broadcast_to(&self, shape: &[usize]) -> Result<StridedShape, KernelError> {
        let mismatch = || KernelError::ShapeMismatch {
            what: "broadcast",
            expected: shape.to_vec(),
            actual: self.shape().to_vec(),
        };
        if shape.len() < self.rank {
            return Err(mismatch());
        }
        let lead = shape.len() - self.rank;
        let mut strides = [0isize; MAX_RANK];
        for (i, &d) in shape.iter().enumerate().skip(lead) {
            let own = self.shape[i - lead];
            strides[i] = if own == d {
                self.strides[i - lead]
            } else if own == 1 {
                0
            } else {
                return Err(mismatch());
            };
        }
        StridedShape::new(shape, &strides[..shape.len()], self.offset)
    }

    /// Keeps `len` entries of dim `axis` from `start`.
    pub fn narrowed(
        &self,
        axis: usize,
        start: usize,
        len: usize,
    ) -> Result<StridedShape, KernelError> {
        if axis >= self.rank
            || start
                .checked_add(len)
                .is_none_or(|end| end > self.shape[axis])
        {
            return Err(KernelError::Invalid(format!(
                "narrowing dim {axis} of {:?} to {start}..{start}+{len}",
                self.shape()
            )));
        }
        let mut res = *self;
        res.shape[axis] = len;
        if len > 0 {
            res.offset = (self.offset as isize + start as isize * self.strides[axis]) as usize;
        }
        Ok(res)
    }

    /// Replaces dim `axis` by the dims `parts` (whose product must equal it),
    /// splitting it row-major.
    pub fn split_dim(&self, axis: usize, parts: &[usize]) -> Result<StridedShape, KernelError> {
        if axis >= self.rank || parts.iter().product::<usize>() != self.shape[axis] {
            return Err(KernelError::Invalid(format!(
                "splitting dim {axis} of {:?} into {parts:?}",
                self.shape()
            )));
        }
        let rank = self.rank - 1 + parts.len();
        if rank > MAX_RANK {
            return Err(KernelError::RankTooLarge(rank));
        }
        let mut shape = [0usize; MAX_RANK];
        let mut strides = [0isize; MAX_RANK];
        shape[..axis].copy_from_slice(&self.shape[..axis]);
        strides[..axis].copy_from_slice(&self.strides[..axis]);
        let mut acc = self.strides[axis];
        for (j, &p) in parts.iter().enumerate().rev() {
            shape[axis + j] = p;
            strides[axis + j] = acc;
            acc *= p as isize;
        }
        shape[axis + parts.len()..rank].copy_from_slice(&self.shape[axis + 1..self.rank]);
        strides[axis + parts.len()..rank].copy_from_slice(&self.strides[axis + 1..self.rank]);
        StridedShape::new(&shape[..rank], &strides[..rank], self.offset)
    }

    /// Element index of a multi-index (caller keeps it in range).
    pub fn index_of(&self, idx: &[usize]) -> usize {
        let pos = idx
            .iter()
            .zip(self.strides())
            .fold(self.offset as isize, |acc, (&i, &s)| acc + i as isize * s);
        pos as usize
    }
}

/// A read-only strided view of a slice.
#[derive(Clone, Copy, Debug)]
pub struct View<'a, T> {
    data: &'a [T],
    geom: StridedShape,
}

impl<'a, T: Copy> View<'a, T> {
    /// A view with the given geometry; fails if it addresses outside `data`.
    pub fn new(data: &'a [T], geom: StridedShape) -> Result<View<'a, T>, KernelError> {
        geom.fits(data.len())?;
        Ok(View { data, geom })
    }

    /// A row-major view of `shape` over `data` (which must hold at least its elements).
    pub fn contiguous(data: &'a [T], shape: &[usize]) -> Result<View<'a, T>, KernelError> {
        View::new(data, StridedShape::contiguous(shape)?)
    }

    /// The same data with another geometry (checked).
    pub fn with_geom(&self, geom: StridedShape) -> Result<View<'a, T>, KernelError> {
        View::new(self.data, geom)
    }

    /// The geometry.
    pub fn geom(&self) -> &StridedShape {
        &self.geom
    }

    /// Dims.
    pub fn shape(&self) -> &[usize] {
        self.geom.shape()
    }

    /// The whole underlying slice.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// The elements when the view is contiguous, exactly `numel` of them.
    pub fn as_contiguous(&self) -> Option<&'a [T]> {
        if !self.geom.is_contiguous() {
            return None;
        }
        let start = self.geom.offset.min(self.data.len());
        self.data.get(start..start + self.geom.numel())
    }

    /// Element at a multi-index (bounds: the caller keeps `idx` inside the shape).
    pub fn at(&self, idx: &[usize]) -> T {
        self.data[self.geom.index_of(idx)]
    }
}

/// A mutable strided view of a slice (outputs; usually contiguous).
#[derive(Debug)]
pub struct ViewMut<'a, T> {
    data: &'a mut [T],
    geom: StridedShape,
}

impl<'a, T: Copy> ViewMut<'a, T> {
    /// A view with the given geometry; fails if it addresses outside `data`.
    pub fn new(data: &'a mut [T], geom: StridedShape) -> Result<ViewMut<'a, T>, KernelError> {
        geom.fits(data.len())?;
        Ok(ViewMut { data, geom })
    }

    /// A row-major view of `shape` over `data`.
    pub fn contiguous(data: &'a mut [T], shape: &[usize]) -> Result<ViewMut<'a, T>, KernelError> {
        ViewMut::new(data, StridedShape::contiguous(shape)?)
    }

    /// The geometry.
    pub fn geom(&self) -> &StridedShape {
        &self.geom
    }

    /// Dims.
    pub fn shape(&self) -> &[usize] {
        self.geom.shape()
    }

    /// A view of part of this one with another geometry (checked), borrowing it.
    pub fn reborrow(&mut self, geom: StridedShape) -> Result<ViewMut<'_, T>, KernelError> {
        ViewMut::new(self.data, geom)
    }

    /// The whole underlying slice and the geometry.
    pub fn parts(&mut self) -> (&mut [T], &StridedShape) {
        (self.data, &self.geom)
    }

    /// The elements when the view is contiguous, exactly `numel` of them.
    pub fn as_contiguous_mut(&mut self) -> Option<&mut [T]> {
        if !self.geom.is_contiguous() {
            return None;
        }
        let start = self.geom.offset.min(self.data.len());
        let end = start + self.geom.numel();
        self.data.get_mut(start..end)
    }
}
