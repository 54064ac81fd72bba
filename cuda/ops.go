package cuda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"unsafe"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/kernels"
	"github.com/fedaudit/fedaudit/train/checkpoint"
)

// Ops implements compute.Backend on a Device: it turns every operation into kernel launches
// (and cuBLAS calls for Gemm) on device buffers. compute.Backend's methods return no errors, so
// Ops keeps the first device error, turns every later operation into a no-op and reports the
// error from Err; a caller must check Err before trusting anything it downloaded (see
// CheckRecorder).
type Ops struct {
	dev         Device
	block       int
	maxGrid     int
	maxBatch    int
	syncEach    Syncer               // nil unless Options.SyncEachLaunch and the device is asynchronous
	prof        *profiler            // nil unless Options.Profile; then dev is prof
	splitK      int                  // the depth of a slice of a product computed in slices; 0: never
	direct      bool                 // small convolutions by the direct kernels (unless Options.PatchConv, NoDirectConv)
	dwRows      int                  // Options.DirectDWRows: 2, 4, or 0 for conv_direct_dw
	biasCopies  bool                 // Options.BiasCopies
	winoTile    compute.WinogradTile // the convolutions' form: 0 with Options.PatchConv
	rowGroupMax int                  // Options.RowGroup
	lightItems  int                  // Options.LightItems
	hiddenBlock int                  // threads per block of hidden_step (Options.HiddenBlock)
	clientBatch int                  // replica steps per grouped hidden step (Options.ClientBatch)
	err         error
	math        Math // the matrix products' precision (SetPrecision)

	// allocs maps the address of every live allocation to its bytes; live and peak sum them
	// now and at most (MemoryStats).
	allocs     map[uint64]int
	live, peak int64

	// The queued batch (queue.go): records, their arguments, the positions of staged
	// arguments among them, and the batch's staged bytes.
	queue     []record
	qargs     []uint64
	qstaged   []int32
	arena     []byte
	stageOffs []uint64
	unbatched bool // issue every launch at once
	batches   int
	// CUDA graphs (queue.go): the device that captures them, when graphs are on.
	graphDev   GraphDevice
	graphs     []*cachedGraph
	graphUse   int
	graphStats GraphStats

	part   scratch // partial sums of the long reductions
	sums   scratch // per-batch-element reduction results, per-example norms
	gn     scratch // GroupNorm's statistics and the means of its input gradient
	hidden scratch // HiddenStep's working sets when they do not fit in shared memory
	slices scratch // the partial products of a product computed in depth slices (SplitK)
	convW  scratch // the direct convolution's copy of its weights (conv_direct_wt)
	runs   []int32
	round  [1]uint32
	stream [1]uint32 // AddNoise's one stream, staged without an allocation
	use    []byte
	host   []float64
	args   args
}

// scratch is a device array of float64 that grows on demand.
type scratch struct {
	addr uint64
	n    int
}

// buffer is a compute.Buffer in device memory.
type buffer struct {
	addr uint64
	n    int
}

func (b *buffer) Len() int { return b.n }

// Options tune the launch configuration; the zero value picks the defaults. Results never
// depend on them (kernels use grid-stride loops and launch-independent reduction orders);
// tests use odd values to prove it.
type Options struct {
	// Block is the threads per block, default 256, at most maxBlock (256): a larger value is
	// lowered to it (see maxBlock).
	Block   int
	MaxGrid int // most blocks per launch, default 65535
	// MaxGemmBatch is the most batch elements of one Device.Gemm call, default (and at most)
	// 65535; larger batches are split into several calls. Tests set it small to exercise the
	// split.
	MaxGemmBatch int
	// SyncEachLaunch makes Ops wait for the device after every kernel launch and GEMM, so an
	// asynchronous fault (an out-of-bounds access) is reported with the kernel that caused it
	// instead of at the next copy. It is slow: for debugging only. The environment variable
	// FEDAUDIT_CUDA_SYNC=1 turns it on for every Ops.
	SyncEachLaunch bool
	// Unbatched issues every launch and GEMM as it is made, with its own staged copy of its
	// arguments, instead of queueing them until the host needs the device (queue.go); for
	// debugging. SyncEachLaunch implies it.
	Unbatched bool
	// Graphs runs each batch as a CUDA graph on devices that can capture them (GraphDevice):
	// captured once, replayed for every later identical batch. Off by default until measured
	// on hardware; the environment variable FEDAUDIT_CUDA_GRAPHS=1 turns it on too. Ignored
	// when unbatched.
	Graphs bool
	// Profile times every kernel launch and GEMM on the device (CUDA events between them; the
	// host's clock on the shim) and sums the times per kernel and per GEMM shape (Ops.Profile):
	// where a workload's time goes. The marks cost a little device time each and graphs are
	// not used, so a profiled run is not a benchmark. FEDAUDIT_CUDA_PROFILE=1 turns it on too.
	Profile bool
	// SplitK computes a matrix product whose output is small for the device beside its depth
	// (fewer than 256 output tiles of 128 x 128 over the batch, and at least two slices of
	// SplitKDepth: a convolution's weight gradient at few replicas, a reduction over every
	// pixel and sample) in depth slices: the slices' partial products into scratch, the
	// slices of a batch element in one strided-batched cuBLAS call where they are equally
	// deep, then one kernel (splitk_reduce) adding the slices in order. A strided-batched
	// product gets one thread block per output tile and batch element, so such a product
	// otherwise runs its whole depth on a few multiprocessors. The slices follow from the
	// product's shape alone, never from the device, and the sums are float32 as cuBLAS's;
	// results differ from the unsplit product in the last bits. Off by default until measured
	// on hardware (the one measurement, in the second sitting, issued each slice as a call of
	// its own, which gave the device no more tiles at once); FEDAUDIT_CUDA_SPLITK=1 turns it
	// on too.
	SplitK bool
	// SplitKDepth is the least depth of a slice (default 512: W3's second-stage weight
	// gradients, 8,192 deep, split in 16 at R 8); tests set it small to split small products.
	SplitKDepth int
	// BiasCopies keeps every convolution's [weights | bias] copies, as before the eleventh
	// session, instead of reading the weights in place where they outweigh the output
	// (compute.BiasApart): the same bits on the shim, for timing the two forms in one sitting.
	// FEDAUDIT_CUDA_BIASCOPIES=1 turns it on too.
	BiasCopies bool
	// PatchConv computes every convolution by its patches (im2col, a product by the patches,
	// col2im), as before the thirteenth session. By default two kinds run otherwise:
	//
	//   - the 3 x 3 convolutions at stride 1 with padding 1 of at least 16 input and output
	//     channels (ResNet-18's but the stem and the stride-2 ones) by Winograd's F(4x4, 3x3)
	//     (compute.Winograder: the kernels wino4_* and 36 products per replica of depth Cin,
	//     4 times fewer multiplications than the patch form), forward and backward;
	//   - the small convolutions of an input per replica (at most 32 output channels of at
	//     most 512 patch rows: LeNet-5's second) and their gradients by the kernels
	//     conv_direct, conv_direct_dx and conv_direct_dw (compute.DirectConvolver): no patches
	//     are written or read, and the weights are copied (conv_direct_wt) for the kernels'
	//     loads instead of beside the bias.
	//
	// Winograd's results differ from the patch form's by rounding (the transforms are not
	// exact in float32; cuda/paritytest bounds them); the direct kernels sum the same terms in
	// the same order. On an H200 (docs/benchmark-log.md, the sixth sitting) F(4x4, 3x3) ran W3
	// 1.12x to 1.25x faster than F(2x2, 3x3), itself 1.28x to 1.42x the patch form, and the
	// direct kernels ran W2 1.07x faster than the patch form. FEDAUDIT_CUDA_PATCHCONV=1 turns
	// it on too.
	PatchConv bool
	// NoDirectConv computes the small convolutions that the direct kernels take by default
	// (PatchConv's second kind above) by their patches, while the others keep their forms:
	// the form nn's device memory count follows (nn.DeviceMemory counts those convolutions
	// by their patches, an upper bound of the direct kernels' scratch), so that a test can
	// hold the count to the device's peak.
	NoDirectConv bool
	// DirectDWRows chooses the direct kernels' weight gradient where each partial sum takes one
	// sample at stride 1 with a 3 or 5 window (LeNet-5's second convolution): 0 (the default)
	// conv_direct_dw, a thread per 8 output channels and window row; 2 or 4
	// conv_direct_dw_win2 or _win4, a thread per 2 or 4 output channels and input channel
	// covering the whole window, so that each gradient value it loads serves 9 or 25 products
	// instead of 3 or 5 (the same sums in the same order; other values: the default). Timed
	// once on an H200 (docs/benchmark-log.md, the sixth sitting's third call; the kit's
	// bench-gpu-w2-dwrows2 and -dwrows4): W2 with 2 1.04x the default at 1,024 replicas and
	// 0.98x at 64, with 4 1.01x and 0.97x, so off until profiled. FEDAUDIT_CUDA_DWROWS sets it
	// too.
	DirectDWRows int
	// Winograd2 computes the convolutions that run by Winograd's form (not with PatchConv) by
	// F(2x2, 3x3) instead of F(4x4, 3x3): 16 products per replica make a 2 x 2 output tile, 4
	// transformed values a pixel instead of 2.25, and fewer roundings (the form before the
	// eighteenth session). FEDAUDIT_CUDA_WINOGRAD2=1 turns it on too.
	Winograd2 bool
	// RowGroup is the most threads that share a row of samples in the image kernels (im2col,
	// col2im, pool, pool_grad), a power of two up to 32 (default 8; other values are rounded
	// down to one). LightItems is how many items a thread of the light kernels (the image
	// kernels and the elementwise ones) takes in a launch large enough (default 4; 1 is one a
	// thread). RowGroup 32 with LightItems 1 is the launch shape of the H100 sitting of
	// 2026-11-27, before these options: the kit times both in one sitting. The environment
	// variables FEDAUDIT_CUDA_ROWGROUP and FEDAUDIT_CUDA_LIGHTITEMS set them too.
	RowGroup, LightItems int
	// HiddenBlock is the threads per block of the fused hidden step (hidden_step), at most
	// 1,024 (kernels.HiddenBlock); 0 keeps Block's (at most 256). hidden_step runs a block
	// per replica, so at few replicas (W1 at 64: 64 blocks) larger blocks give each replica's
	// step more threads. Off by default until measured on hardware (the kit's
	// bench-gpu-hidden1024); FEDAUDIT_CUDA_HIDDENBLOCK sets it too.
	HiddenBlock int
	// ClientBatch is the most replica steps (replicas times clients) one launch of the fused
	// hidden step takes when the engine runs several clients' local steps of a round together
	// (compute.ClientBatcher; train/grouped.go): default 2,048, at most
	// compute.MaxClientBatch, 1 to run a client at a time. W1 at 64 replicas otherwise
	// launches 64 blocks per step, 55 launches a round. FEDAUDIT_CUDA_CLIENTBATCH sets it too.
	ClientBatch int
}

