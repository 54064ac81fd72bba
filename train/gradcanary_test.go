package train

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// The gradient canary on the quadratic model, whose gradient a w - x is affine: with one local
// step of rate eta on n samples and m clients averaged, the C' world's model after one round is
// that of the same training without a canary minus eta Norm u / (n m), and with Opposite the
// C world's is that plus eta Norm u / (n m), to float32 rounding (the coupled worlds share
// their noise), in the canary's direction only; without Opposite the C replicas are bit for
// bit those of the training without a canary. The informed adversary, which replays the
// canary, sees a realized mu of eta Shift / (n sigma sqrt(m)): the worlds' models differ by
// eta Shift / (n m) under the average of m clients' noise, sigma / sqrt(m).
func TestGradientCanaryShiftsTheWorldsAlongItsDirection(t *testing.T) {
	const (
		m, n, dim     = 3, 4, 5
		eta, G, sigma = 0.1, 2.0, 0.05
		coordinate    = 1
		shift         = eta * G / n / m
		tolerance     = 1e-6 // float32 rounding of values of order 1
	)
	tgt := TargetInfo{Client: 1, Index: 2}
	c, _ := synthWorlds(m, n, dim, 2, tgt, 5)
	base := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: 0.5},
		Rounds: 1, LocalSteps: 1, LearningRate: eta, Schedule: "constant", ClipNorm: 100, NoiseStd: sigma,
		Batching: "full", Seed: 3, Checkpoints: []int{1}, Informed: true, RecordParams: true}
	without := run(t, base, c, c, tgt, PairRange{0, 2})[0]
	for _, tc := range []struct {
		dir      string
		opposite bool
	}{{canary.DiracDirection, false}, {canary.GaussianDirection, false}, {canary.GaussianDirection, true}} {
		t.Run(fmt.Sprintf("%s opposite %v", tc.dir, tc.opposite), func(t *testing.T) {
			cfg := base
			cfg.GradientCanary = &canary.Gradient{Norm: G, Direction: tc.dir, Coordinate: coordinate, Opposite: tc.opposite}
			u := cfg.GradientCanary.Vector(cfg.Seed, dim)
			with := run(t, cfg, c, c, tgt, PairRange{0, 2})[0]
			mu2 := slices.Index(with.StatNames, checkpoint.StatMu2)
			wantMu2 := math.Pow(eta*cfg.GradientCanary.Shift()/n, 2) / (m * sigma * sigma)
			for k, r := range with.Replicas {
				ref := without.Replicas[k]
				move := -shift // C' moves along -u
				if r.World == 0 {
					move = 0
					if tc.opposite {
						move = shift
					}
				}
				for j := range r.Params {
					want := float64(ref.Params[j]) + move*float64(u[j])
					if move == 0 && r.Params[j] != ref.Params[j] {
						t.Fatalf("pair %d world C: parameter %d is %g, %g without a canary", r.Pair, j, r.Params[j], ref.Params[j])
					}
					if math.Abs(float64(r.Params[j])-want) > tolerance {
						t.Errorf("pair %d world %d: parameter %d is %g, want %g (without the canary %+g u_j)", r.Pair, r.World, j, r.Params[j], want, move)
					}
				}
				if got := r.Stats[mu2]; math.Abs(got-wantMu2) > 1e-4*wantMu2 {
					t.Errorf("pair %d world %d: realized mu^2 %g, want %g", r.Pair, r.World, got, wantMu2)
				}
			}
		})
	}
}

// A gradient canary is refused where it has no meaning, each problem named: for dpsgd and the
// DP-FedAvg family, with a coordinate outside the model, with a norm that is not positive, and
// beside the one-run canaries.
func TestGradientCanaryChecks(t *testing.T) {
	base := mlpConfig()
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"dpsgd", func(c *Config) { c.Algorithm = algo.DPSGD }, "gradient_canary.algorithm"},
		{"coordinate", func(c *Config) { c.GradientCanary.Coordinate = 1 << 20 }, "gradient_canary.coordinate"},
		{"negative coordinate", func(c *Config) { c.GradientCanary.Coordinate = -(1 << 20) }, "gradient_canary.coordinate"},
		{"norm", func(c *Config) { c.GradientCanary.Norm = 0 }, "gradient_canary.norm"},
		{"infinite norm", func(c *Config) { c.GradientCanary.Norm = math.Inf(1) }, "gradient_canary.norm"},
		{"direction", func(c *Config) { c.GradientCanary.Direction = "sideways" }, "gradient_canary.direction"},
		{"one-run canaries", func(c *Config) { c.Canaries = &canary.Config{Count: 4, Kind: canary.Dirac} }, "not with the one-run canaries"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.GradientCanary = &canary.Gradient{Norm: 5}
			tt.edit(&cfg)
			err := cfg.validate(4, 10, []int{8}, 8, 2)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error naming %q", err, tt.want)
			}
		})
	}
	ok := base
	ok.GradientCanary = &canary.Gradient{Norm: 5, Coordinate: -1}
	if err := ok.validate(4, 10, []int{8}, 8, 2); err != nil {
		t.Errorf("a valid gradient canary refused: %v", err)
	}
}

