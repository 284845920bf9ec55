//! Views and engines refuse misfitting arguments with a `KernelError` (never a
//! panic), and strided reads (negative, zero, permuted strides) see the
//! elements a naive index computation sees.

use shapejit_kernels::elementwise::{binary, copy, fill};
use shapejit_kernels::gather::gather;
use shapejit_kernels::matmul::matmul;
use shapejit_kernels::reduce::reduce;
use shapejit_kernels::{KernelError, StridedShape, View, ViewMut};

fn geom(shape: &[usize], strides: &[isize], offset: usize) -> StridedShape {
    StridedShape::new(shape, strides, offset).unwrap()
}

#[test]
fn views_check_their_extent() {
    let data: Vec<f32> = (0..12).map(|v| v as f32).collect();
    assert!(View::new(&data, geom(&[3, 4], &[4, 1], 0)).is_ok());
    assert!(matches!(
        View::new(&data, geom(&[3, 4], &[4, 1], 1)),
        Err(KernelError::OutOfBounds { .. })
    ));
    // reversed rows: offset at the last row
    assert!(View::new(&data, geom(&[3, 4], &[-4, 1], 8)).is_ok());
    assert!(View::new(&data, geom(&[3, 4], &[-4, 1], 7)).is_err());
    assert!(View::new(&data, geom(&[2, 2], &[isize::MAX, 1], 0)).is_err());
    // empty views address nothing
    assert!(View::new(&data, geom(&[0, 4], &[100, 1], 50)).is_ok());
    assert!(StridedShape::new(&[2; 17], &[1; 17], 0).is_err());
    assert!(StridedShape::new(&[2, 2], &[1], 0).is_err());
}

#[test]
fn geometry_ops_and_their_errors() {
    let g = geom(&[2, 3], &[3, 1], 0);
    assert_eq!(g.permuted(&[1, 0]).unwrap().strides(), &[1, 3]);
    assert!(g.permuted(&[0, 0]).is_err());
    assert!(g.permuted(&[0]).is_err());
    let b = geom(&[3], &[1], 0).broadcast_to(&[4, 3]).unwrap();
    assert_eq!(b.strides(), &[0, 1]);
    assert!(matches!(
        g.broadcast_to(&[3, 3]),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert_eq!(g.narrowed(1, 1, 2).unwrap().offset(), 1);
    assert!(g.narrowed(1, 2, 2).is_err());
    assert!(g.narrowed(2, 0, 1).is_err());
    let s = geom(&[6], &[2], 1).split_dim(0, &[2, 3]).unwrap();
    assert_eq!(
        (s.shape(), s.strides()),
        (&[2usize, 3][..], &[6isize, 2][..])
    );
    assert!(geom(&[6], &[1], 0).split_dim(0, &[4, 2]).is_err());
}

#[test]
fn copy_follows_any_strides() {
    let data: Vec<i64> = (0..24).collect();
    // [4, 3] read with reversed rows, every other column of a [4, 6] buffer, transposed
    let src = View::new(&data, geom(&[3, 4], &[2, -6], 18)).unwrap();
    let mut out = vec![0i64; 12];
    copy(&mut ViewMut::contiguous(&mut out, &[3, 4]).unwrap(), &src).unwrap();
    let want: Vec<i64> = (0..3)
        .flat_map(|c| (0..4).map(move |r| 18 + 2 * c - 6 * r))
        .collect();
    assert_eq!(out, want);
    let mut filled = vec![0u8; 6];
    let mut strided = ViewMut::new(&mut filled, geom(&[3], &[2], 1)).unwrap();
    fill(&mut strided, 7);
    assert_eq!(filled, [0, 7, 0, 7, 0, 7]);
}

#[test]
fn engines_reject_mismatched_operands() {
    let a = vec![1f32; 6];
    let mut out = vec![0f32; 6];
    let av = View::contiguous(&a, &[2, 3]).unwrap();
    let bv = View::contiguous(&a, &[3, 2]).unwrap();
    let mut o = ViewMut::contiguous(&mut out, &[2, 3]).unwrap();
    assert!(matches!(
        binary(&mut o, &av, &bv, |x, y| x + y),
        Err(KernelError::ShapeMismatch { .. })
    ));
    assert!(matmul(&mut o, &av, &bv, 1.0, false).is_err());
    let mut r = vec![0f32; 5];
    assert!(reduce(&mut r, &av, &[true, false], 0f32, |a, v| a + v, |a, _| a).is_err());
    assert!(reduce(&mut r[..3], &av, &[true], 0f32, |a, v| a + v, |a, _| a).is_err());
    let idx = [0i64, 2];
    let iv = View::contiguous(&idx, &[2]).unwrap();
    let mut g = vec![0f32; 6];
    assert!(matches!(
        gather(&mut g, &av, 0, &iv),
        Err(KernelError::IndexOutOfRange { index: 2, size: 2 })
    ));
    assert!(gather(&mut g, &av, 2, &iv).is_err());
    assert!(matches!(
        gather(&mut g[..5], &av, 1, &iv),
        Err(KernelError::ShapeMismatch { .. })
    ));
}
