package hostshim

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
)

// tf32 is the rounding to TensorFloat-32 the shim models (cvt.rna.tf32.f32: to nearest, ties
// away from zero, 10 mantissa bits kept).
func tf32(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 != 0x7f800000 {
		u = (u + 0x1000) & 0xffffe000
	}
	return math.Float32frombits(u)
}

// bf16 is the down-conversion to bfloat16 the shim models: to nearest, ties to even, 7 stored
// mantissa bits kept.
func bf16(x float32) float32 {
	u := math.Float32bits(x)
	if u&0x7f800000 != 0x7f800000 {
		u = (u + 0x7fff + (u>>16)&1) & 0xffff0000
	}
	return math.Float32frombits(u)
}

// With compute.TF32 (compute.BF16) every product's inputs are rounded to TF32 (bfloat16) and
// the sums stay float32, in k order: bit for bit the reference below (row-major a (5 x 7)
// times b (7 x 4)). A TF32 tie rounds away from zero, (1 + 2^-11) to 1 + 2^-10; a bfloat16 tie
// to even, 1 + 2^-8 to 1 and 1 + 3 2^-8 to 1 + 2^-6. Back in fp32 the product is float32's.
func TestGemmPrecisionRoundsTheInputs(t *testing.T) {
	d := device(t)
	ops := cuda.NewOps(d, cuda.Options{})
	defer ops.Close()
	const m, k, n = 5, 7, 4
	rng := rand.New(rand.NewPCG(3, 4))
	av, bv := make([]float32, m*k), make([]float32, k*n)
	for i := range av {
		av[i] = float32(rng.NormFloat64())
	}
	for i := range bv {
		bv[i] = float32(rng.NormFloat64())
	}
	a, b, c := ops.Alloc(m*k), ops.Alloc(k*n), ops.Alloc(m*n)
	ops.Upload(a, 0, av)
	ops.Upload(b, 0, bv)
	product := func(p compute.Precision) []float32 {
		if err := ops.SetPrecision(p); err != nil {
			t.Fatal(err)
		}
		ops.Gemm(false, false, 1, compute.Mat{Buf: a, Rows: m, Cols: k, Stride: k, Batch: 1},
			compute.Mat{Buf: b, Rows: k, Cols: n, Stride: n, Batch: 1}, 0, compute.Mat{Buf: c, Rows: m, Cols: n, Stride: n, Batch: 1})
		out := make([]float32, m*n)
		ops.Download(out, c, 0)
		if err := ops.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reference := func(round func(float32) float32) []float32 {
		out := make([]float32, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float32
				for p := 0; p < k; p++ {
					s += round(bv[p*n+j]) * round(av[i*k+p])
				}
				out[i*n+j] = s
			}
		}
		return out
	}
	got, want := product(compute.TF32), reference(tf32)
	differs := false
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("tf32 element %d: %v, reference %v", i, got[i], want[i])
		}
	}
	gotBF, wantBF := product(compute.BF16), reference(bf16)
	for i := range gotBF {
		if gotBF[i] != wantBF[i] {
			t.Fatalf("bf16 element %d: %v, reference %v", i, gotBF[i], wantBF[i])
		}
		if gotBF[i] == got[i] {
			t.Fatalf("bf16 element %d equals tf32's %v: the inputs are not rounded to bfloat16", i, got[i])
		}
	}
	got32, want32 := product(compute.FP32), reference(func(x float32) float32 { return x })
	for i := range got32 {
		if got32[i] != want32[i] {
			t.Fatalf("fp32 element %d: %v, reference %v", i, got32[i], want32[i])
		}
		differs = differs || got32[i] != got[i]
	}
	if !differs {
		t.Fatal("tf32 and fp32 products agree everywhere: the inputs are not rounded")
	}
	if tf32(1+0x1p-11) != 1+0x1p-10 || tf32(1+0x1p-12) != 1 || tf32(-(1+0x1p-11)) != -(1+0x1p-10) {
		t.Fatal("the reference TF32 rounding is not to nearest with ties away from zero")
	}
	if bf16(1+0x1p-8) != 1 || bf16(1+3*0x1p-8) != 1+0x1p-6 || bf16(1+0x1p-8+0x1p-20) != 1+0x1p-7 {
		t.Fatal("the reference bfloat16 rounding is not to nearest with ties to even")
	}
	if err := ops.SetPrecision("fp16"); err == nil {
		t.Fatal("precision fp16 accepted")
	}
}

// How far TF32 and bfloat16 move a training and its audit on the shim's model of them
// (paritytest.PrecisionDrift states the bounds; the kit's precision-drift step runs the same
// on a GPU, whose own summation order differs by float32 rounding).
func TestReducedPrecisionMovesTheAuditLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("600 runs on the shim")
	}
	paritytest.PrecisionDrift(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return cuda.NewOps(device(t), opt)
	}, true)
}

// The kit's W1 precision drift (paritytest.PrecisionDriftW1) runs on the shim too, at 2 pairs
// of one round: its bounds hold on the shim's model of the roundings.
func TestReducedPrecisionMovesW1Little(t *testing.T) {
	if testing.Short() {
		t.Skip("W1 in three precisions on the shim")
	}
	paritytest.PrecisionDriftW1(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return cuda.NewOps(device(t), opt)
	}, 2, 1)
}

// The kit's ResNet precision drift (paritytest.PrecisionDriftResNet: Winograd's F(2x2, 3x3) in
// tf32 and bf16) runs on the shim too, at 4 pairs: its bounds hold on the shim's model of the
// roundings, and the roundings reach the training.
func TestReducedPrecisionMovesResNetLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("a ResNet in three precisions on the shim")
	}
	paritytest.PrecisionDriftResNet(t, func(t *testing.T, opt cuda.Options) paritytest.Backend {
		return cuda.NewOps(device(t), opt)
	}, 4, true)
}