// One-run gradient canaries on the quadratic model, one local step of rate eta on client
// Client's n samples, m clients averaged: against the same training without canaries every
// run's model moves by eta Norm / (n m) along each of its included canaries' directions and not
// at all along the excluded ones' (orthonormal directions, float32 rounding), both worlds of a
// pair alike; and the recorded canary_cos_final is the cosine of w_1 - w_0 with each direction.
func TestGradientCanariesMoveTheModelAlongTheIncluded(t *testing.T) {
	const (
		m, n, dim, k  = 3, 4, 12, 5
		eta, G, sigma = 0.1, 2.0, 0.05
		shift         = eta * G / n / m
		tolerance     = 1e-6
	)
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(m, n, dim, 2, tgt, 5)
	base := Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "quadratic", Curvature: 0.5},
		Rounds: 1, LocalSteps: 1, LearningRate: eta, Schedule: "constant", ClipNorm: 100, NoiseStd: sigma,
		Batching: "full", Seed: 3, Checkpoints: []int{0, 1}, RecordParams: true}
	cfg := base
	cfg.Canaries = &canary.Config{Count: k, Kind: canary.Gradients, Norm: G, Client: 2, Orthogonal: true}
	with := run(t, cfg, c, cp, tgt, PairRange{0, 3})
	without := run(t, base, c, cp, tgt, PairRange{0, 3})
	dirs := canary.OrthonormalDirections(cfg.Seed, k, dim)
	cosIdx := slices.Index(with[1].CanaryStatNames, canary.StatCosFinal)
	if cosIdx < 0 {
		t.Fatalf("canary statistics %v lack %s", with[1].CanaryStatNames, canary.StatCosFinal)
	}
	for i, r := range with[1].Replicas {
		bits := datasets.InclusionBits(cfg.Seed, r.Pair, k)
		ref := without[1].Replicas[i].Params
		w0 := with[0].Replicas[i].Params
		var moveNorm float64
		for d := range r.Params {
			moveNorm += float64(r.Params[d]-w0[d]) * float64(r.Params[d]-w0[d])
		}
		moveNorm = math.Sqrt(moveNorm)
		for j := 0; j < k; j++ {
			u := dirs[j*dim : (j+1)*dim]
			var along, cos float64
			for d := range u {
				along += float64(r.Params[d]-ref[d]) * float64(u[d])
				cos += float64(r.Params[d]-w0[d]) * float64(u[d])
			}
			want := 0.0
			if bits[j] {
				want = shift
			}
			if math.Abs(along-want) > tolerance {
				t.Errorf("pair %d world %d canary %d (included %v): moved %.6g along it, want %.6g", r.Pair, r.World, j, bits[j], along, want)
			}
			if got := r.CanaryStats[cosIdx][j]; math.Abs(got-cos/moveNorm) > 1e-5 {
				t.Errorf("pair %d world %d canary %d: recorded cosine %.6g, want %.6g", r.Pair, r.World, j, got, cos/moveNorm)
			}
		}
	}
}

// Under dpsgd a gradient canary is a record of its own, clipped per example like the others:
// after one step every run has moved by eta min(Norm, clip) along each included canary's
// direction beyond the run without canaries (softmax regression, one client, full batch), as a
// record's clipped gradient in dpsgd's sum moves it, and not along the excluded ones'. It moved
// eta clip / n, n times less than a record.
func TestGradientCanariesUnderDPSGDAreClippedPerExample(t *testing.T) {
	const (
		n, dim, k = 6, 8, 4
		eta, clip = 0.3, 0.5
		norm      = 5.0 // above the clip: each canary counts clip
		tolerance = 1e-6
	)
	tgt := TargetInfo{Client: 0, Index: 1}
	c, cp := synthWorlds(1, n, dim, 3, tgt, 9)
	base := Config{Algorithm: algo.DPSGD, Model: model.Config{Kind: "softmax"}, Rounds: 1, LocalSteps: 1,
		LearningRate: eta, Schedule: "constant", ClipNorm: clip, NoiseStd: 0.05, Batching: "full", Seed: 4,
		Checkpoints: []int{1}, RecordParams: true}
	cfg := base
	cfg.Canaries = &canary.Config{Count: k, Kind: canary.Gradients, Norm: norm, Orthogonal: true}
	with := run(t, cfg, c, cp, tgt, PairRange{0, 2})[0]
	without := run(t, base, c, cp, tgt, PairRange{0, 2})[0]
	d := len(with.Replicas[0].Params)
	dirs := canary.OrthonormalDirections(cfg.Seed, k, d)
	for i, r := range with.Replicas {
		bits := datasets.InclusionBits(cfg.Seed, r.Pair, k)
		ref := without.Replicas[i].Params
		for j := 0; j < k; j++ {
			var along float64
			for q, x := range dirs[j*d : (j+1)*d] {
				along += float64(r.Params[q]-ref[q]) * float64(x)
			}
			want := 0.0
			if bits[j] {
				want = eta * clip
			}
			if math.Abs(along-want) > tolerance {
				t.Errorf("pair %d world %d canary %d (included %v): moved %.6g along it, want %.6g", r.Pair, r.World, j, bits[j], along, want)
			}
		}
	}
}
