package memory

import (
	"fmt"
	"math"

	"github.com/fedaudit/fedaudit/algo"
	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/nn"
	"github.com/fedaudit/fedaudit/train/canary"
	"github.com/fedaudit/fedaudit/train/model"
)

// Training is what the engine's allocations depend on, from a training configuration
// (train.Config's memoryTraining): the estimate needs nothing else, so it lives here beside
// its units, while train, which owns the engine, says what its configuration means for it.
type Training struct {
	Model                                model.Config
	Algorithm                            algo.Algorithm
	Batching                             algo.Batching
	BatchSize, LocalSteps, EvalBatch     int
	Informed, RecordUpload, RecordParams bool
	// NonGaussian: a mechanism whose noise the CPU draws on the host (an R x d buffer).
	NonGaussian bool
	// ClientDP: the DP-FedAvg family (its informed adversary keeps the target's update).
	ClientDP bool
	// PoissonMixture: the informed adversary averages over Poisson minibatches (a d-vector
	// of the target's noise per replica).
	PoissonMixture bool
	Canaries       *canary.Config
}

// Estimate estimates the engine's memory for a training on data of the given sizes, as the
// backend on allocates it (train.MemoryOf and train.MemoryOn document it).
func Estimate(t Training, s DataSizes, on Backend) (Memory, error) {
	if s.Dim < 1 || s.Classes < 1 || s.Clients < 1 || s.MaxSamples < 1 || s.TestSamples < 0 {
		return Memory{}, fmt.Errorf("memory estimate: sizes %+v: need positive dimensions", s)
	}
	if t.Model.Kind == model.External {
		return Memory{}, nil // never trained here: the engine allocates nothing for it
	}
	var (
		d      int
		sizes  []int
		err    error
		nnRows float64 // bytes per row of an nn model's workspace
	)
	if model.IsNNKind(t.Model.Kind) {
		dim := s.Dim
		if s.Shape == nil {
			dim = 0 // before the data is loaded Sizes has no shape: the dim is a stand-in
		}
		d, nnRows, err = model.NNMemoryOf(t.Model, s.Shape, dim, s.Classes)
	} else {
		d, sizes, err = model.DenseShape(t.Model, s.Dim, s.Classes)
	}
	if err != nil {
		return Memory{}, err
	}
	const f = 4.0 // bytes per float32
	maxRows, eb := memoryRows(t, s)
	wsRows := math.Max(maxRows, eb)

	perReplica := replicaVectors(t) * float64(d) * f
	perReplica += 2 * eb * f // evaluation loss and margin
	// Model workspace: pre-activations, deltas and (hidden layers) post-activations per row.
	perReplica += wsRows * model.MLPWorkspaceFloats(sizes) * f
	// nn models evaluate in slices of at most nnEvalRows(maxRows) rows (nnModel.eval).
	var nnFixed float64
	var winograd int
	if nnRows > 0 && on.device() {
		perRep, fixed, convs, err := nnDeviceMemory(t, s, int(maxRows), on)
		if err != nil {
			return Memory{}, err
		}
		perReplica += perRep
		nnFixed = fixed
		winograd = convs
	} else {
		perReplica += math.Max(maxRows, float64(model.NNEvalRows(int(maxRows)))) * nnRows
	}
	if t.Batching == algo.Fixed && nnRows == 0 {
		perReplica += float64(t.BatchSize) * float64(t.BatchSize) * f // delta Gram matrices
	}
	kb, window, h, deferred := deferredWindow(t, s, d, sizes, nnRows)
	if deferred {
		perReplica += (window + 2) * kb * h * f
	}
	perReplica += 16 * 8 // per-replica scalars (dots, seeds, statistics, row structs)
	if on.device() {
		perReplica += devicePieces(d)
	}
	perReplica, canaryFixed := addCanaryMemory(perReplica, t, s, d)

	// Fixed: the clients' data on the backend (the target client twice), the test set, the
	// gathered minibatch, w_0 and one host vector, the deferred minibatch windows.
	samples := float64(s.Clients+1)*float64(s.MaxSamples) + float64(s.TestSamples)
	fixed := samples * float64(s.Dim+1) * f
	fixed += maxRows*float64(s.Dim+1)*f + 2*float64(d)*f
	fixed += 2 * window * kb * float64(s.Dim+1) * f
	fixed += canaryFixed + nnFixed
	if deferred && on.device() && len(sizes) == 3 && !t.ClientDP {
		// Grouped clients (train/grouped.go): at most compute.MaxClientBatch replica steps of
		// pre-activations and parameters past the first matrix, and a window of Gram matrices.
		rest := float64(d - sizes[0]*sizes[1])
		fixed += compute.MaxClientBatch*(kb*h+rest)*f + window*kb*kb*f
	}
	return Memory{Params: d, Fixed: CeilBytes(fixed), PerPair: CeilBytes(2 * perReplica), WinogradConvolutions: winograd}, nil
}

// nnDeviceMemory splits an nn model's device workspace (nn.DeviceMemory) into bytes per
// replica and fixed bytes, from the counts for one pair and for two: the first layer's shared
// patches and the ones vector do not grow with the replicas.
func nnDeviceMemory(t Training, s DataSizes, maxRows int, on Backend) (perReplica, fixed float64, winograd int, err error) {
	dim := s.Dim
	if s.Shape == nil {
		dim = 0
	}
	form := nn.AnyConvForm
	if tile := on.WinogradTile(); tile != 0 {
		form = nn.WinogradForm(tile)
		if winograd, err = model.NNWinogradConvolutions(t.Model, s.Shape, dim, s.Classes); err != nil {
			return 0, 0, 0, err
		}
	}
	evalRows := model.NNEvalRows(maxRows)
	two, err := model.NNDeviceMemoryOf(t.Model, s.Shape, dim, s.Classes, 2, maxRows, evalRows, form)
	if err != nil {
		return 0, 0, 0, err
	}
	four, err := model.NNDeviceMemoryOf(t.Model, s.Shape, dim, s.Classes, 4, maxRows, evalRows, form)
	if err != nil {
		return 0, 0, 0, err
	}
	const f = 4.0 // bytes per float32
	perReplica = float64(four-two) / 2 * f
	return perReplica, max(0, float64(two)*f-2*perReplica), winograd, nil
}

