package kernels

// Kernel names one kernel of the .cu sources.
type Kernel int

// The kernels, in no particular order; Name gives the entry point in the PTX.
const (
	Axpby Kernel = iota
	AddRow
	SumRows
	Gather
	Activate
	ActivateGrad
	SoftmaxXent
	ClipExamplesNorm
	ClipExamplesScale
	DotPartials
	ReducePartials
	ClipStep
	AddGaussian
	PhiloxRaw
	Dot2Partials
	ClipCoef
	AddRowActivate
	ActivateGradSumRows
	Im2col
	Col2im
	Pool
	PoolGrad
	TransposeBlocks
	GNStatsPartials
	GNStats
	GNForward
	GNGradSums
	GNGradFold
	GNGradReduce
	GNGradX
	HiddenStep
	MechNoise
	SplitKReduce
	ConvDirect
	ConvDirectDX
	ConvDirectDW
	PoolGradTiled
	AccumulateInOrder
	Im2colRows
	AddReLU
	WinoFilter
	WinoFilterGrad
	WinoInput
	WinoInputGrad
	WinoOutput
	WinoOutputGrad
	Wino4Filter
	Wino4FilterGrad
	Wino4Input
	Wino4InputGrad
	Wino4Output
	Wino4OutputGrad
	PoolGradKept
	ConvDirectWT
	ConvDirectDWWin2
	ConvDirectDWWin4
	AddCol
	SumCols
	AddColActivate
	ActivateGradSumCols
	numKernels
)

var kernelNames = [numKernels]string{
	Axpby: "axpby", AddRow: "add_row", SumRows: "sum_rows", Gather: "gather",
	Activate: "activate", ActivateGrad: "activate_grad", SoftmaxXent: "softmax_xent",
	ClipExamplesNorm: "clip_examples_norm", ClipExamplesScale: "clip_examples_scale",
	DotPartials: "dot_partials", ReducePartials: "reduce_partials", ClipStep: "clip_step",
	AddGaussian: "add_gaussian", PhiloxRaw: "philox_raw", Dot2Partials: "dot2_partials", ClipCoef: "clip_coef",
	AddRowActivate: "add_row_activate", ActivateGradSumRows: "activate_grad_sum_rows",
	Im2col: "im2col", Col2im: "col2im", Pool: "pool", PoolGrad: "pool_grad", TransposeBlocks: "transpose_blocks",
	GNStatsPartials: "gn_stats_partials", GNStats: "gn_stats", GNForward: "gn_forward",
	GNGradSums: "gn_grad_sums", GNGradFold: "gn_grad_fold", GNGradReduce: "gn_grad_reduce", GNGradX: "gn_grad_x",
	HiddenStep: "hidden_step", MechNoise: "mech_noise", SplitKReduce: "splitk_reduce",
	ConvDirect: "conv_direct", ConvDirectDX: "conv_direct_dx", ConvDirectDW: "conv_direct_dw",
	PoolGradTiled: "pool_grad_tiled", AccumulateInOrder: "accumulate_in_order", Im2colRows: "im2col_rows", AddReLU: "add_relu",
	WinoFilter: "wino_filter", WinoFilterGrad: "wino_filter_grad", WinoInput: "wino_input", WinoInputGrad: "wino_input_grad",
	WinoOutput: "wino_output", WinoOutputGrad: "wino_output_grad",
	Wino4Filter: "wino4_filter", Wino4FilterGrad: "wino4_filter_grad", Wino4Input: "wino4_input", Wino4InputGrad: "wino4_input_grad",
	Wino4Output: "wino4_output", Wino4OutputGrad: "wino4_output_grad", PoolGradKept: "pool_grad_kept",
	ConvDirectWT: "conv_direct_wt", ConvDirectDWWin2: "conv_direct_dw_win2", ConvDirectDWWin4: "conv_direct_dw_win4",
	AddCol: "add_col", SumCols: "sum_cols", AddColActivate: "add_col_activate", ActivateGradSumCols: "activate_grad_sum_cols",
}

// HiddenSharedFloats is the static shared memory of hidden_step in floats
// (HIDDEN_SHARED_FLOATS in step.cu): a replica's working set of more floats goes to global
// scratch.
const HiddenSharedFloats = 9216

