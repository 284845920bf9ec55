//! 3×3 stride-1 convolutions (one image, pads 1) through
//! `shapejit_kernels::conv::conv2d` on the direct path (`direct/…`: weights read as
//! stored) and with the weights packed for Winograd F(2×2, 3×3) (`winograd/…`:
//! `PackedConvWeights`), at the light CNNs' layer shapes: ResNet-50's 64 → 64 at 56²
//! … 512 → 512 at 7², VGG-19's 64 at 224² and 512 at 28², SqueezeNet's 32 → 128 at
//! 27², 48 → 192 and 64 → 256 at 13², 16 → 64 at 55², DenseNet's 128 → 32 at 14²
//! and the reference convnet's 16 → 32 at 16². Shapes below `WINOGRAD_MIN_OUTPUTS`
//! output channels (not packed for Winograd) are timed on the direct path only,
//! for the threshold.
//!
//! Small maps (at most `TRANSPOSED_MAX_POSITIONS` outputs) also run as the
//! transposed product (`transposed/…`: `PackedConvWeights::pack_transposed`).
//! `conv1x1/…` times 1×1 layers on packed weights, the GEMM path and transposed;
//! `strided/…` ResNet-50's stride-2 layers (the 7×7 stem, 3×3 and 1×1) on every
//! path that takes them; `depthwise/…` ShuffleNet's depthwise 3×3 layers.
//!
//! Criterion's throughput is the direct convolution's FLOP (2·Cout·Cin·9·H·W), so
//! `Gelem/s` reads as equivalent GFLOP/s on both paths.

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main,
};
use shapejit_kernels::View;
use shapejit_kernels::conv::{
    ConvParams, PackedChannels, PackedConvWeights, Pool, Window, conv2d, conv2d_scratch_len,
    pool2d, pool2d_scratch_len, takes_transposed,
};
use std::hint::black_box;
use std::time::Duration;

/// One convolution layer as the groups time it: one image `[c_in, hw, hw]`,
/// weights `[c_out, c_in/groups, kH, kW]` and a bias of 0.1, fixed data in
/// [-0.5, 0.5).
struct Layer {
    c_in: usize,
    c_out: usize,
    hw: usize,
    groups: usize,
    win: Window,
    x: Vec<f32>,
    w: Vec<f32>,
    b: Vec<f32>,
}

impl Layer {
    fn new(c_in: usize, c_out: usize, hw: usize, groups: usize, win: Window) -> Layer {
        let values = |n: usize, step: usize| -> Vec<f32> {
            (0..n)
                .map(|i| (i * step % 1000) as f32 / 1000.0 - 0.5)
                .collect()
        };
        let [kh, kw] = win.kernel;
        Layer {
            c_in,
            c_out,
            hw,
            groups,
            win,
            x: values(c_in * hw * hw, 7919),
            w: values(c_out * c_in / groups * kh * kw, 104_729),
            b: vec![0.1; c_out],
        }
    }

    /// The weights' `[C_out, C_in/groups, kH, kW]`.
    fn shape(&self) -> [usize; 4] {
        let [kh, kw] = self.win.kernel;
        [self.c_out, self.c_in / self.groups, kh, kw]
    }

    /// The weights packed for the layer's usual path (Winograd or the GEMM),
    /// where it has one.
    fn packed(&self) -> Option<PackedConvWeights> {
        let (w, win) = (&self.w, &self.win);
        PackedConvWeights::pack(w, self.shape(), self.groups, win.strides, win.dilations)
    }

    /// The weights packed for the transposed product, where the layer takes it.
    fn transposed(&self) -> Option<PackedConvWeights> {
        let mg = self.c_out / self.groups;
        takes_transposed(mg, &self.win)
            .then(|| PackedConvWeights::pack_transposed(&self.w, self.shape(), self.groups))
            .flatten()
    }

    /// The direct convolution's FLOP (`2 · C_out · C_in/groups · kH · kW · OH · OW`).
    fn flop(&self) -> u64 {
        let [c_out, cg, kh, kw] = self.shape();
        (2 * c_out * cg * kh * kw * self.win.out[0] * self.win.out[1]) as u64
    }

