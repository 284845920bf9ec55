//! The N-d iteration shared by every engine.
//!
//! [`walk`] visits all multi-indices of a shape for `N` operands at once. It
//! first drops size-1 dims and merges adjacent dims that every operand traverses
//! with one uniform stride (so a contiguous tensor of any rank becomes one run),
//! then calls `inner` once per innermost run with each operand's starting
//! element offset, the run length and each operand's stride inside the run.
//!
//! **Invariant:** runs are visited in row-major order of the (uncoalesced) shape,
//! and offsets are `base + Σ idx[i]·strides[i]`, exactly as without coalescing.

use crate::view::MAX_RANK;

/// Visits every innermost run; nothing is visited when a dim is 0.
///
/// `strides[k]` must have `shape.len()` entries (it does for views of one shape).
pub fn walk<const N: usize>(
    shape: &[usize],
    strides: [&[isize]; N],
    base: [usize; N],
    mut inner: impl FnMut([usize; N], usize, [isize; N]),
) {
    if shape.contains(&0) {
        return;
    }
    let mut dims = [0usize; MAX_RANK];
    let mut st = [[0isize; N]; MAX_RANK];
    let mut rank = 0;
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 {
            continue;
        }
        let cur: [isize; N] = std::array::from_fn(|k| strides[k][i]);
        if rank > 0 && (0..N).all(|k| st[rank - 1][k] == cur[k] * d as isize) {
            dims[rank - 1] *= d;
            st[rank - 1] = cur;
        } else {
            dims[rank] = d;
            st[rank] = cur;
            rank += 1;
        }
    }
    let base_i: [isize; N] = std::array::from_fn(|k| base[k] as isize);
    if rank == 0 {
        inner(base, 1, [1; N]);
        return;
    }
    let len = dims[rank - 1];
    let inner_st = st[rank - 1];
    let n_outer = rank - 1;
    let mut idx = [0usize; MAX_RANK];
    let mut pos = base_i;
    loop {
        inner(std::array::from_fn(|k| pos[k] as usize), len, inner_st);
        // odometer over the outer dims, innermost first
        let mut d = n_outer;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            for k in 0..N {
                pos[k] += st[d][k];
            }
            if idx[d] < dims[d] {
                break;
            }
            for k in 0..N {
                pos[k] -= st[d][k] * dims[d] as isize;
            }
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_contiguous_and_keeps_order() {
        let mut runs = Vec::new();
        walk(&[2, 3, 4], [&[12, 4, 1]], [0], |o, l, s| {
            runs.push((o[0], l, s[0]))
        });
        assert_eq!(runs, vec![(0, 24, 1)]);
        let mut offs = Vec::new();
        // transposed [3, 2] view of a [2, 3] buffer
        walk(&[3, 2], [&[1, 3]], [0], |o, l, s| {
            for i in 0..l {
                offs.push(o[0] as isize + i as isize * s[0]);
            }
        });
        assert_eq!(offs, vec![0, 3, 1, 4, 2, 5]);
        let mut n = 0;
        walk(&[3, 0, 2], [&[0, 0, 1]], [0], |_, _, _| n += 1);
        assert_eq!(n, 0);
        let mut single = Vec::new();
        walk(&[1, 1], [&[5, 7]], [3], |o, l, _| single.push((o[0], l)));
        assert_eq!(single, vec![(3, 1)]);
    }
}
