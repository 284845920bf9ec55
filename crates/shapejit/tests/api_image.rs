//! `.sjb` images through the public API: `Module::load` maps the image and
//! runs it with outputs bit-identical to the source model's; bad images and
//! asking an image for a graph are clear errors.

use shapejit::{Error, Module, Options, Tensor};

fn input(batch: usize) -> Tensor {
    let data: Vec<f32> = (0..batch * 512)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
        .collect();
    Tensor::from_vec(data, &[batch, 512]).unwrap()
}

#[test]
fn image_runs_bit_identical_to_source() {
    let source = Module::load("builtin:mlp", Options::interp()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp.sjb");
    shapejit::bytecode::image::write(source.program(), &path).unwrap();
    let image = Module::load(path.to_str().unwrap(), Options::interp()).unwrap();
    assert!(image.graph().is_none());
    assert_eq!(image.program().to_string(), source.program().to_string());
    let (mut a, mut b) = (source.runtime(), image.runtime());
    for batch in [1, 3, 16] {
        let x = input(batch);
        let want = a.run(std::slice::from_ref(&x)).unwrap();
        let got = b.run(&[x]).unwrap();
        assert_eq!(want[0].bytes(), got[0].bytes(), "batch {batch}");
    }
}

#[test]
fn truncated_image_is_an_error() {
    let source = Module::load("builtin:elementwise", Options::interp()).unwrap();
    let bytes = shapejit::bytecode::image::to_bytes(source.program()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.sjb");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = Module::load(path.to_str().unwrap(), Options::interp()).unwrap_err();
    assert!(matches!(err, Error::Image { .. }), "{err}");
    assert!(err.to_string().contains("cut.sjb"), "{err}");
}

#[test]
fn image_is_not_a_graph() {
    let err = shapejit::load_graph("model.sjb").unwrap_err();
    assert!(matches!(err, Error::ImageHasNoGraph { .. }), "{err}");
}
