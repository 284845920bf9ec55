//! Four threads share one `Module`, each running its own batch size
//! repeatedly; every result equals the single-thread result, bit for bit
//! (on the interpreter: compiled kernels may round differently; the JIT has its
//! own concurrency tests).

use shapejit::{DType, GraphBuilder, Module, Options, Tensor, shape};

fn model() -> Module {
    let mut b = GraphBuilder::new("block");
    let x = b.input("x", DType::F32, shape!["batch", 16, 32]);
    let w = b.constant(
        "w",
        Tensor::from_vec(
            (0..32 * 32)
                .map(|i| ((i % 17) as f32 - 8.0) / 40.0)
                .collect(),
            &[32, 32],
        )
        .unwrap(),
    );
    let scale = b.constant("scale", Tensor::from_vec(vec![1.1f32; 32], &[32]).unwrap());
    let bias = b.constant("bias", Tensor::from_vec(vec![-0.1f32; 32], &[32]).unwrap());
    let h = b.layer_norm(x, scale, Some(bias), -1, 1e-5).unwrap();
    let h = b.matmul(h, w).unwrap();
    let h = b.gelu(h, false).unwrap();
    let t = b.transpose(h, &[0, 2, 1]).unwrap();
    let s = b.matmul(h, t).unwrap();
    let p = b.softmax(s, -1).unwrap();
    let y = b.matmul(p, h).unwrap();
    let y = b.add(y, x).unwrap();
    b.output("y", y).unwrap();
    Module::from_graph(b.finish().unwrap(), Options::interp()).unwrap()
}

fn input(batch: usize) -> Tensor {
    let n = batch * 16 * 32;
    Tensor::from_vec(
        (0..n)
            .map(|i| ((i * 31 % 97) as f32 - 48.0) / 50.0)
            .collect(),
        &[batch, 16, 32],
    )
    .unwrap()
}

#[test]
fn four_threads_share_a_module() {
    let module = model();
    let batches = [1usize, 3, 8, 5];
    let expected: Vec<Vec<f32>> = batches
        .iter()
        .map(|&b| {
            module.runtime().run(&[input(b)]).unwrap()[0]
                .as_slice::<f32>()
                .unwrap()
                .to_vec()
        })
        .collect();
    std::thread::scope(|scope| {
        for (t, &batch) in batches.iter().enumerate() {
            let module = module.clone();
            let expected = &expected;
            scope.spawn(move || {
                let mut rt = module.runtime();
                for rep in 0..20 {
                    // each thread also switches shapes now and then
                    let b = if rep % 5 == 4 {
                        batches[(t + 1) % 4]
                    } else {
                        batch
                    };
                    let which = batches.iter().position(|&x| x == b).unwrap();
                    let out = rt.run(&[input(b)]).unwrap();
                    assert_eq!(
                        out[0].as_slice::<f32>().unwrap(),
                        &expected[which][..],
                        "thread {t} rep {rep}"
                    );
                }
            });
        }
    });
    let stats = module.stats();
    let first = &stats.slots[0];
    assert!(first.executions >= 4 + 80, "{}", first.executions);
}
