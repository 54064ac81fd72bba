package train

import (
	"math"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cpu"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// paddedCPU is the CPU backend asking for rows aligned to align floats (compute.RowAligner, as
// the GPU backend does), with the padding of every buffer of R rows filled with NaN as it is
// allocated: an operation that read the padding would carry the NaN into the results.
type paddedCPU struct {
	*cpu.Backend
	align, d, pitch, R int
	bufs               []compute.Buffer // the buffers of R rows, to check their padding afterwards
}

func (p *paddedCPU) RowAlign() int { return p.align }

func (p *paddedCPU) Alloc(n int) compute.Buffer {
	b := p.Backend.Alloc(n)
	if p.pitch > p.d && n == p.R*p.pitch {
		nan := make([]float32, p.pitch-p.d)
		for i := range nan {
			nan[i] = float32(math.NaN())
		}
		for r := 0; r < n/p.pitch; r++ {
			p.Backend.Upload(b, r*p.pitch+p.d, nan)
		}
		p.bufs = append(p.bufs, b)
	}
	return b
}

// The engine's replica rows are addressed by the pitch compute.Pitch gives, so a backend that
// pads them (the GPU's 32 floats) sees the same operations on the same values: with the CPU
// backend asking for 32-float and 7-float alignment, every recorded value keeps the bits of
// the unpadded run, over the deferred, fused and direct forms, the DP-FedAvg family with host
// noise (Laplace) and the informed statistics, and a CNN reading its parameters in place; no
// operation writes the padding (it stays NaN), and the pitch is d rounded up.
func TestPitchKeepsBits(t *testing.T) {
	tgt := TargetInfo{Client: 1, Index: 2}
	c, cp := synthWorlds(4, 20, 12, 3, tgt, 9)
	base := mlpConfig()
	base.Rounds, base.LocalSteps, base.BatchSize, base.Checkpoints = 3, 3, 4, []int{1, 3}
	poisson := base
	poisson.Batching = "poisson"
	laplace := base
	laplace.Mechanism, laplace.Informed = algo.Laplace, false
	dp := base
	dp.Algorithm, dp.NoiseStd, dp.ClipNorm = algo.DPFedAvg, 0, 0
	dp.SamplingRate, dp.NoiseMultiplier, dp.UpdateClip, dp.ServerLR = 0.5, 0.8, 0.3, 1
	dp.Mechanism, dp.RecordUpload = algo.Laplace, false
	fedprox := base
	fedprox.Algorithm, fedprox.ProxAlpha = algo.FedProx, 0.4
	// Canaries: direction canary clients added to the server's sum (dp-fedavg), and record
	// canaries in the clients' sample slots.
	dpCanaries := dp
	dpCanaries.Mechanism = algo.Gaussian
	dpCanaries.Canaries = &canary.Config{Count: 5, Kind: canary.Direction}
	records := base
	records.Canaries = &canary.Config{Count: 4, Kind: "relabel"}
	cases := []struct {
		name   string
		cfg    Config
		direct bool
		images bool
	}{
		{"deferred", base, false, false}, {"fused", base, true, false}, {"direct-poisson", poisson, true, false},
		{"laplace-uploads", laplace, false, false}, {"fedprox", fedprox, false, false}, {"dpfedavg-laplace", dp, false, false},
		{"cnn", tinyCNN(), false, true},
		{"dpfedavg-direction-canaries", dpCanaries, false, false}, {"record-canaries", records, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wc, wcp := c, cp
			if tc.images {
				wc, wcp = imageWorlds(t, 3, 8, 1, 8, 8, 3, tgt)
			}
			run := func(be compute.Backend) ([]*checkpoint.Checkpoint, engineUnderTest) {
				return trainEngine(t, be, Job{Config: tc.cfg, WorldC: wc, WorldCPrime: wcp, Target: tgt, Pairs: PairRange{First: 1, Count: 2}}, tc.direct)
			}
			plain := cpu.New(2)
			defer plain.Close()
			want, e0 := run(plain)
			for _, align := range []int{32, 7} {
				be := &paddedCPU{Backend: cpu.New(2), align: align, d: e0.d, R: e0.R}
				be.pitch = (e0.d + align - 1) / align * align
				got, e := run(be)
				if e.pitch != be.pitch || e0.pitch != e0.d {
					t.Fatalf("align %d: pitch %d (unpadded %d), want %d (%d)", align, e.pitch, e0.pitch, be.pitch, e0.d)
				}
				if be.pitch == e0.d {
					t.Fatalf("align %d: d = %d needs no padding; pick another", align, e0.d)
				}
				sameBits(t, "padded", got, want)
				for _, b := range be.bufs {
					h := make([]float32, b.Len())
					be.Download(h, b, 0)
					for i, v := range h {
						if i%be.pitch >= be.d && !math.IsNaN(float64(v)) {
							t.Fatalf("align %d: padding value %d of a buffer was written (%v)", align, i, v)
						}
					}
				}
				if len(be.bufs) < 5 {
					t.Fatalf("align %d: only %d padded buffers seen", align, len(be.bufs))
				}
				be.Close()
			}
		})
	}
}