// HiddenWorkingSet is the floats of a replica's working set in hidden_step for B rows, H
// hidden units and C classes (step.cu's layout: W2 and post with rows H|1 floats apart, b1,
// b2, dl, delta and the gradient): in shared memory when it is at most HiddenSharedFloats,
// else in global scratch of this many floats a replica.
func HiddenWorkingSet(B, H, C int) int {
	hp := H | 1
	return C*hp + H + C + B*hp + B*C + B*H + H + C*H + C
}

// HiddenBlock is the most threads per block of hidden_step (HIDDEN_BLOCK in step.cu, its
// launch bound).
const HiddenBlock = 1024

// Name is the kernel's entry point (its extern "C" name).
func (k Kernel) Name() string { return kernelNames[k] }

func (k Kernel) String() string { return k.Name() }

// All returns every kernel.
func All() []Kernel {
	ks := make([]Kernel, numKernels)
	for i := range ks {
		ks[i] = Kernel(i)
	}
	return ks
}

// Partials is the number of partial sums per batch element of the long reductions
// (FEDAUDIT_PARTIALS in common.cuh).
const Partials = 256

// GroupNormPartials is the number of float64 partial sums per group of GroupNorm's reductions
// (statistics, input gradient): a constant, so the sums never depend on the launch
// configuration. 32 keeps a group of a few hundred values split over enough threads without
// leaving most partial sums empty.
const GroupNormPartials = 32

// GroupNormPixelSlices is how many runs of consecutive pixels GroupNorm's gradient sums split
// a channel's hw pixels into (gn_grad_sums: a thread per run and sample): a power of two up to
// 32 that leaves each run at least 64 pixels, 1 below 128 pixels. ResNet-18's first stage (32
// x 32 pixels) takes 16: 262,144 threads of 64 pixels at 8 replicas of 32 samples, where one
// run a channel would leave 16,384 threads of 1,024. It depends on the shape alone, never on
// the launch.
func GroupNormPixelSlices(hw int) int {
	p := 1
	for p < 32 && hw >= 2*p*64 {
		p *= 2
	}
	return p
}

// GroupNormStatsFloats is the float32 units of GroupNorm's statistics of batch elements of N
// samples in groups groups: a float64 mean and rstd per batch element, sample and group.
func GroupNormStatsFloats(batch, N, groups int) int { return 2 * 2 * batch * N * groups }

// PoolIndexFloats is the float32 units of the window indices pool keeps for pool_grad_kept
// (cuda.Ops.PoolKeep) of batch elements of C channels of OH x OW windows of N samples: a byte
// a window and sample, four to a unit.
func PoolIndexFloats(batch, C, OH, OW, N int) int { return (batch*C*OH*OW*N + 3) / 4 }

// GroupNormGradScratch is the float64 values GroupNorm's gradient sums keep for batch elements
// of C channels of hw pixels of N samples: two sums per run (GroupNormPixelSlices) and, with
// several runs, two folds, per channel and sample.
func GroupNormGradScratch(batch, C, N, hw int) int {
	p := GroupNormPixelSlices(hw)
	s := 2 * batch * C * N * p
	if p > 1 {
		s += 2 * batch * C * N
	}
	return s
}

// PartialsFold is how many pieces dot_partials splits each of an inner product's Partials
// partial sums into, for rows of cols values: a power of two up to 32, one piece for every
// 1,024 values a partial would otherwise sum (so 1 below 2^19 values: W1's and LeNet-5's
// parameter rows; 32 for ResNet-18's 11.2 M). It depends on the row length alone, so that the
// sum's order, and its bits, never depend on the batch or the device.
func PartialsFold(cols int) int {
	f := 1
	for f < 32 && cols >= 2*f*Partials*1024 {
		f *= 2
	}
	return f
}

// The direct convolution kernels' tiles (CONV_PX, CONV_DX_PX, CONV_CT, CONV_COT and CONV_JT in
// conv.cu): conv_direct's thread computes ConvPX adjacent output pixels of a row;
// conv_direct_dx's ConvCT input channels of ConvDXPX adjacent input pixels at stride 1 (one
// pixel at other strides); conv_direct_dw's ConvCOT output channels of a window row (at most
// ConvJT columns at a time where the window is not 3 or 5 wide). The host sizes the launches
// and the weights' copies (conv_direct_wt) by them.
const (
	ConvPX   = 4
	ConvDXPX = 4
	ConvCT   = 8
	ConvCOT  = 8
	ConvJT   = 8
)