// ClientBatchEnv is the environment variable that sets Options.ClientBatch.
const ClientBatchEnv = "FEDAUDIT_CUDA_CLIENTBATCH"

// defaultClientBatch fills an H100's 132 multiprocessors about four times over with
// hidden_step's blocks (4 of 256 threads fit one by registers).
const defaultClientBatch = 2048

// HiddenBlockEnv is the environment variable that sets Options.HiddenBlock.
const HiddenBlockEnv = "FEDAUDIT_CUDA_HIDDENBLOCK"

// RowGroupEnv and LightItemsEnv are the environment variables that set Options.RowGroup and
// Options.LightItems (a positive integer; anything else leaves the default).
const (
	RowGroupEnv   = "FEDAUDIT_CUDA_ROWGROUP"
	LightItemsEnv = "FEDAUDIT_CUDA_LIGHTITEMS"
)

// BiasCopiesEnv is the environment variable that turns on Options.BiasCopies.
const BiasCopiesEnv = "FEDAUDIT_CUDA_BIASCOPIES"

// PatchConvEnv is the environment variable that turns on Options.PatchConv.
const PatchConvEnv = "FEDAUDIT_CUDA_PATCHCONV"

// DirectDWRowsEnv is the environment variable that sets Options.DirectDWRows.
const DirectDWRowsEnv = "FEDAUDIT_CUDA_DWROWS"

// Winograd2Env is the environment variable that turns on Options.Winograd2.
const Winograd2Env = "FEDAUDIT_CUDA_WINOGRAD2"

// winogradTile is the form of the convolutions that fit under opt and the environment: none
// (patches) with PatchConv, else F(2x2, 3x3) with Winograd2, else F(4x4, 3x3).
func winogradTile(opt Options) compute.WinogradTile {
	switch {
	case opt.PatchConv || SwitchOn(PatchConvEnv):
		return 0
	case opt.Winograd2 || SwitchOn(Winograd2Env):
		return compute.WinogradF2
	}
	return compute.WinogradF4
}

// EnvWinogradTile is the form of the convolutions that fit on a GPU of default Options in
// this environment (FEDAUDIT_CUDA_PATCHCONV, FEDAUDIT_CUDA_WINOGRAD2): what a plan made here
// counts the device memory by.
func EnvWinogradTile() compute.WinogradTile { return winogradTile(Options{}) }

// SplitKEnv is the environment variable that turns on Options.SplitK.
const SplitKEnv = "FEDAUDIT_CUDA_SPLITK"

// SyncEnv is the environment variable that turns on Options.SyncEachLaunch.
const SyncEnv = "FEDAUDIT_CUDA_SYNC"

// maxBlock is the most threads per block Ops launches with: the largest block that every
// kernel can launch with whatever registers ptxas gives it (a thread may have 255; 256 threads
// of 256 registers fill the 65,536 registers of a block). A larger block fails on a GPU with
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for a kernel of more than 65,536 / block registers a
// thread: at 1,024 threads more than 64, which pool_grad (127 to 128 registers on sm_70 to
// sm_90), pool (96 to 119), im2col (71 to 88), gn_grad_sums (72 on sm_90, 96 on sm_70) and, depending on
// the architecture, mech_noise, add_gaussian and softmax_xent exceed; at 512 threads 128,
// which pool_grad just reaches on sm_70. The host shim has no register limit, so only a GPU
// shows it.
const maxBlock = 256

// Syncer is implemented by devices that run work asynchronously: Sync waits for all work
// issued so far and returns any error it raised.
type Syncer interface {
	Sync() error
}

