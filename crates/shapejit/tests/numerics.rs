//! Numerics that used to be silently wrong (issue 12): integer division by
//! zero, pools whose pads cover whole windows.

use shapejit::ir::Window2d;
use shapejit::{DType, GraphBuilder, Module, Options, Tensor, shape};

#[test]
fn integer_division_by_zero_is_an_error_naming_the_node() {
    for dtype in [DType::I64, DType::I32] {
        let mut b = GraphBuilder::new("div");
        let x = b.input("x", dtype, shape!["n"]);
        let y = b.input("y", dtype, shape!["n"]);
        let q = b.div(x, y).unwrap();
        b.output("q", q).unwrap();
        let module = Module::from_graph(b.finish().unwrap(), Options::interp()).unwrap();
        let t = |v: Vec<i64>| match dtype {
            DType::I64 => Tensor::from_vec(v, &[3]).unwrap(),
            _ => Tensor::from_vec(v.into_iter().map(|x| x as i32).collect(), &[3]).unwrap(),
        };
        let out = module
            .runtime()
            .run(&[t(vec![7, -7, 9]), t(vec![2, 2, -4])]);
        assert_eq!(out.unwrap()[0].to_f64_vec(), [3.0, -3.0, -2.0]);
        let err = module
            .runtime()
            .run(&[t(vec![7, -7, 9]), t(vec![2, 0, -4])])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "node 'div_0' (div): div: integer division by zero"
        );
    }
}

#[test]
fn pools_whose_pads_reach_the_kernel_are_rejected() {
    for (pads, ok) in [
        ([1, 1, 1, 1], true),
        ([2, 0, 0, 0], false),
        ([0, 0, 0, 2], false),
    ] {
        let mut b = GraphBuilder::new("pool");
        let x = b.input("x", DType::F32, shape![1, 1, 4, 4]);
        let window = Window2d {
            kernel: [2, 2],
            strides: [1, 1],
            pads,
            dilations: [1, 1],
        };
        let avg = b.avg_pool2d(x, window.clone(), false, false);
        let max = b.max_pool2d(x, window, false);
        for res in [avg, max] {
            match (res, ok) {
                (Ok(_), true) => {}
                (Err(e), false) => assert!(
                    e.to_string().ends_with(&format!(
                        "pads {pads:?} must be smaller than the kernel [2, 2] on each side"
                    )),
                    "{e}"
                ),
                (res, _) => panic!("pads {pads:?}: {res:?}"),
            }
        }
    }
}
