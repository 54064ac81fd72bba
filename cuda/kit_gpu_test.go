//go:build gpu

package cuda_test

import (
	"context"
	"os"
	"testing"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/cuda/paritytest"
	"github.com/fedaudit/fedaudit/datasets"
	"github.com/fedaudit/fedaudit/train"
	"github.com/fedaudit/fedaudit/train/checkpoint"
	"github.com/fedaudit/fedaudit/train/memory"
	"github.com/fedaudit/fedaudit/train/model"
	"github.com/fedaudit/fedaudit/train/traintest"
)

// TestKitBenchW1GPU and TestKitBenchW2GPU are the validation kit's GPU benchmarks (skipped
// unless FEDAUDIT_BENCH_R is set): W1 or W2 at each requested replica count on device 0, one
// backend per count, with the device's SGEMM rate on 4096^3 products as the reference. With
// FEDAUDIT_CUDA_GRAPHS=1 the backend runs its batches as CUDA graphs ("gpu+graphs"); with
// FEDAUDIT_BENCH_PRECISION=tf32 or bf16 its matrix products run in that precision
// ("gpu-tf32", "gpu-bf16"); with FEDAUDIT_CUDA_PROFILE=1 every launch and GEMM is timed on the
// device and the result carries the profile ("gpu+profile"); with FEDAUDIT_CUDA_SPLITK=1 the
// products of small output and long depth run in depth slices ("gpu+splitk"); with
// FEDAUDIT_CUDA_PATCHCONV=1 every convolution runs by its patches, the small ones that run on
// the direct kernels by default and the stride-1 3x3 ones that run by Winograd's F(4x4, 3x3)
// ("gpu+patches"); with FEDAUDIT_CUDA_WINOGRAD2=1 those by F(2x2, 3x3) ("gpu+winograd2"); with
// FEDAUDIT_CUDA_DWROWS=2 or 4 the direct kernels' weight gradient by conv_direct_dw_win2 or
// _win4 ("gpu+dwrows2");
// FEDAUDIT_CUDA_ROWGROUP and FEDAUDIT_CUDA_LIGHTITEMS set the light kernels' launch shape
// ("gpu+rowgroup32+items1" is the launch shape of the sitting of 2026-11-27), and
// FEDAUDIT_CUDA_HIDDENBLOCK the fused hidden step's block ("gpu+hidden1024") and
// FEDAUDIT_CUDA_CLIENTBATCH the replica steps of grouped clients ("gpu+clientbatch1": a
// client at a time, as before grouped clients).
func TestKitBenchW1GPU(t *testing.T) { kitBenchGPU(t, paritytest.W1) }
func TestKitBenchW2GPU(t *testing.T) { kitBenchGPU(t, paritytest.W2) }

// TestKitBenchW3GPU is W3 (ResNet-18, GroupNorm, 3x32x32, B 32, K 1) on the device (issue 26,
// goal 3), beside the PyTorch forms of tools/bench/w3.py (torch.func vmap, a loop over replicas).
func TestKitBenchW3GPU(t *testing.T) { kitBenchGPU(t, paritytest.W3) }