// NewOps returns the backend operations on dev.
func NewOps(dev Device, opt Options) *Ops {
	if opt.Block <= 0 || opt.Block > maxBlock {
		opt.Block = maxBlock
	}
	if opt.MaxGrid <= 0 {
		opt.MaxGrid = 65535
	}
	if opt.MaxGemmBatch <= 0 || opt.MaxGemmBatch > maxGemmBatch {
		opt.MaxGemmBatch = maxGemmBatch
	}
	o := &Ops{dev: dev, block: opt.Block, maxGrid: opt.MaxGrid, maxBatch: opt.MaxGemmBatch, unbatched: opt.Unbatched}
	if opt.SplitK || SwitchOn(SplitKEnv) {
		o.splitK = opt.SplitKDepth
		if o.splitK <= 0 {
			o.splitK = 512
		}
	}
	o.direct = !opt.PatchConv && !opt.NoDirectConv && !SwitchOn(PatchConvEnv)
	o.biasCopies = opt.BiasCopies || SwitchOn(BiasCopiesEnv)
	if r := optOrEnv(opt.DirectDWRows, DirectDWRowsEnv, 0); r == 2 || r == 4 {
		o.dwRows = r
	}
	o.winoTile = winogradTile(opt)
	o.rowGroupMax = powerOfTwoAtMost(optOrEnv(opt.RowGroup, RowGroupEnv, defaultRowGroup), 32)
	o.lightItems = optOrEnv(opt.LightItems, LightItemsEnv, defaultLightItems)
	o.hiddenBlock = min(optOrEnv(opt.HiddenBlock, HiddenBlockEnv, min(o.block, maxBlock)), kernels.HiddenBlock)
	o.clientBatch = min(optOrEnv(opt.ClientBatch, ClientBatchEnv, defaultClientBatch), compute.MaxClientBatch)
	if profileWanted(opt) {
		o.prof = newProfiler(dev)
		o.dev = o.prof
	}
	if opt.SyncEachLaunch || SwitchOn(SyncEnv) {
		o.syncEach, _ = dev.(Syncer)
		o.unbatched = true
	}
	if graphsWanted(opt) && !o.unbatched && o.prof == nil {
		o.graphDev, _ = dev.(GraphDevice)
	}
	return o
}

// synced waits for the device after a launch or GEMM when SyncEachLaunch is on, and names the
// operation in any error the wait reports.
func (o *Ops) synced(what string) {
	if o.syncEach == nil || o.err != nil {
		return
	}
	if err := o.syncEach.Sync(); err != nil {
		o.fail(what, fmt.Errorf("failed (found by synchronizing after it, %s=1): %w", SyncEnv, err))
	}
}

var _ compute.Backend = (*Ops)(nil)

// Err issues the queued work and returns the first device error, or nil. Errors of the
// device's asynchronous execution surface at the next read (Download, Dots) or Sync.
// GemmInOrder reports whether the device's products sum every element's depth in index order
// whatever the call's shape (InOrderGemmer): then results that differ only in how products
// are grouped into calls have the same bits.
func (o *Ops) GemmInOrder() bool {
	g, ok := o.dev.(InOrderGemmer)
	return ok && g.GemmInOrder()
}

func (o *Ops) Err() error {
	o.flush()
	return o.err
}

func (o *Ops) fail(op string, err error) {
	if err != nil && o.err == nil {
		o.err = fmt.Errorf("kernels: %s: %w", op, err)
	}
}

// FreeAll frees every buffer and graph, as Close does, and leaves the Ops usable: between two
// groups of pairs trained on one device (train.TrainInGroups), so the next group's engine
// finds the device memory the previous one held. Buffers allocated before must not be used
// afterwards. It returns what Close returns.
func (o *Ops) FreeAll() error { return o.Close() }

// Close issues the queued work, then frees every buffer the backend allocated, even after an
// error; buffers must not be used afterwards. It returns the backend's first error (the one Err
// reports, including one that the queued work raises now) joined with the first error met
// while releasing (and how many more there were): the contract of the Device doc, the same on
// every device.
func (o *Ops) Close() error {
	o.flush()
	var failed []error
	if err := o.closeGraphs(); err != nil {
		failed = append(failed, err)
	}
	if o.prof != nil {
		// The totals stay (FreeAll leaves the Ops usable); a timing error is Profile's to report.
		_ = o.prof.release()
	}
	for _, a := range slices.Sorted(maps.Keys(o.allocs)) { // one order, whatever the map's
		if err := o.dev.Free(a); err != nil {
			failed = append(failed, fmt.Errorf("free: %w", err))
		}
	}
	o.allocs, o.live = nil, 0
	o.part, o.sums, o.gn, o.hidden, o.slices, o.convW = scratch{}, scratch{}, scratch{}, scratch{}, scratch{}, scratch{}
	return errors.Join(o.err, firstOf(failed))
}

// firstOf is the first of errs, with the number of the others (a device that has failed for
// good, such as a CUDA context after a fault, fails every release with the same error).
func firstOf(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more errors while releasing)", errs[0], len(errs)-1)
}

func (o *Ops) alloc(op string, bytes int) uint64 {
	if o.err != nil {
		return 0
	}
	a, err := o.dev.Alloc(max(bytes, 4))
	if err != nil {
		o.fail(op, fmt.Errorf("alloc %d bytes: %w", bytes, err))
		return 0
	}
	if o.allocs == nil {
		o.allocs = map[uint64]int{}
	}
	o.allocs[a] = max(bytes, 4)
	o.live += int64(max(bytes, 4))
	o.peak = max(o.peak, o.live)
	return a
}

// MemoryStats returns the device memory this Ops holds now and the most it held at once, in
// bytes: its own allocations, not the driver's or cuBLAS's workspace. The validation kit
// compares the peak with the memory estimate (train.MemoryOn) on the GPU.
func (o *Ops) MemoryStats() (live, peak int64) { return o.live, o.peak }

// grow returns s with room for n float64 values.
func (o *Ops) grow(s *scratch, n int) uint64 {
	if s.n < n && o.err == nil {
		n = max(n, 2*s.n)
		if s.addr != 0 {
			o.free(s.addr)
		}
		s.addr, s.n = o.alloc("scratch", 8*n), n
	}
	return s.addr
}

func (o *Ops) free(addr uint64) {
	o.flush() // queued launches may use the memory
	o.live -= int64(o.allocs[addr])
	delete(o.allocs, addr)
	o.fail("free", o.dev.Free(addr))
}

// Release implements compute.Releaser: the buffer's device memory is freed once the queued
// launches that may use it are issued; b must not be used afterwards (its address is cleared,
// so a use the host shim checks fails loudly).
func (o *Ops) Release(b compute.Buffer) {
	buf, ok := b.(*buffer)
	if !ok || buf.addr == 0 {
		return
	}
	o.free(buf.addr)
	buf.addr, buf.n = 0, 0
}

// Alloc implements compute.Backend.
func (o *Ops) Alloc(n int) compute.Buffer {
	return &buffer{addr: o.alloc("alloc", 4*n), n: n}
}

// Upload implements compute.Backend.
func (o *Ops) Upload(dst compute.Buffer, off int, src []float32) {
	if o.err != nil || len(src) == 0 {
		return
	}
	o.flush()
	o.fail("upload", o.dev.Write(dst.(*buffer).addr+4*uint64(off), f32bytes(src)))
}