    /// Times `conv2d` as `id` in `group`, on `packed` weights or as stored.
    fn bench(
        &self,
        group: &mut BenchmarkGroup<WallTime>,
        id: BenchmarkId,
        packed: Option<&PackedConvWeights>,
    ) {
        let (hw, [cg, mg]) = (
            [self.hw; 2],
            [self.c_in, self.c_out].map(|c| c / self.groups),
        );
        let xv = View::contiguous(&self.x, &[1, self.c_in, hw[0], hw[1]]).expect("x fits");
        let mut col = vec![0f32; conv2d_scratch_len(cg, mg, &self.win, hw)];
        let mut out = vec![0f32; self.c_out * self.win.out[0] * self.win.out[1]];
        let params = ConvParams {
            w: &self.w,
            bias: Some(&self.b),
            groups: self.groups,
            activation: None,
            packed: packed.map(|weights| PackedChannels { weights, first: 0 }),
        };
        group.throughput(Throughput::Elements(self.flop()));
        group.bench_function(id, |bench| {
            bench.iter(|| {
                conv2d(&mut out, &xv, &params, &self.win, &mut col).expect("shapes agree");
                black_box(&out);
            })
        });
    }

    /// Times the layer on each packing it has, as `usual/name` (the usual
    /// path's, [`Layer::packed`]) and `transposed/name`.
    fn bench_packed(&self, group: &mut BenchmarkGroup<WallTime>, name: &str, usual: &str) {
        for (path, packed) in [(usual, self.packed()), ("transposed", self.transposed())] {
            if let Some(packed) = &packed {
                self.bench(group, BenchmarkId::new(path, name), Some(packed));
            }
        }
    }
}

/// A benchmark group of `samples` samples measured for `time` each, after a
/// 300 ms warm-up.
fn group<'c>(
    c: &'c mut Criterion,
    name: &str,
    samples: usize,
    time: Duration,
) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(samples)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(time);
    group
}

/// A `k × k` window at `stride` with pads `k / 2` on an `hw²` map.
fn window(k: usize, stride: usize, hw: usize) -> Window {
    let o = (hw + 2 * (k / 2) - k) / stride + 1;
    Window {
        kernel: [k, k],
        strides: [stride; 2],
        pads: [k / 2; 4],
        dilations: [1, 1],
        out: [o, o],
    }
}

fn conv3x3(c: &mut Criterion) {
    let mut group = group(c, "conv3x3", 10, Duration::from_secs(2));
    for (c_in, c_out, hw) in [
        (64, 64, 56),
        (128, 128, 28),
        (256, 256, 14),
        (512, 512, 7),
        (64, 64, 224),
        (512, 512, 28),
        (32, 128, 27),
        (48, 192, 13),
        (32, 64, 14),
        (64, 64, 14),
        (64, 64, 7),
        (128, 32, 14),
        (16, 32, 16),
        (64, 256, 13),
        (16, 64, 55),
    ] {
        let layer = Layer::new(c_in, c_out, hw, 1, window(3, 1, hw));
        let name = format!("{c_in}x{c_out}x{hw}");
        layer.bench(&mut group, BenchmarkId::new("direct", &name), None);
        layer.bench_packed(&mut group, &name, "winograd");
    }
    group.finish();
}

/// 1×1 convolutions (one image) on packed weights: the GEMM path, at ResNet-50's
/// and SqueezeNet's layer shapes (`c_in → c_out at hw²`).
fn conv1x1(c: &mut Criterion) {
    let mut group = group(c, "conv1x1", 10, Duration::from_secs(2));
    for (c_in, c_out, hw) in [
        (64, 256, 56),
        (256, 64, 56),
        (512, 128, 28),
        (128, 512, 28),
        (1024, 256, 14),
        (256, 1024, 14),
        (2048, 512, 7),
        (512, 2048, 7),
        (1024, 2048, 7),
        (64, 16, 55),
        (16, 64, 55),
        (128, 16, 55),
        (512, 1000, 13),
    ] {
        let layer = Layer::new(c_in, c_out, hw, 1, window(1, 1, hw));
        layer.bench_packed(&mut group, &format!("{c_in}x{c_out}x{hw}"), "gemm");
    }
    group.finish();
}

