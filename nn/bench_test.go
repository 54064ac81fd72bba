package nn

import (
	"testing"

	"github.com/fedaudit/fedaudit/cpu"
)

// BenchmarkLeNet5 is one local step's forward and backward pass of the W2 model (LeNet-5, ReLU
// and max pooling) for R = 8 replicas on one client batch of 32 28x28 images shared by the
// replicas. It reports replica-steps per second and the GFLOP/s of w2.py's nominal count
// (3 x forward FLOPs).
func BenchmarkLeNet5(b *testing.B) {
	for _, classic := range []bool{false, true} {
		name := "relu_maxpool"
		if classic {
			name = "tanh_avgpool"
		}
		b.Run(name, func(b *testing.B) {
			const R, B = 8, 32
			be := cpu.New(0)
			defer be.Close()
			m, err := BuildOn(LeNet5(10, classic), be)
			if err != nil {
				b.Fatal(err)
			}
			w64, x64, y := data(build64(b, LeNet5(10, classic)), R, B, 1)
			w, x := to32(w64), to32(x64)
			g := make([]float32, len(w))
			l := make([]float64, R)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.LossGrad(w, R, x, y, g, l); err != nil {
					b.Fatal(err)
				}
			}
			sec := b.Elapsed().Seconds()
			const fwd = 2 * (28*28*6*25 + 10*10*16*150 + 400*120 + 120*84 + 84*10)
			b.ReportMetric(float64(b.N*R)/sec, "replica-steps/s")
			b.ReportMetric(float64(b.N)*R*B*3*fwd/sec/1e9, "nominal-GFLOP/s")
		})
	}
}

// BenchmarkResNet is one local step's forward and backward pass of a small ResNet (three
// stages of one residual block, width 8, GroupNorm with 2 groups) for R = 8 replicas on one
// client batch of 8 colour 32x32 images: the model of results/resnet-synthetic.
func BenchmarkResNet(b *testing.B) {
	const R, B = 8, 8
	be := cpu.New(0)
	defer be.Close()
	spec := ResNet(3, 1, 8, 2, 10)
	m, err := BuildOn(spec, be)
	if err != nil {
		b.Fatal(err)
	}
	w64, x64, y := data(build64(b, spec), R, B, 1)
	w, x := to32(w64), to32(x64)
	g := make([]float32, len(w))
	l := make([]float64, R)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.LossGrad(w, R, x, y, g, l); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N*R)/sec, "replica-steps/s")
	b.ReportMetric(float64(b.N)*R*B*3*float64(m.ForwardFLOPs())/sec/1e9, "GFLOP/s")
}