// Download implements compute.Backend.
func (o *Ops) Download(dst []float32, src compute.Buffer, off int) {
	if o.err != nil || len(dst) == 0 {
		return
	}
	o.flush()
	o.fail("download", o.dev.Read(f32bytes(dst), src.(*buffer).addr+4*uint64(off)))
}

func f32bytes(s []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }

func f64bytes(s []float64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)) }

// addr is the device address of m's element (0, 0) of batch element 0, or 0 without a buffer.
func addr(m compute.Mat) uint64 {
	if m.Buf == nil {
		return 0
	}
	return m.Buf.(*buffer).addr + 4*uint64(m.Off)
}

// args collects kernel arguments; kinds records their types for the signature tests, staged
// the positions of the arguments that are offsets into the batch's staged bytes.
type args struct {
	v      []uint64
	kinds  []byte
	staged []int32
}

func (a *args) reset() *args { a.v, a.kinds, a.staged = a.v[:0], a.kinds[:0], a.staged[:0]; return a }

func (a *args) add(v uint64, kind byte) *args {
	a.v = append(a.v, v)
	a.kinds = append(a.kinds, kind)
	return a
}

// Argument kinds, matched against the PTX parameter types by the tests.
const (
	kindPtr = 'p' // .u64 address
	kindI64 = 'l' // .u64 (long long)
	kindI32 = 'i' // .u32 (int, unsigned)
	kindF32 = 'f' // .f32
	kindF64 = 'd' // .f64
	kindStg = 's' // .u64 address of staged arguments
)

func (a *args) ptr(p uint64) *args { return a.add(p, kindPtr) }

// stg adds the address of staged arguments at offset off of the batch's staged bytes (patched
// when the batch is issued), or a null pointer when ok is false.
func (a *args) stg(off uint64, ok bool) *args {
	if !ok {
		return a.ptr(0)
	}
	a.staged = append(a.staged, int32(len(a.v)))
	return a.add(off, kindStg)
}
func (a *args) i64(n int) *args         { return a.add(uint64(int64(n)), kindI64) }
func (a *args) u32(n uint32) *args      { return a.add(uint64(n), kindI32) }
func (a *args) f32(f float32) *args     { return a.add(uint64(math.Float32bits(f)), kindF32) }
func (a *args) f64(f float64) *args     { return a.add(math.Float64bits(f), kindF64) }
func (a *args) mat(m compute.Mat) *args { return a.ptr(addr(m)).i64(m.Stride).i64(m.BatchStride) }

// launch runs k over total independent work items, one thread per item up to maxGrid blocks.
func (o *Ops) launch(k kernels.Kernel, total int) {
	if o.err != nil || total <= 0 {
		return
	}
	grid := min((total+o.block-1)/o.block, o.maxGrid)
	o.queueLaunch(k, grid, o.block)
}

// Light kernels (elementwise and the image row kernels) do a few instructions of work per item
// but split their first index into coordinates by divisions once per thread (rc_start,
// md_start in kernels/): with one thread per item that set-up was most of their instructions
// (Nsight Compute on an H100: pool_grad, im2col and col2im at 3-20% of the memory bandwidth
// with the SMs busy). defaultLightItems items per thread pay it once for several; the grid
// stays at least lightMinGrid blocks (a full H100 holds 132 x 8 blocks of 256 threads), so
// small launches keep one item per thread.
const (
	defaultLightItems = 4
	lightMinGrid      = 1024
)

// launchLight runs light kernel k over total items, o.lightItems to a thread where the launch
// is large enough. The kernels' results do not depend on the grid (kernels/common.cuh).
func (o *Ops) launchLight(k kernels.Kernel, total int) {
	if o.err != nil || total <= 0 {
		return
	}
	o.queueLaunch(k, lightGrid(total, o.block, o.maxGrid, o.lightItems), o.block)
}

// lightGrid is the grid of a light launch over total items in blocks of block threads, items
// to a thread where that leaves at least lightMinGrid blocks.
func lightGrid(total, block, maxGrid, items int) int {
	full := (total + block - 1) / block
	grid := max((full+items-1)/items, min(full, lightMinGrid))
	return min(grid, maxGrid)
}

// optOrEnv is v when positive, else the environment variable env when it holds a positive
// integer, else def.
func optOrEnv(v int, env string, def int) int {
	if v > 0 {
		return v
	}
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return def
}

// powerOfTwoAtMost is the largest power of two that is at most min(v, limit), for v >= 1.
func powerOfTwoAtMost(v, limit int) int {
	g := 1
	for 2*g <= min(v, limit) {
		g *= 2
	}
	return g
}

// stageBytes appends the pieces to the batch's staged bytes (each 8-byte aligned) and returns
// each piece's offset there, for args.stg; the slice is reused by the next call.
func (o *Ops) stageBytes(pieces ...[]byte) []uint64 {
	o.stageOffs = o.stageOffs[:0]
	for _, p := range pieces {
		for len(o.arena)%8 != 0 {
			o.arena = append(o.arena, 0)
		}
		o.stageOffs = append(o.stageOffs, uint64(len(o.arena)))
		o.arena = append(o.arena, p...)
	}
	return o.stageOffs
}

// ld is the leading dimension cuBLAS sees for a row-major matrix: its row stride, which a
// single row may leave smaller than its width.
func ld(m compute.Mat) int {
	if m.Rows <= 1 {
		return max(m.Stride, m.Cols, 1)
	}
	return m.Stride
}

// maxGemmBatch bounds the batch of one cuBLAS call (older cuBLAS versions map the batch to a
// grid dimension limited to 65535).
const maxGemmBatch = 65535

// Gemm implements compute.Backend. Row-major C = op(A) op(B) is column-major C^T = op(B)^T
// op(A)^T, so cuBLAS is called with the operands swapped.
func (o *Ops) Gemm(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, c compute.Mat) {
	m, n := c.Rows, c.Cols
	k := a.Cols
	if transA {
		k = a.Rows
	}
	if o.err != nil || m == 0 || n == 0 || c.Batch == 0 {
		return
	}
	if sa, sc, ok := stackRows(transA, a, b, c); ok {
		a, c, m = sa, sc, sc.Rows
	}
	for b0 := 0; b0 < c.Batch; b0 += o.maxBatch {
		nb := min(o.maxBatch, c.Batch-b0)
		if slices := splitCount(m, n, k, nb, o.splitK); slices > 1 {
			o.gemmSliced(transA, transB, alpha, a, b, beta, c, b0, nb, slices)
			continue
		}
		g := GemmArgs{
			TransA: transB, TransB: transA, M: n, N: m, K: k, Alpha: alpha, Beta: beta,
			A: addr(b) + 4*uint64(b0*b.BatchStride), LDA: ld(b), StrideA: int64(b.BatchStride),
			B: addr(a) + 4*uint64(b0*a.BatchStride), LDB: ld(a), StrideB: int64(a.BatchStride),
			C: addr(c) + 4*uint64(b0*c.BatchStride), LDC: ld(c), StrideC: int64(c.BatchStride),
			Batch: nb, Math: o.math,
		}
		o.queueGemm(g)
	}
}

