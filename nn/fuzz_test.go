package nn

import (
	"math"
	"testing"
)

var fuzzKinds = []string{"conv2d", "maxpool", "avgpool", "relu", "tanh", "groupnorm", "residual", "globalavgpool", "flatten", "dense", "bogus"}

// fuzzSpec decodes bytes into a spec: three for the input shape, then six per layer (kind, out,
// kernel, stride, padding, groups as signed bytes, so negative and zero values occur). Fuzzing
// the struct rather than YAML text keeps the search on Build's checks (the YAML decoder is not
// ours).
func fuzzSpec(b []byte) Spec {
	if len(b) < 3 {
		return Spec{}
	}
	s := Spec{Input: []int{int(int8(b[0])), int(int8(b[1])), int(int8(b[2]))}}
	for b = b[3:]; len(b) >= 6 && len(s.Layers) < 12; b = b[6:] {
		s.Layers = append(s.Layers, LayerSpec{Kind: fuzzKinds[int(b[0])%len(fuzzKinds)],
			Out: int(int8(b[1])), Kernel: int(int8(b[2])), Stride: int(int8(b[3])), Padding: int(int8(b[4])), Groups: int(int8(b[5]))})
	}
	return s
}

// A spec is outside data (a user's YAML): Build must return a model or an error, never panic,
// and a model it returns must run forward and backward on a batch of one to a finite loss.
func FuzzBuild(f *testing.F) {
	f.Add([]byte{1, 8, 8, 0, 2, 3, 0, 0, 0, 1, 0, 2, 0, 0, 0, 8, 0, 0, 0, 0, 0, 9, 3, 0, 0, 0, 0})
	f.Add([]byte{4, 4, 4, 6, 4, 0, 2, 0, 2, 7, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0})
	f.Add([]byte{2, 3, 3, 5, 0, 0, 0, 0, 2, 2, 0, 3, 5, 0, 0, 4, 0, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 2, 0, 255, 9, 253, 100, 0})
	f.Fuzz(func(t *testing.T, src []byte) {
		s := fuzzSpec(src)
		m, err := Build[float64](s, NaiveGemm[float64]{})
		if err != nil {
			return
		}
		if m.NumParams() > 1<<16 {
			return // valid but too large to run in a fuzz iteration
		}
		for _, l := range m.body.layers {
			if l.out().Size() > 1<<14 {
				return
			}
		}
		w := make([]float64, m.NumParams())
		m.Init(w, 1)
		x := make([]float64, m.Input.Size())
		for i := range x {
			x[i] = float64(i%5) / 5
		}
		g := make([]float64, len(w))
		l := make([]float64, 1)
		if err := m.LossGrad(w, 1, x, []int32{int32(m.Classes - 1)}, g, l); err != nil {
			t.Fatalf("built model failed: %v", err)
		}
		if math.IsNaN(l[0]) || math.IsInf(l[0], 0) {
			t.Fatalf("loss %v for %+v", l[0], s)
		}
	})
}