/// ResNet-50's stride-2 layers (one image): the 7×7 stem (3 → 64 at 224²,
/// pads 3), the 3×3 convolutions that halve the map (pads 1) and the 1×1
/// projections (pads 0), each on every path that takes it: `direct` (weights as
/// stored), `gemm` (1×1, packed weights), `transposed` (small maps, when
/// [`takes_transposed`]). Named `CinxCoutxHW` by the input map; throughput is
/// the convolution's FLOP.
fn strided(c: &mut Criterion) {
    let mut group = group(c, "strided", 10, Duration::from_secs(2));
    for (c_in, c_out, hw, k) in [
        (3, 64, 224, 7),
        (128, 128, 56, 3),
        (256, 256, 28, 3),
        (512, 512, 14, 3),
        (256, 512, 56, 1),
        (512, 1024, 28, 1),
        (1024, 2048, 14, 1),
    ] {
        let layer = Layer::new(c_in, c_out, hw, 1, window(k, 2, hw));
        let name = format!("{c_in}x{c_out}x{hw}k{k}");
        if k > 1 {
            layer.bench(&mut group, BenchmarkId::new("direct", &name), None);
        }
        layer.bench_packed(&mut group, &name, "gemm");
    }
    group.finish();
}

/// Depthwise 3×3 convolutions (one image, pads 1, one channel per group) at
/// ShuffleNet's layer shapes: 112 channels at 56² stride 2, 136 at 28², 272 at
/// 14², 544 at 7² (stride 1). Throughput is the convolution's FLOP.
fn depthwise(c: &mut Criterion) {
    let mut group = group(c, "depthwise", 20, Duration::from_secs(1));
    for (ch, hw, stride) in [(112, 56, 2), (136, 28, 1), (272, 14, 1), (544, 7, 1)] {
        let layer = Layer::new(ch, ch, hw, ch, window(3, stride, hw));
        let id = BenchmarkId::from_parameter(format!("{ch}x{hw}s{stride}"));
        layer.bench(&mut group, id, None);
    }
    group.finish();
}

/// Max pools of the light CNNs, one image: SqueezeNet's 3×3 stride 2 unpadded
/// (111² → 55², 55² → 27², 27² → 13²), ResNet-50's 3×3 stride 2 padded
/// (112² → 56²), and 2×2 stride 2 (VGG-19's 224² → 112²). Throughput counts
/// output elements.
fn max_pool(c: &mut Criterion) {
    let mut group = group(c, "max_pool", 20, Duration::from_secs(1));
    for (ch, hw, k, pad) in [
        (64, 111, 3, 0),
        (128, 55, 3, 0),
        (256, 27, 3, 0),
        (64, 112, 3, 1),
        (64, 224, 2, 0),
    ] {
        let o = (hw + 2 * pad - k) / 2 + 1;
        let win = Window {
            kernel: [k, k],
            strides: [2, 2],
            pads: [pad; 4],
            dilations: [1, 1],
            out: [o, o],
        };
        let x: Vec<f32> = (0..ch * hw * hw)
            .map(|i| (i * 7919 % 1000) as f32 / 1000.0 - 0.5)
            .collect();
        let xv = View::contiguous(&x, &[1, ch, hw, hw]).expect("x fits");
        let mut scratch = vec![0f32; pool2d_scratch_len(&win, [hw, hw])];
        let mut out = vec![0f32; ch * o * o];
        group.throughput(Throughput::Elements((ch * o * o) as u64));
        let name = format!("{ch}x{hw}k{k}p{pad}");
        group.bench_function(BenchmarkId::from_parameter(name), |bench| {
            bench.iter(|| {
                pool2d(&mut out, &xv, &win, Pool::Max, &mut scratch).expect("shapes agree");
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, conv3x3, conv1x1, strided, depthwise, max_pool);
criterion_main!(benches);