// stackRows turns a batched product with one shared right operand, C_r = A_r op(B), into one
// product of the batch's rows stacked, [C_0; C_1; ...] = [A_0; A_1; ...] op(B), where the batch
// elements of A and C follow each other row after row (batch stride = rows x row stride). A
// batched cuBLAS call tiles each element's few rows on their own (LeNet-5's first convolution:
// 6 output channels a replica, on the patches that every replica shares), one call of R times
// the rows fills its tiles. Each element of C is the same sum of the same products; a
// product that sums in order (the host shim) gives the same bits, cuBLAS may round the taller
// product differently (the GEMM tolerance).
func stackRows(transA bool, a, b, c compute.Mat) (sa, sc compute.Mat, ok bool) {
	m, k := c.Rows, a.Cols
	if transA || c.Batch < 2 || b.BatchStride != 0 || a.Rows != m || a.Stride < k || c.Stride < c.Cols ||
		a.BatchStride != m*a.Stride || c.BatchStride != m*c.Stride || m*c.Batch > math.MaxInt32 {
		return a, c, false
	}
	sa, sc = a, c
	sa.Rows, sa.Batch, sa.BatchStride = m*c.Batch, 1, 0
	sc.Rows, sc.Batch, sc.BatchStride = m*c.Batch, 1, 0
	return sa, sc, true
}

// Split products (Options.SplitK): the output tiles below which a product is split, about two
// per multiprocessor of a large GPU (a constant, so that the slices never depend on the
// device), and the most slices.
const (
	splitKTiles     = 256
	splitKMaxSlices = 32
)

// splitCount is how many depth slices Gemm computes an m x n x k product of batch elements in
// (1: unsplit). Gemm runs the slices of one batch element in one strided-batched cuBLAS call
// and the batch elements one after another, so a split pays only where its slices outnumber
// the batch elements: the unsplit call runs batch x tiles thread blocks over the whole depth,
// the split calls slices x tiles blocks over k / slices, batch times in turn. The slices are
// a power of two that divides k (a strided batch has one depth), each at least depth deep,
// no more than reach splitKTiles tiles of 128 x 128 for one element; their partial products
// (at most 2 splitKTiles tiles of 128 x 128 floats) take under 32 MiB, within the share of
// the device train.DeviceGroupSize leaves free.
func splitCount(m, n, k, batch, depth int) int {
	if depth <= 0 || k < 2*depth {
		return 1
	}
	per := ((m + 127) / 128) * ((n + 127) / 128)
	if batch*per >= splitKTiles {
		return 1
	}
	want := min(k/depth, (splitKTiles+per-1)/per, splitKMaxSlices)
	s := 1
	for 2*s <= want && k%(2*s) == 0 {
		s *= 2
	}
	if s <= batch {
		return 1
	}
	return s
}

// gemmSliced computes batch elements b0 .. b0+nb-1 of Gemm's product in slices of its depth
// (splitCount), one element at a time: the element's slices, depths [s d, (s+1) d) with d = k
// / slices, as one strided-batched cuBLAS call into partial products (alpha 1, beta 0; slice s
// at s d in both operands), then splitk_reduce sets its c = alpha (sum of the slices in order)
// + beta c.
//
// Slices issued as cuBLAS calls of their own (the form the second sitting measured at no
// gain) run in turn on the stream, each with the unsplit product's few tiles: the device
// never had more blocks at once.
func (o *Ops) gemmSliced(transA, transB bool, alpha float32, a, b compute.Mat, beta float32, c compute.Mat, b0, nb, slices int) {
	m, n := c.Rows, c.Cols
	k := a.Cols
	if transA {
		k = a.Rows
	}
	per, depth := m*n, k/slices
	part := o.grow(&o.slices, (slices*per+1)/2)
	// Depth 1 of op(A) is A's next column, or its next row when A is transposed; of op(B),
	// B's next row, or its next column when B is transposed.
	aStep, bStep := 1, ld(b)
	if transA {
		aStep = ld(a)
	}
	if transB {
		bStep = 1
	}
	for e := b0; e < b0+nb; e++ {
		o.queueGemm(GemmArgs{
			TransA: transB, TransB: transA, M: n, N: m, K: depth, Alpha: 1, Beta: 0,
			A: addr(b) + 4*uint64(e*b.BatchStride), LDA: ld(b), StrideA: int64(depth * bStep),
			B: addr(a) + 4*uint64(e*a.BatchStride), LDB: ld(a), StrideB: int64(depth * aStep),
			C: part, LDC: n, StrideC: int64(per),
			Batch: slices, Math: o.math,
		})
		o.args.reset().ptr(addr(c) + 4*uint64(e*c.BatchStride)).i64(c.Stride).i64(0).ptr(part).i64(slices).
			f32(alpha).f32(beta).i64(m).i64(n).i64(1)
		o.launch(kernels.SplitKReduce, per)
	}
}

// SetPrecision implements compute.Precisioner: the matrix products issued after it run in
// float32 (compute.FP32), with TF32 inputs (compute.TF32) or bfloat16 inputs (compute.BF16) on
// the tensor cores; every other operation stays float32.
func (o *Ops) SetPrecision(p compute.Precision) error {
	switch p {
	case compute.FP32, "":
		o.math = MathFP32
	case compute.TF32:
		o.math = MathTF32
	case compute.BF16:
		o.math = MathBF16
	default:
		return fmt.Errorf("cuda: precision %q is not fp32, tf32 or bf16", p)
	}
	return nil
}

// Axpby implements compute.Backend.
func (o *Ops) Axpby(alpha float32, x compute.Mat, beta float32, y compute.Mat, coef []float32) {
	var cp uint64
	staged := coef != nil && y.Batch > 0
	if staged {
		cp = o.stageBytes(f32bytes(coef[:y.Batch]))[0]
	}
	o.args.reset().mat(y).mat(x).stg(cp, staged).f32(alpha).f32(beta).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.Axpby, y.Batch*y.Rows*y.Cols)
}

var _ compute.InOrderAccumulator = (*Ops)(nil)

// AccumulateInOrder implements compute.InOrderAccumulator: one launch of accumulate_in_order
// instead of n of axpby.
func (o *Ops) AccumulateInOrder(y, x compute.Mat, n, step int, coef []float32) {
	if n == 0 || y.Batch == 0 {
		return
	}
	var cp uint64
	if coef != nil {
		cp = o.stageBytes(f32bytes(coef[:n*y.Batch]))[0]
	}
	o.args.reset().mat(y).mat(x).i64(step).i64(n).stg(cp, coef != nil).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.AccumulateInOrder, y.Batch*y.Rows*y.Cols)
}

// AddRow implements compute.Backend.
func (o *Ops) AddRow(y, v compute.Mat) {
	o.args.reset().mat(y).ptr(addr(v)).i64(v.BatchStride).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.AddRow, y.Batch*y.Rows*y.Cols)
}

// SumRows implements compute.Backend.
func (o *Ops) SumRows(alpha float32, x compute.Mat, beta float32, y compute.Mat) {
	o.args.reset().ptr(addr(y)).i64(y.BatchStride).mat(x).f32(alpha).f32(beta).i64(x.Rows).i64(y.Cols).i64(y.Batch)
	o.launch(kernels.SumRows, y.Batch*y.Cols)
}

// AddColumn implements compute.ColumnBiaser.
func (o *Ops) AddColumn(y, v compute.Mat) {
	o.args.reset().mat(y).mat(v).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.AddCol, y.Batch*y.Rows*y.Cols)
}