func kitBenchGPU(t *testing.T, workload string) {
	replicas, rounds, ok, err := paritytest.BenchPlan(workload)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Skipf("set %s to run", paritytest.BenchEnv)
	}
	be := open(t, cuda.Options{})
	peak := sgemmRate(t, be, 4096, 20)
	name := be.Name()
	be.Close()
	t.Logf("device: %s; SGEMM 4096^3: %.0f GFLOP/s", name, peak)
	backend := "gpu"
	if os.Getenv(cuda.GraphEnv) == "1" {
		backend = "gpu+graphs"
	}
	profiled := os.Getenv(cuda.ProfileEnv) == "1"
	if profiled {
		backend = "gpu+profile" // graphs are off while profiling
	}
	if os.Getenv(cuda.SplitKEnv) == "1" {
		backend += "+splitk"
	}
	if os.Getenv(cuda.BiasCopiesEnv) == "1" {
		backend += "+biascopies"
	}
	if os.Getenv(cuda.PatchConvEnv) == "1" {
		backend += "+patches"
	}
	if os.Getenv(cuda.Winograd2Env) == "1" {
		backend += "+winograd2"
	}
	if n := os.Getenv(cuda.DirectDWRowsEnv); n == "2" || n == "4" { // other values choose nothing
		backend += "+dwrows" + n
	}
	// The launch shape, where set (that of the sitting of 2026-11-27: rowgroup 32, items 1).
	if g := os.Getenv(cuda.RowGroupEnv); g != "" {
		backend += "+rowgroup" + g
	}
	if n := os.Getenv(cuda.LightItemsEnv); n != "" {
		backend += "+items" + n
	}
	if n := os.Getenv(cuda.HiddenBlockEnv); n != "" {
		backend += "+hidden" + n
	}
	if n := os.Getenv(cuda.ClientBatchEnv); n != "" {
		backend += "+clientbatch" + n
	}
	precision := compute.Precision(os.Getenv(paritytest.BenchPrecisionEnv))
	forced := precision != "" && precision != compute.FP32
	if forced {
		backend += "-" + string(precision)
	}
	for _, r := range replicas {
		be := open(t, cuda.Options{})
		var engine compute.Backend = be
		if forced {
			// The trainings set fp32 from their configs; the benchmark forces its precision.
			engine = forcedPrecision{be, precision}
		}
		run := paritytest.RunW1
		switch workload {
		case paritytest.W2:
			run = paritytest.RunW2
		case paritytest.W3:
			run = paritytest.RunW3
		}
		res, err := run(context.Background(), engine, be.Sync, r, rounds)
		res.Backend, res.Device, res.SGEMMPeak = backend, name, peak
		if st := be.GraphStats(); st.Disabled != "" {
			res.Error = "graphs disabled: " + st.Disabled
		}
		if profiled && err == nil {
			var perr error
			if res.Profile, perr = be.Profile(); perr != nil {
				res.Error = perr.Error()
			}
		}
		if peak > 0 {
			res.OfPeak = res.GEMMGFlops / peak
		}
		if free, total, merr := be.FreeMemory(); merr == nil {
			res.MemoryUsed = total - free
		}
		be.Close()
		if err != nil {
			res.Error = err.Error()
			t.Errorf("R=%d: %v", r, err)
		}
		if aerr := paritytest.AppendBench(res); aerr != nil {
			t.Fatal(aerr)
		}
		t.Logf("%+v", res)
	}
}

// TestKitPrecisionDriftGPU is the kit's precision-drift step: paritytest.PrecisionDrift and,
// at 1,000 pairs of W1's 20 rounds, PrecisionDriftW1 on the device, how far tf32 and bf16
// products move a training and its certified bound (issue 26, goal 4), within the bounds
// stated there. The small MLP's products stayed on float32 kernels on an H100 (no difference at
// all); W1's are the tensor cores' shapes. W1 needs its 20 rounds for its statistic to
// separate: at 3 rounds the certified mu was 0 in every precision (the third sitting), at 20
// rounds and 300 pairs the CPU backend certifies 0.36 (informed, all iterates); 1,000 pairs of
// 20 rounds take about a second a precision on an H100. The small ResNet (PrecisionDriftResNet,
// 300 pairs) has its 3 x 3 convolutions by Winograd's F(2x2, 3x3), the GPU's default.
func TestKitPrecisionDriftGPU(t *testing.T) {
	f := func(t *testing.T, opt cuda.Options) paritytest.Backend { return open(t, opt) }
	t.Run("mlp", func(t *testing.T) { paritytest.PrecisionDrift(t, f, false) })
	t.Run("w1", func(t *testing.T) { paritytest.PrecisionDriftW1(t, f, 1000, 20) })
	t.Run("resnet", func(t *testing.T) { paritytest.PrecisionDriftResNet(t, f, 300, false) })
}

// forcedPrecision is a backend whose matrix products run in p whatever a training asks for.
type forcedPrecision struct {
	*cuda.Backend
	p compute.Precision
}

func (f forcedPrecision) SetPrecision(compute.Precision) error { return f.Backend.SetPrecision(f.p) }

