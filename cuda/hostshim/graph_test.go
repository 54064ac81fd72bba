//go:build cgo

package hostshim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/model"
)

// noCapture is the shim on a driver or cuBLAS that cannot capture a batch: the capture fails
// after the batch's launches were issued into it (recorded, not run), as a failed CUDA capture
// leaves nothing run.
type noCapture struct{ *Device }

func (n noCapture) CaptureGraph(size int, issue func(uint64) error) (cuda.Graph, error) {
	g, err := n.Device.CaptureGraph(size, issue)
	if err == nil {
		g.Destroy()
	}
	return nil, errors.New("stream capture is not supported here")
}

type memRec struct{ cps []*checkpoint.Checkpoint }

func (m *memRec) Checkpoint(_ context.Context, cp *checkpoint.Checkpoint) error {
	m.cps = append(m.cps, cp)
	return nil
}

// A device that cannot capture a batch turns graphs off at the first attempt and the batch
// runs directly: the run gives the bits of a run without graphs, and GraphStats says why
// graphs are off.
func TestGraphCaptureFailureFallsBack(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var wc []*datasets.Dataset
	for i := 0; i < 3; i++ {
		ds := &datasets.Dataset{Name: fmt.Sprint(i), Shape: []int{7}, Classes: 3, Features: make([]float32, 9*7), Labels: make([]int32, 9)}
		for j := range ds.Features {
			ds.Features[j] = float32(rng.NormFloat64())
		}
		for j := range ds.Labels {
			ds.Labels[j] = int32(rng.IntN(3))
		}
		wc = append(wc, ds)
	}
	wcp := slices.Clone(wc)
	alt := wc[0].Clone()
	alt.Labels[0] = (alt.Labels[0] + 1) % 3
	wcp[0] = alt
	cfg := train.Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "mlp", Hidden: []int{6}, Activation: "tanh"},
		Rounds: 3, LocalSteps: 2, LearningRate: 0.3, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.05,
		Batching: "fixed", BatchSize: 4, Seed: 7, Checkpoints: []int{3}, RecordParams: true}
	run := func(dev cuda.Device, opt cuda.Options) ([]*checkpoint.Checkpoint, cuda.GraphStats) {
		ops := cuda.NewOps(dev, opt)
		defer ops.Close()
		rec := &memRec{}
		job := train.Job{Config: cfg, WorldC: wc, WorldCPrime: wcp, Target: train.TargetInfo{}, Pairs: train.PairRange{Count: 2}, Recorder: cuda.CheckRecorder(ops, rec)}
		if err := train.TrainOn(context.Background(), ops, job); err != nil {
			t.Fatal(err)
		}
		if err := ops.Err(); err != nil {
			t.Fatal(err)
		}
		return rec.cps, ops.GraphStats()
	}
	want, _ := run(device(t), cuda.Options{Block: 32})
	got, st := run(noCapture{device(t)}, cuda.Options{Block: 32, Graphs: true})
	if st.Disabled == "" || st.Captured != 0 {
		t.Errorf("graph stats %+v: want graphs disabled with a reason and none captured", st)
	}
	for i := range want {
		for r := range want[i].Replicas {
			w, g := want[i].Replicas[r].Params, got[i].Replicas[r].Params
			for k := range w {
				if math.Float32bits(w[k]) != math.Float32bits(g[k]) {
					t.Fatalf("checkpoint %d replica %d param %d: %v, %v without graphs", i, r, k, g[k], w[k])
				}
			}
		}
	}
}