// SumColumns implements compute.ColumnBiaser: one thread a row.
func (o *Ops) SumColumns(x, y compute.Mat) {
	o.args.reset().mat(y).mat(x).i64(x.Rows).i64(x.Cols).i64(x.Batch)
	o.launch(kernels.SumCols, x.Batch*x.Rows)
}

// AddColumnActivate implements compute.ColumnBiaser.
func (o *Ops) AddColumnActivate(act compute.Activation, pre, v, post compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).mat(v).mat(post).i64(pre.Rows).i64(pre.Cols).i64(pre.Batch)
	o.launchLight(kernels.AddColActivate, pre.Batch*pre.Rows*pre.Cols)
}

// ActivateGradSumColumns implements compute.ColumnBiaser: one thread a row scales it and sums it.
func (o *Ops) ActivateGradSumColumns(act compute.Activation, pre, post, grad, y compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).mat(post).mat(grad).mat(y).i64(grad.Rows).i64(grad.Cols).i64(grad.Batch)
	o.launch(kernels.ActivateGradSumCols, grad.Batch*grad.Rows)
}

// Gather implements compute.Backend.
func (o *Ops) Gather(dst, src compute.Mat, idx []int32) {
	if len(idx) == 0 || dst.Batch == 0 || dst.Cols == 0 {
		return
	}
	ip := o.stageBytes(i32bytes(idx))[0]
	o.args.reset().mat(dst).mat(src).stg(ip, true).i64(len(idx)).i64(dst.Cols).i64(dst.Batch)
	o.launchLight(kernels.Gather, dst.Batch*len(idx)*dst.Cols)
}

// Activate implements compute.Backend.
func (o *Ops) Activate(act compute.Activation, pre, post compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).mat(post).i64(pre.Rows).i64(pre.Cols).i64(pre.Batch)
	o.launchLight(kernels.Activate, pre.Batch*pre.Rows*pre.Cols)
}

// ActivateGrad implements compute.Backend.
func (o *Ops) ActivateGrad(act compute.Activation, pre, post, grad compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).mat(post).mat(grad).i64(pre.Rows).i64(pre.Cols).i64(pre.Batch)
	o.launchLight(kernels.ActivateGrad, pre.Batch*pre.Rows*pre.Cols)
}

// SoftmaxXent implements compute.Backend.
func (o *Ops) SoftmaxXent(logits, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	o.softmaxXent(logits, compute.Mat{}, labels, scale, dlogits, loss, margin)
}

func (o *Ops) softmaxXent(logits, bias, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	o.args.reset().mat(logits).i64(1).mat(labels).f32(scale).mat(dlogits).i64(1).mat(loss).mat(margin).
		ptr(addr(bias)).i64(bias.BatchStride).i64(logits.Rows).i64(logits.Cols).i64(logits.Batch)
	o.launch(kernels.SoftmaxXent, logits.Batch*logits.Rows)
}

// SoftmaxXentColumns implements compute.ColumnXent: softmax_xent with a sample's logits down a
// column, one thread a sample (adjacent threads read adjacent values).
func (o *Ops) SoftmaxXentColumns(logits, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	o.args.reset().ptr(addr(logits)).i64(1).i64(logits.BatchStride).i64(logits.Stride).mat(labels).f32(scale).
		ptr(addr(dlogits)).i64(1).i64(dlogits.BatchStride).i64(dlogits.Stride).mat(loss).mat(margin).
		ptr(0).i64(0).i64(logits.Cols).i64(logits.Rows).i64(logits.Batch)
	o.launch(kernels.SoftmaxXent, logits.Batch*logits.Cols)
}

var _ compute.Fuser = (*Ops)(nil)

// AddRowActivate implements compute.Fuser: one launch instead of two.
func (o *Ops) AddRowActivate(act compute.Activation, pre, bias, post compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).ptr(addr(bias)).i64(bias.BatchStride).mat(post).
		i64(pre.Rows).i64(pre.Cols).i64(pre.Batch)
	o.launchLight(kernels.AddRowActivate, pre.Batch*pre.Rows*pre.Cols)
}

// ActivateGradSumRows implements compute.Fuser: one thread per column scales the column and
// sums it.
func (o *Ops) ActivateGradSumRows(act compute.Activation, pre, post, grad compute.Mat, alpha, beta float32, y compute.Mat) {
	o.args.reset().u32(uint32(act)).mat(pre).mat(post).mat(grad).ptr(addr(y)).i64(y.BatchStride).
		f32(alpha).f32(beta).i64(grad.Rows).i64(grad.Cols).i64(grad.Batch)
	o.launch(kernels.ActivateGradSumRows, grad.Batch*grad.Cols)
}

// AddRowSoftmaxXent implements compute.Fuser: softmax_xent adds the bias to its row first.
func (o *Ops) AddRowSoftmaxXent(logits, bias, labels compute.Mat, scale float32, dlogits, loss, margin compute.Mat) {
	o.softmaxXent(logits, bias, labels, scale, dlogits, loss, margin)
}

// ClipExamples implements compute.Backend: the per-example squared norms are summed layer by
// layer into a float64 scratch array, then every layer's rows are scaled.
func (o *Ops) ClipExamples(v float32, deltas, inputs []compute.Mat) {
	if len(deltas) == 0 {
		return
	}
	rows, batch := deltas[0].Rows, deltas[0].Batch
	if rows == 0 || batch == 0 {
		return
	}
	norms := o.grow(&o.sums, rows*batch)
	for l, d := range deltas {
		in := inputs[l]
		first := uint32(0)
		if l == 0 {
			first = 1
		}
		o.args.reset().ptr(norms).mat(d).mat(in).i64(d.Cols).i64(in.Cols).u32(first).i64(rows).i64(batch)
		o.launch(kernels.ClipExamplesNorm, rows*batch)
	}
	for _, d := range deltas {
		o.args.reset().mat(d).ptr(norms).f32(v).i64(rows).i64(d.Cols).i64(batch)
		o.launch(kernels.ClipExamplesScale, batch*rows*d.Cols)
	}
}

// sumProducts leaves sum_i a[b, i] c[b, i] for every batch element b in the sums scratch
// and returns its address; rows are a.Cols long. Each element's sum is kernels.Partials
// float64 partial sums, each of kernels.PartialsFold(a.Cols) pieces, added in index order.
func (o *Ops) sumProducts(a, c compute.Mat) uint64 {
	batch, fold := a.Batch, kernels.PartialsFold(a.Cols)
	n := batch * kernels.Partials
	pieces := 0
	if fold > 1 {
		pieces = n * fold
	}
	part := o.grow(&o.part, n+pieces)
	out := o.grow(&o.sums, batch)
	if fold > 1 {
		at := part + 8*uint64(n)
		o.args.reset().ptr(at).ptr(addr(a)).i64(a.BatchStride).ptr(addr(c)).i64(c.BatchStride).i64(a.Cols).i64(batch).i64(fold)
		o.launch(kernels.DotPartials, pieces)
		o.args.reset().ptr(part).ptr(at).i64(n).i64(fold)
		o.launch(kernels.ReducePartials, n)
	} else {
		o.args.reset().ptr(part).ptr(addr(a)).i64(a.BatchStride).ptr(addr(c)).i64(c.BatchStride).i64(a.Cols).i64(batch).i64(1)
		o.launch(kernels.DotPartials, n)
	}
	o.args.reset().ptr(out).ptr(part).i64(batch).i64(kernels.Partials)
	o.launch(kernels.ReducePartials, batch)
	return out
}