// TestKitMemoryGPU measures the device memory a training holds at its peak (Ops.MemoryStats:
// the backend's own allocations, a checkpoint's evaluation included) for W1, W2 (LeNet-5) and
// a ResNet-18 of W3's shape (by Winograd's F(4x4, 3x3), the default, against the estimate for
// such a device, memory.DeviceWinograd4; by F(2x2, 3x3), Options.Winograd2, against
// memory.DeviceWinograd; and by patches, Options.PatchConv, against the estimate for a device
// of unknown options, memory.Device; W2 by the default's direct kernels and by patches), with
// 1 and 2 pairs, against the device estimate
// that `audit plan` prints and `audit train --backend gpu` sizes its groups by (train.MemoryOn):
// the estimate must not be below what the device held (issue 26: W3 ran out of an 80 GB GPU at
// its first checkpoint while the plan had estimated 1.2 GiB per pair).
func TestKitMemoryGPU(t *testing.T) {
	type workload struct {
		name  string
		cfg   train.Config
		c, cp []*datasets.Dataset
		tgt   train.TargetInfo
		opt   cuda.Options // the convolutions' form, and so the estimate's (memory.DeviceFor)
	}
	var ws []workload
	c, cp, tgt := traintest.W1Data()
	w1 := traintest.W1Config()
	w1.Rounds, w1.Checkpoints = 1, []int{1}
	ws = append(ws, workload{"W1", w1, c, cp, tgt, cuda.Options{}})
	c2, cp2, tgt2, err := traintest.W2Data()
	if err != nil {
		t.Fatal(err)
	}
	w2 := traintest.W2Config()
	w2.Rounds, w2.Checkpoints = 1, []int{1}
	ws = append(ws, workload{"W2", w2, c2, cp2, tgt2, cuda.Options{}})
	ws = append(ws, workload{"W2 by patches", w2, c2, cp2, tgt2, cuda.Options{PatchConv: true}})
	imgs, err := datasets.SyntheticImages(datasets.SyntheticImageConfig{Name: "w3", N: 2 * 64, Classes: 10, Channels: 3, Height: 32, Width: 32, Noise: 0.2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dim := 3 * 32 * 32
	var c3 []*datasets.Dataset
	for i := 0; i < 2; i++ {
		c3 = append(c3, &datasets.Dataset{Name: "w3-client", Shape: imgs.Shape, Classes: 10,
			Features: imgs.Features[i*64*dim : (i+1)*64*dim], Labels: imgs.Labels[i*64 : (i+1)*64]})
	}
	w3 := train.Config{Algorithm: algo.FedAvg, Model: model.Config{Kind: "resnet", Stages: 4, Blocks: 2, Width: 64, Groups: 32},
		Rounds: 1, LocalSteps: 1, LearningRate: 0.01, Schedule: "constant", ClipNorm: 1, NoiseStd: 0.01,
		Batching: algo.Fixed, BatchSize: 32, Seed: 3, Checkpoints: []int{1}}
	ws = append(ws, workload{"W3 (ResNet-18, 3x32x32, B 32) by patches", w3, c3, c3, train.TargetInfo{}, cuda.Options{PatchConv: true}})
	ws = append(ws, workload{"W3 with Winograd's F(2x2, 3x3)", w3, c3, c3, train.TargetInfo{}, cuda.Options{Winograd2: true}})
	ws = append(ws, workload{"W3 with Winograd's F(4x4, 3x3)", w3, c3, c3, train.TargetInfo{}, cuda.Options{}})
	for _, w := range ws {
		var on memory.Backend
		peak := func(pairs int) int64 {
			be := open(t, w.opt)
			on = memory.DeviceFor(be.WinogradTile())
			defer be.Close()
			job := train.Job{Config: w.cfg, WorldC: w.c, WorldCPrime: w.cp, Target: w.tgt, Pairs: train.PairRange{Count: pairs}}
			job.Recorder = cuda.CheckRecorder(be, discardRecorder{})
			if err := train.TrainOn(context.Background(), be, job); err != nil {
				t.Fatalf("%s, %d pairs: %v", w.name, pairs, err)
			}
			_, p := be.MemoryStats()
			return p
		}
		p1, p2 := peak(1), peak(2)
		est, err := train.MemoryOn(w.cfg, memory.SizesOf(w.c, nil), on)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: device peak %d bytes with 1 pair, %d with 2 (%d per pair); estimate %d + %d per pair (%.2fx per pair)",
			w.name, p1, p2, p2-p1, est.Fixed, est.PerPair, float64(est.PerPair)/float64(p2-p1))
		if est.Bytes(1) < p1 || est.Bytes(2) < p2 {
			t.Errorf("%s: estimate %d / %d bytes for 1 / 2 pairs, below the device's peak %d / %d", w.name, est.Bytes(1), est.Bytes(2), p1, p2)
		}
	}
}

type discardRecorder struct{}

func (discardRecorder) Checkpoint(context.Context, *checkpoint.Checkpoint) error { return nil }
