package attacks

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/fedaudit/fedaudit/attacks/hostmodel"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/runs"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/model"
)

// simSpec describes synthetic runs made with the host model, without the trainer: one client
// (m = 1, as in DP-SGD) holds the target sample and extra samples; round 1 is K full-batch steps
// from a fixed w_0 plus Gaussian noise of std sigma, the same noise for both runs of a pair as the
// trainer couples them. So w_1 is the client's upload, and the informed adversary's likelihood
// ratio is (1/sigma^2) <w_1 - (phi + phi')/2, phi - phi'> exactly.
type simSpec struct {
	model        model.Config
	dim, classes int
	shape        []int // the input's shape (CNNs; images get the TV prior and SSIM)
	pairs        int
	sigma        float64
	extra        int // client samples besides the target
	steps        int
	eta          float64
	noParams     bool
	noUpload     bool
	noStats      bool
	noRound0     bool
	skipUpload   func(pair int) bool // pairs whose client did not take part
	seed         uint64
}

func (s simSpec) config() train.Config {
	return train.Config{Algorithm: "dpsgd", Model: s.model, Rounds: 1, LocalSteps: s.steps, LearningRate: s.eta,
		Schedule: "constant", NoiseStd: s.sigma, Batching: "full", Seed: s.seed, Checkpoints: []int{0, 1}}
}

// localTrain runs K full-batch gradient steps of the mean loss from w.
func localTrain(m *hostmodel.Model, w []float64, data []datasets.Sample, steps int, eta float64) []float64 {
	w = append([]float64(nil), w...)
	for k := 0; k < steps; k++ {
		g := make([]float64, len(w))
		for _, s := range data {
			m.LossGrad(w, to64(s.Features), int(s.Label), 1/float64(len(data)), g)
		}
		for i := range w {
			w[i] -= eta * g[i]
		}
	}
	return w
}

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func randomSample(rng *rand.Rand, dim int, label int32) datasets.Sample {
	f := make([]float32, dim)
	for i := range f {
		f[i] = float32(rng.Float64())
	}
	return datasets.Sample{Features: f, Label: label}
}

// simulate writes the runs of s to a run file and returns its path, the Env describing it and the
// target client's samples in world C.
func simulate(t *testing.T, s simSpec) (string, Env, []datasets.Sample) {
	t.Helper()
	m, err := hostmodel.New(s.model, s.shape, s.dim, s.classes)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(s.seed, 7))
	w0 := make([]float64, m.NumParams())
	for i := range w0 {
		w0[i] = rng.NormFloat64() * 0.3
	}
	eps := randomSample(rng, s.dim, 0)
	epsP := randomSample(rng, s.dim, 1)
	data := [2][]datasets.Sample{{eps}, {epsP}}
	labels := []int32{eps.Label}
	for j := 0; j < s.extra; j++ {
		x := randomSample(rng, s.dim, int32(rng.IntN(max(s.classes, 1))))
		data[0] = append(data[0], x)
		data[1] = append(data[1], x)
		labels = append(labels, x.Label)
	}
	phi := [2][]float64{localTrain(m, w0, data[0], s.steps, s.eta), localTrain(m, w0, data[1], s.steps, s.eta)}
	stats := []string{runs.StatTargetLossC, runs.StatTargetLossCPrime, runs.StatTargetMarginC, runs.StatTargetMarginCPrime, runs.StatLLRAll, runs.StatLLRLast, runs.StatMu2, runs.StatLLRUpload, runs.StatMu2Upload}
	meta := runs.Meta{Config: []byte(`{"synthetic":true}`), DatasetHash: "00", ToolVersion: "test", StatNames: stats,
		HasParams: !s.noParams, HasUpload: !s.noUpload}
	if s.noStats {
		meta.StatNames = nil
	}
	path := filepath.Join(t.TempDir(), "runs.arrow")
	w, err := runs.Create(path, meta)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	for p := 0; p < s.pairs; p++ {
		noise := make([]float64, len(w0))
		for i := range noise {
			noise[i] = s.sigma * rng.NormFloat64()
		}
		for world := 0; world < 2; world++ {
			base := runs.Row{RunID: int64(2*p + world), PairID: int64(p), World: int8(world), Seed: uint64(p)}
			r0 := base
			if !s.noStats {
				r0.Stats = make([]float64, len(stats))
			}
			if !s.noParams {
				r0.Params = to32(w0)
			}
			if !s.noUpload {
				r0.Upload = nanVector(len(w0))
			}
			if !s.noRound0 {
				if err := w.Write(r0); err != nil {
					t.Fatal(err)
				}
			}
			w1 := make([]float64, len(w0))
			for i := range w1 {
				w1[i] = phi[world][i] + noise[i]
			}
			r1 := base
			r1.Round = 1
			if !s.noParams {
				r1.Params = to32(w1)
			}
			if !s.noUpload {
				r1.Upload = to32(w1)
				if s.skipUpload != nil && s.skipUpload(p) {
					r1.Upload = nanVector(len(w0))
				}
			}
			if !s.noStats {
				r1.Stats = roundStats(m, s.sigma, eps, epsP, phi, w1)
			}
			if err := w.Write(r1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	env := Env{Config: s.config(), Dim: s.dim, Classes: s.classes, Shape: s.shape, Target: eps, TargetPrime: epsP,
		ClientSize: 1 + s.extra, ClientLabels: labels, ShadowEvery: 5, Seed: 3}
	if s.noRound0 {
		env.Initial = to32(w0)
	}
	return path, env, data[0]
}

// roundStats returns the recorded statistics of a run at w1 (in simulate's order of StatNames):
// the target losses and margins in both worlds and the informed adversary's ratio and mu^2 for
// the exact means phi of the two worlds and noise std sigma.
func roundStats(m *hostmodel.Model, sigma float64, eps, epsP datasets.Sample, phi [2][]float64, w1 []float64) []float64 {
	w1q := to64(to32(w1)) // as an attacker reading the file sees it
	l, mg := m.LossGrad(w1q, to64(eps.Features), int(eps.Label), 0, nil)
	lp, mgp := m.LossGrad(w1q, to64(epsP.Features), int(epsP.Label), 0, nil)
	var llr, mu2 float64
	if sigma > 0 {
		for i := range w1 {
			d := phi[0][i] - phi[1][i]
			llr += (w1[i] - (phi[0][i]+phi[1][i])/2) * d
			mu2 += d * d
		}
		llr /= sigma * sigma
		mu2 /= sigma * sigma
	}
	// One client: the upload is w_1 itself, so its ratio is the round's.
	return []float64{l, lp, mg, mgp, llr, llr, mu2, llr, mu2}
}

func openTable(t *testing.T, path string) *runs.Table {
	t.Helper()
	tb, err := runs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

func summaryOf(t *testing.T, res *Result, attack string) Metrics {
	t.Helper()
	for _, m := range res.Summary {
		if m.Attack == attack {
			return m
		}
	}
	t.Fatalf("no summary for %s", attack)
	return Metrics{}
}

// nanVector is how the tests write "no upload" into a file that declares uploads.
func nanVector(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.NaN())
	}
	return v
}