var _ compute.DeviceClipper = (*Ops)(nil)

// ClipCoefs implements compute.DeviceClipper: both inner products' partial sums in one launch,
// then one thread per batch element reduces them (in the order of reduce_partials) and writes
// the factor into coef, which later launches read; nothing comes back to the host.
func (o *Ops) ClipCoefs(v float32, a, b, c, d compute.Mat, coef compute.Buffer) {
	batch := a.Batch
	if batch == 0 {
		return
	}
	part := o.grow(&o.part, 2*batch*kernels.Partials)
	o.args.reset().ptr(part).ptr(addr(a)).i64(a.BatchStride).ptr(addr(b)).i64(b.BatchStride).i64(a.Cols).
		ptr(addr(c)).i64(c.BatchStride).ptr(addr(d)).i64(d.BatchStride).i64(c.Cols).i64(batch)
	o.launch(kernels.Dot2Partials, 2*batch*kernels.Partials)
	var cp uint64
	if coef != nil {
		cp = coef.(*buffer).addr
	}
	o.args.reset().ptr(cp).ptr(part).f32(v).i64(batch)
	o.launch(kernels.ClipCoef, batch)
}

// AxpbyCoefs implements compute.DeviceClipper: the axpby kernel reads the coefficients from
// device memory, so nothing is staged.
func (o *Ops) AxpbyCoefs(alpha float32, x compute.Mat, beta float32, y compute.Mat, coef compute.Buffer) {
	o.args.reset().mat(y).mat(x).ptr(coef.(*buffer).addr).f32(alpha).f32(beta).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.Axpby, y.Batch*y.Rows*y.Cols)
}

// ClipStep implements compute.Backend.
func (o *Ops) ClipStep(eta, v, alpha float32, w, g, anchor compute.Mat) {
	if w.Batch == 0 || w.Cols == 0 {
		return
	}
	var sums uint64
	if v > 0 {
		sums = o.sumProducts(g, g)
	}
	var an compute.Mat
	if alpha != 0 {
		an = anchor
	}
	o.args.reset().ptr(addr(w)).i64(w.BatchStride).ptr(addr(g)).i64(g.BatchStride).
		ptr(addr(an)).i64(an.BatchStride).ptr(sums).f32(eta).f32(v).f32(alpha).i64(w.Cols).i64(w.Batch)
	o.launchLight(kernels.ClipStep, w.Batch*w.Cols)
}

// AddGaussian implements compute.Backend. Adjacent batch elements with equal seeds (the two
// worlds of a pair) form a run whose noise is drawn once.
func (o *Ops) AddGaussian(dst compute.Mat, seeds []uint64, scale []float32, round, stream uint32) {
	batch := dst.Batch
	if batch == 0 || dst.Cols == 0 {
		return
	}
	o.runs = o.runs[:0]
	for b := 0; b < batch; b++ {
		if b == 0 || seeds[b] != seeds[b-1] {
			o.runs = append(o.runs, int32(b))
		}
	}
	o.runs = append(o.runs, int32(batch))
	o.round[0] = round
	p := o.stageBytes(u64bytes(seeds[:batch]), f32bytes(scale[:batch]), i32bytes(o.runs), u32bytes(o.round[:]))
	nruns := len(o.runs) - 1
	o.args.reset().ptr(addr(dst)).i64(dst.BatchStride).stg(p[0], true).stg(p[1], true).stg(p[2], true).i64(nruns).
		stg(p[3], true).u32(stream).i64(dst.Cols)
	o.launch(kernels.AddGaussian, nruns*((dst.Cols+3)/4))
}

// Dots implements compute.Backend: partial sums on the device, one float64 per batch element
// copied back.
func (o *Ops) Dots(a, b compute.Mat, out []float64) {
	if a.Batch == 0 {
		return
	}
	sums := o.sumProducts(a, b)
	o.flush()
	if o.err != nil {
		// Leave no stale values behind for a caller that does not check Err.
		for i := range out[:a.Batch] {
			out[i] = math.NaN()
		}
		return
	}
	o.fail("dots", o.dev.Read(f64bytes(out[:a.Batch]), sums))
}

// PhiloxRaw returns the Philox4x32-10 words of counters (c0+q, c1, c2, c3) for q < n under
// key (k0, k1), computed on the device: for testing the generator.
func (o *Ops) PhiloxRaw(n int, k0, k1, c0, c1, c2, c3 uint32) ([]uint32, error) {
	if n == 0 {
		return nil, nil
	}
	buf := o.alloc("philox", 16*n)
	o.args.reset().ptr(buf).i64(n).u32(k0).u32(k1).u32(c0).u32(c1).u32(c2).u32(c3)
	o.launch(kernels.PhiloxRaw, n)
	o.flush()
	out := make([]uint32, 4*n)
	if o.err == nil {
		o.fail("philox", o.dev.Read(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 16*n), buf))
	}
	if buf != 0 {
		o.free(buf)
	}
	return out, o.err
}

// CheckRecorder passes checkpoints on to rec only while be has no error: a device failure
// stops the run at its next checkpoint with that error, instead of recording garbage.
func CheckRecorder(be interface{ Err() error }, rec checkpoint.Recorder) checkpoint.Recorder {
	return checkRecorder{be, rec}
}

type checkRecorder struct {
	be  interface{ Err() error }
	rec checkpoint.Recorder
}

func (c checkRecorder) Checkpoint(ctx context.Context, cp *checkpoint.Checkpoint) error {
	if err := c.be.Err(); err != nil {
		return err
	}
	return c.rec.Checkpoint(ctx, cp)
}

var _ compute.HiddenStepper = (*Ops)(nil)

// HiddenStep implements compute.HiddenStepper: the whole deferred step of a one-hidden-layer
// MLP for every replica in one launch of hidden_step (kernels/step.cu), one block per replica
// with the activations and the small layer in shared memory (in global scratch when a
// replica's working set exceeds kernels.HiddenSharedFloats). It sums in another order than
// the CPU backend's fused step; the two agree to float32 rounding (the parity suite's
// HiddenStep case states the tolerance).
func (o *Ops) HiddenStep(a *compute.HiddenStepArgs) {
	n, B, H, C := a.Pre.Batch, a.Pre.Rows, a.H, a.Cls
	R := n * a.GroupCount() // blocks' items: every group's replicas
	if o.err != nil || R == 0 || B == 0 {
		return
	}
	if a.W2 != a.B1+H || a.B2 != a.W2+C*H {
		o.fail("hidden step", fmt.Errorf("parameters b1 %d, W2 %d, b2 %d are not contiguous (H %d, C %d)", a.B1, a.W2, a.B2, H, C))
		return
	}
	var scratch uint64
	sbs := kernels.HiddenWorkingSet(B, H, C)
	if sbs > kernels.HiddenSharedFloats {
		scratch = o.grow(&o.hidden, (R*sbs+1)/2)
	}
	gs := a.GroupStrides
	if a.GroupCount() == 1 {
		gs = compute.HiddenGroupStrides{}
	}
	var anchor compute.Mat
	if a.Alpha != 0 {
		anchor = a.Anchor
	} else {
		gs.Anchor = 0
	}
	var gx compute.Mat
	if a.V > 0 {
		gx = a.GX
	} else {
		gs.GX = 0
	}
	o.args.reset().u32(uint32(a.Act)).mat(a.Pre).ptr(addr(a.Params)).i64(a.Params.BatchStride).
		ptr(addr(anchor)).i64(anchor.BatchStride).ptr(addr(a.Gram)).i64(a.Gram.Stride).
		mat(a.Prev).i64(a.Prev.Rows).ptr(addr(a.Labels)).i64(a.Labels.Stride).
		ptr(addr(gx)).i64(gx.Stride).mat(a.U).ptr(scratch).i64(sbs).i64(a.B1).
		i64(B).i64(H).i64(C).f32(a.Eta).f32(a.V).f32(a.Alpha).i64(R).
		i64(n).i64(gs.Pre).i64(gs.Params).i64(gs.Anchor).i64(gs.Gram).i64(gs.Prev).i64(gs.Labels).i64(gs.GX).i64(gs.U)
	o.launchBlocks(kernels.HiddenStep, R, o.hiddenBlock)
}