// WorkspaceRows is the number of rows the engine sizes the model's workspace for: the local
// batch's and, for the flat models, the evaluation batch's. An nn model evaluates in slices of
// model.NNEvalRows of its rows instead: sized by the evaluation batch (256), its workspace
// would hold every replica's convolution patches of 256 images, on a GPU gigabytes that the
// memory estimate never counted (issue 26: ResNet-18 ran out of an 80 GB device at its first
// checkpoint).
func WorkspaceRows(t Training, maxRows, evalBatch int) int {
	if model.IsNNKind(t.Model.Kind) {
		return maxRows
	}
	return max(maxRows, evalBatch)
}

// memoryRows returns the most rows of a local minibatch (rounded up for Poisson batches) and
// the evaluation batch: the two row counts every workspace of the estimate is sized by.
func memoryRows(t Training, s DataSizes) (maxRows, eb float64) {
	maxRows = float64(s.MaxSamples)
	switch t.Batching {
	case algo.Fixed:
		maxRows = math.Min(maxRows, float64(t.BatchSize))
	case algo.Poisson:
		b := float64(t.BatchSize)
		maxRows = math.Min(maxRows, b+8*math.Sqrt(b)+16)
	}
	eb = float64(t.EvalBatch)
	if eb == 0 {
		eb = 256
	}
	return maxRows, eb
}

// replicaVectors counts the d-vectors each replica holds, kept apart because which ones exist
// depends on the options recorded and the mechanism.
func replicaVectors(t Training) float64 {
	// Per replica: g, l, acc, grad, noise; shadow (informed), upload (recorded); the host
	// noise buffer of non-Gaussian mechanisms, the DP-FedAvg family's target update and the
	// informed adversary's share of the noise under Poisson minibatches.
	vec := 5.0
	if t.Informed {
		vec++
	}
	if t.RecordUpload {
		vec++
	}
	if t.NonGaussian {
		vec++
	}
	if t.ClientDP && t.Informed {
		vec++
	}
	if t.PoissonMixture {
		vec++ // the target's share of the noise (poissonMixture.noiseT)
	}
	// The checkpoint's host copies of parameters and uploads, alive while rows are written.
	if t.RecordParams {
		vec++
	}
	if t.RecordUpload {
		vec++
	}
	return vec
}

// deferredWindow decides whether the engine defers first-layer updates (deferred.go) and over
// how many clients: K·B factor rows of the first hidden layer (width h) in a window of up to m
// clients, plus the shadow's and the product's. It returns K·B, the window (0 where not
// deferred), h and whether it defers; the caller adds the bytes, in the expression it always
// had.
func deferredWindow(t Training, s DataSizes, d int, sizes []int, nnRows float64) (kb, window, h float64, deferred bool) {
	kb = float64(t.LocalSteps) * float64(t.BatchSize)
	B := float64(t.BatchSize)
	if t.Model.Kind != "quadratic" && nnRows == 0 && t.Batching == algo.Fixed && t.Algorithm != algo.DPSGD && kb > 0 &&
		B <= float64(s.Dim) && kb-B <= float64(s.Dim) {
		h = float64(sizes[1])
		window = math.Max(1, math.Min(float64(s.Clients), math.Floor(4*float64(d)/(kb*h))))
		deferred = true
	}
	return kb, window, h, deferred
}

// devicePieces is the GPU backend's scratch for a replica's inner product of d-long rows (the
// gradient norm, the divergence check) beyond its partial sums: rows of at least 2^19 values
// split each of their kernels.Partials partial sums into kernels.PartialsFold pieces, 8 bytes
// each.
func devicePieces(d int) float64 {
	if fold := kernels.PartialsFold(d); fold > 1 {
		return float64(kernels.Partials * fold * 8)
	}
	return 0
}

// addCanaryMemory adds the canaries' bytes to perReplica and returns it with their fixed
// bytes: each replica's k observations of each canary statistic, twice (the engine's and the
// checkpoint's copies), and its bits; record canaries give every replica its own copy of the
// clients that hold them (at most all of them) and the canary records' losses; direction
// canaries add a d-vector of sampled updates per replica. It adds in the order the estimate
// always has, so the bytes are the same to the last bit.
func addCanaryMemory(perReplica float64, t Training, s DataSizes, d int) (float64, float64) {
	const f = 4.0 // bytes per float32
	var canaryFixed float64
	if cc := t.Canaries; cc != nil && cc.Count > 0 {
		k := float64(cc.Count)
		perReplica += k * (2*8*float64(len(cc.StatNames())) + 1)
		if cc.HasDirections() {
			perReplica += float64(d) * f
			canaryFixed = (k + 3) * float64(d) * f // the directions, w_0 and two host vectors
		} else {
			held := math.Min(float64(s.Clients), k)
			perReplica += held * float64(s.MaxSamples) * float64(s.Dim+1) * f
			canaryFixed = k * float64(s.Dim+1) * f
		}
	}
	return perReplica, canaryFixed
}