// launchBlocks runs block kernel k with one block per item (at most maxGrid blocks, which
// then loop over the items) of block threads.
func (o *Ops) launchBlocks(k kernels.Kernel, items, block int) {
	if o.err != nil || items <= 0 {
		return
	}
	o.queueLaunch(k, min(items, o.maxGrid), block)
}

var _ compute.ClientBatcher = (*Ops)(nil)

// ClientBatch implements compute.ClientBatcher: Options.ClientBatch.
func (o *Ops) ClientBatch() int { return o.clientBatch }

var _ compute.RowAligner = (*Ops)(nil)

// RowAlign implements compute.RowAligner: replica rows start at multiples of 32 floats (128
// bytes). cudaMalloc's 256-byte alignment then carries over to every replica's parameters, so
// cuBLAS can take its vectorized kernels for the per-replica products (d = 50,890 unpadded
// leaves every other replica's weights 8-byte aligned, and cuBLAS picks its kernels by the
// alignment of the batch's pointers and strides).
func (o *Ops) RowAlign() int { return rowAlign }

const rowAlign = 32

var _ compute.NoiseSampler = (*Ops)(nil)

// AddNoise implements compute.NoiseSampler: one launch of mech_noise, each thread drawing one
// coordinate once for a run of batch elements that share a seed (the two worlds of a pair).
func (o *Ops) AddNoise(dst compute.Mat, dist compute.NoiseDist, seeds []uint64, scale []float32, round, stream uint32) {
	if dst.Batch == 0 || dst.Cols == 0 {
		return
	}
	o.seedRuns(seeds[:dst.Batch], nil, 0)
	o.stream[0], o.round[0] = stream, round
	p := o.stageBytes(u64bytes(seeds[:dst.Batch]), i32bytes(o.runs), u32bytes(o.stream[:]), u32bytes(o.round[:]), f32bytes(scale[:dst.Batch]))
	o.mechNoise(dst, dist, p[0], p[1], p[2], 1, 0, false, p[4], 1, false, p[3])
}

// SumNoise implements compute.NoiseSampler: one launch of mech_noise, each thread summing one
// coordinate's draws over the streams a run of batch elements uses.
func (o *Ops) SumNoise(dst compute.Mat, dist compute.NoiseDist, seeds []uint64, streams []uint32, use []bool, total float32, round uint32) {
	if dst.Batch == 0 || dst.Cols == 0 || len(streams) == 0 {
		if dst.Batch > 0 && dst.Cols > 0 {
			o.Axpby(0, compute.Mat{}, 0, dst, nil) // an empty sum
		}
		return
	}
	o.seedRuns(seeds[:dst.Batch], use, len(streams))
	o.round[0] = round
	var p []uint64
	if use != nil {
		p = o.stageBytes(u64bytes(seeds[:dst.Batch]), i32bytes(o.runs), u32bytes(streams), u32bytes(o.round[:]), o.use)
	} else {
		p = o.stageBytes(u64bytes(seeds[:dst.Batch]), i32bytes(o.runs), u32bytes(streams), u32bytes(o.round[:]))
	}
	var up uint64
	if use != nil {
		up = p[4]
	}
	o.mechNoise(dst, dist, p[0], p[1], p[2], len(streams), up, use != nil, 0, total, true, p[3])
}

// seedRuns sets o.runs to the starts of the runs of adjacent batch elements with equal seeds
// (and equal rows of use, n flags each, when use is given), ending with len(seeds); o.use gets
// each run's row of use.
func (o *Ops) seedRuns(seeds []uint64, use []bool, n int) {
	o.runs, o.use = o.runs[:0], o.use[:0]
	for b := range seeds {
		if b > 0 && seeds[b] == seeds[b-1] && (use == nil || slices.Equal(use[b*n:(b+1)*n], use[(b-1)*n:b*n])) {
			continue
		}
		o.runs = append(o.runs, int32(b))
		if use != nil {
			for _, u := range use[b*n : (b+1)*n] {
				o.use = append(o.use, b2u8(u))
			}
		}
	}
	o.runs = append(o.runs, int32(len(seeds)))
}

// mechNoise launches mech_noise; seeds, runs, streams, use (when hasUse), scale (when not
// sum) and round are offsets of staged arguments.
func (o *Ops) mechNoise(dst compute.Mat, dist compute.NoiseDist, seeds, runs, streams uint64, nstreams int, use uint64, hasUse bool, scale uint64, total float32, sum bool, round uint64) {
	var p [4]float64
	switch dist.Kind {
	case compute.LaplaceNoise:
		p[0] = dist.Scale
	case compute.StaircaseNoise:
		p = [4]float64{dist.Epsilon, dist.Delta, dist.Gamma, dist.Inner}
	default:
		o.fail("noise", fmt.Errorf("no sampler for noise kind %d", dist.Kind))
		return
	}
	nruns := len(o.runs) - 1
	o.args.reset().ptr(addr(dst)).i64(dst.BatchStride).stg(seeds, true).stg(runs, true).i64(nruns).stg(streams, true).i64(nstreams).
		stg(use, hasUse).stg(scale, !sum).f32(total).u32(uint32(b2u8(sum))).u32(uint32(dist.Kind)).f64(p[0]).f64(p[1]).f64(p[2]).f64(p[3]).
		stg(round, true).i64(dst.Cols)
	o.launch(kernels.MechNoise, nruns*dst.Cols)
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func u64bytes(s []uint64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 8*len(s)) }
func u32bytes(s []uint32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }
func i32bytes(s []int32) []byte  { return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 4*len(s)) }

var _ compute.BiasApart = (*Ops)(nil)

// BiasApart implements compute.BiasApart, unless Options.BiasCopies: the products sum a depth
// from zero in one chain on the shim, and cuBLAS's rounding is within the GEMM tolerance
// either way; copies of the weights are light launches at a fraction of the memory bandwidth
// (axpby, 8.7% of W3 at R 8 in the fourth sitting).
func (o *Ops) BiasApart() bool { return !o.biasCopies }

var _ compute.AddReLUer = (*Ops)(nil)

// AddReLU implements compute.AddReLUer: one launch of add_relu.
func (o *Ops) AddReLU(a, b, y compute.Mat) {
	o.args.reset().mat(a).mat(b).mat(y).i64(y.Rows).i64(y.Cols).i64(y.Batch)
	o.launchLight(kernels.AddReLU, y.Batch*y.Rows*y.Cols)
}
