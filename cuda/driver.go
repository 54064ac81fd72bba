//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fedaudit/fedaudit/cuda/internal/drv"
	"github.com/fedaudit/fedaudit/kernels"
)

// device is a Device on one GPU. Everything runs on one stream of the device's own (created
// ordered with the legacy default stream, so work a library issues there stays ordered with
// it): kernels, cuBLAS calls and copies, in issue order, so no operation needs an explicit
// wait. Per-call arguments go through a ring of pinned host and device buffers (stage.go).
// CUDA contexts are bound to OS threads while goroutines move between them, so every call
// locks its goroutine to its thread and makes the context current first. Device memory comes
// from gorgonia.org/cu; streams, events, pinned memory, launches and graphs from package drv.
type device struct {
	dev    cu.Device
	ctx    cu.CUContext
	stream drv.Stream
	blas   *blasHandle
	mods   []drv.Module
	fns    []drv.Function
	stage  *stageRing  // per-call arguments (stage.go)
	events []drv.Event // recorded fences' events, free for reuse
	timing []drv.Event // the profiler's timing events, free for reuse (marks.go)
	graphs bool        // the driver can instantiate graphs (drv.GraphsSupported)
	name   string
	closed bool
}

var _ Device = (*device)(nil)
var _ GraphDevice = (*device)(nil)

// enter binds the context to the calling thread until the returned function runs. Calls nest
// (runtime.LockOSThread counts), so a graph capture keeps its thread across the launches it
// records.
func (d *device) enter() (func(), error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("set context: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

func openDevice(ordinal int) (*device, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: count devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: device %d does not exist (%d devices)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: retain context: %w", ordinal, err)
	}
	d := &device{dev: dev, ctx: ctx}
	d.stage = newStageRing(d, stageSlots)
	leave, err := d.enter()
	if err != nil {
		dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	defer leave()
	name, _ := dev.Name()
	major, minor, _ := dev.ComputeCapability()
	d.name = fmt.Sprintf("%s (device %d, compute capability %d.%d, driver API %d)", name, ordinal, major, minor, cu.Version())
	fail := func(err error) (*device, error) {
		d.release()
		return nil, fmt.Errorf("cuda: %s: %w", d.name, err)
	}
	if v, err := drv.DriverVersion(); err == nil {
		d.graphs = drv.GraphsSupported(v)
	}
	if d.stream, err = drv.NewStream(); err != nil {
		return fail(fmt.Errorf("create stream: %w", err))
	}
	mods, err := kernels.Modules()
	if err != nil {
		return fail(err)
	}
	for _, m := range mods {
		// The driver compiles the compute_70 PTX for this GPU here (and caches the result).
		mod, err := drv.LoadModule(m.PTX)
		if err != nil {
			return fail(fmt.Errorf("load PTX module %s: %w", m.Name, err))
		}
		d.mods = append(d.mods, mod)
	}
	// Each name only in the module that declares it (no CUDA_ERROR_NOT_FOUND for
	// compute-sanitizer to report).
	if d.fns, err = lookupKernels(mods, func(i int, name string) (drv.Function, error) {
		return d.mods[i].Function(name)
	}); err != nil {
		return fail(err)
	}
	if d.blas, err = newBLAS(d.stream.Handle()); err != nil {
		return fail(err)
	}
	return d, nil
}

// release frees what openDevice acquired; the caller holds the context. It returns the first
// error met and a count of the others (firstOf: after a fault the context fails every call).
func (d *device) release() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Everything issued finishes before its buffers, handles and modules go (the staging
	// ring's fences only cover work up to its last copy; graphs and launches may follow).
	if d.stream != (drv.Stream{}) {
		add(d.stream.Synchronize())
	}
	if d.stage != nil {
		add(d.stage.close())
	}
	for _, ev := range d.events {
		add(ev.Destroy())
	}
	for _, ev := range d.timing {
		add(ev.Destroy())
	}
	d.events, d.timing = nil, nil
	if d.blas != nil {
		add(d.blas.close())
		d.blas = nil
	}
	for _, m := range d.mods {
		add(m.Unload())
	}
	d.mods, d.fns = nil, nil
	if d.stream != (drv.Stream{}) {
		add(d.stream.Destroy())
		d.stream = drv.Stream{}
	}
	add(d.dev.ReleasePrimaryCtx())
	return firstOf(errs)
}

func (d *device) close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return d.release()
}

// Alloc implements Device. The memory is zeroed on the stream, before any later use of it.
func (d *device) Alloc(n int) (uint64, error) {
	leave, err := d.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		free, total, _ := cu.MemInfo()
		return 0, fmt.Errorf("allocate %d bytes (%d of %d bytes free): %w", n, free, total, err)
	}
	if err := drv.SetAsync(uint64(p), 0, n, d.stream); err != nil {
		cu.MemFree(p)
		return 0, fmt.Errorf("zero %d bytes: %w", n, err)
	}
	return uint64(p), nil
}

// Free implements Device. It waits for the stream first: queued work may still use the memory.
func (d *device) Free(a uint64) error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := d.stream.Synchronize(); err != nil {
		return err
	}
	return cu.MemFree(cu.DevicePtr(a))
}

// Write implements Device: an asynchronous copy from pageable memory, which the driver takes
// before returning.
func (d *device) Write(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return drv.CopyHtoDAsync(dst, unsafe.Pointer(&src[0]), len(src), d.stream)
}

// Read implements Device: after everything issued before it, and the host waits for it.
func (d *device) Read(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := drv.CopyDtoHAsync(unsafe.Pointer(&dst[0]), src, len(dst), d.stream); err != nil {
		return err
	}
	return d.stream.Synchronize()
}

// stageSlots is the number of staging slots: a slot is reused after 15 further Stage calls
// (batches of launches, queue.go), by which time the kernels that read it have long finished
// unless the device is far behind (then take waits for them).
const stageSlots = 16

// Stage implements Device: src goes into the pinned host half of the next slot of the staging
// ring (stage.go) and an asynchronous copy on the stream moves it into the slot's device half
// when the stream reaches it, before the launches that read it. The slot's fence keeps both
// halves from being reused before that copy and those launches have run.
func (d *device) Stage(src []byte) (uint64, error) {
	leave, err := d.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	a, host, err := d.stage.take(len(src))
	if err != nil {
		return 0, err
	}
	if len(src) > 0 {
		copy(host, src)
		if err := drv.CopyHtoDAsync(a, unsafe.Pointer(&host[0]), len(src), d.stream); err != nil {
			return 0, err
		}
	}
	return a, nil
}

// The stageMem of the ring; the caller holds the context.

func (d *device) alloc(n int) (uint64, error) {
	p, err := cu.MemAlloc(int64(n))
	return uint64(p), err
}

func (d *device) free(a uint64) error { return cu.MemFree(cu.DevicePtr(a)) }

func (d *device) allocHost(n int) ([]byte, error) { return drv.AllocHost(n) }

func (d *device) freeHost(b []byte) error { return drv.FreeHost(b) }

// record records an event on the stream, taken from the free events or made.
func (d *device) record() (fence, error) {
	var ev drv.Event
	if n := len(d.events); n > 0 {
		ev, d.events = d.events[n-1], d.events[:n-1]
	} else {
		var err error
		if ev, err = drv.NewEvent(); err != nil {
			return nil, fmt.Errorf("make event: %w", err)
		}
	}
	if err := ev.Record(d.stream); err != nil {
		d.events = append(d.events, ev) // unrecorded, still reusable
		return nil, fmt.Errorf("record event: %w", err)
	}
	return eventFence{d, ev}, nil
}

// eventFence is a recorded event; wait synchronizes with it and returns it to the free list.
type eventFence struct {
	d  *device
	ev drv.Event
}

func (f eventFence) wait() error {
	err := f.ev.Synchronize()
	f.d.events = append(f.d.events, f.ev)
	return err
}

// Launch implements Device: each argument is an 8-byte slot from which the driver reads the
// parameter's size (which is how Ops encodes 4-byte parameters).
func (d *device) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	if err := d.fns[k].Launch(grid, block, d.stream, args); err != nil {
		return fmt.Errorf("launch %s (grid %d, block %d): %w", k.Name(), grid, block, err)
	}
	return nil
}

// Gemm implements Device.
func (d *device) Gemm(g GemmArgs) error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return d.blas.gemm(g)
}

// Sync waits for all queued work and reports any asynchronous error (a faulting kernel); it
// makes the device a Syncer, for Options.SyncEachLaunch.
func (d *device) Sync() error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return d.stream.Synchronize()
}

func (d *device) memInfo() (free, total int64, err error) {
	leave, err := d.enter()
	if err != nil {
		return 0, 0, err
	}
	defer leave()
	return cu.MemInfo()
}

// errNoGraphs is CaptureGraph's error on a driver without the graph entry points.
var errNoGraphs = errors.New("the driver has no CUDA graphs (cuGraphInstantiateWithFlags needs CUDA 11.4 or later)")

// driverGraph is an instantiated graph with its own staging: a pinned host buffer and a device
// buffer of n bytes, copied by the graph's first node; fence follows its last launch.
type driverGraph struct {
	d     *device
	exec  drv.Exec
	dev   uint64
	host  []byte
	fence fence
}

// CaptureGraph implements GraphDevice: the stream is captured (thread-local mode, the
// goroutine locked to its thread throughout) while issue makes its launches and GEMMs, after
// a copy from the graph's pinned buffer to its device buffer; the graph is then instantiated.
// Nothing runs until Launch. A failed capture (a cuBLAS version that allocates inside it, a
// driver without graphs) returns its error and leaves the stream usable.
func (d *device) CaptureGraph(n int, issue func(staged uint64) error) (Graph, error) {
	if !d.graphs {
		return nil, errNoGraphs
	}
	leave, err := d.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	g := &driverGraph{d: d}
	if g.dev, err = d.alloc(max(n, 8)); err != nil {
		return nil, fmt.Errorf("graph staging: %w", err)
	}
	if g.host, err = drv.AllocHost(max(n, 8)); err != nil {
		d.free(g.dev)
		return nil, fmt.Errorf("graph staging: %w", err)
	}
	fail := func(err error) (Graph, error) {
		drv.FreeHost(g.host)
		d.free(g.dev)
		return nil, err
	}
	if err := drv.BeginCapture(d.stream); err != nil {
		return fail(fmt.Errorf("begin capture: %w", err))
	}
	cerr := drv.CopyHtoDAsync(g.dev, unsafe.Pointer(&g.host[0]), max(n, 8), d.stream)
	if cerr == nil {
		cerr = issue(g.dev)
	}
	graph, eerr := drv.EndCapture(d.stream)
	if cerr != nil || eerr != nil {
		if graph.Valid() {
			graph.Destroy()
		}
		return fail(fmt.Errorf("capture: %w", errors.Join(cerr, eerr)))
	}
	exec, err := graph.Instantiate()
	graph.Destroy()
	if err != nil {
		return fail(fmt.Errorf("instantiate graph: %w", err))
	}
	g.exec = exec
	return g, nil
}

// Launch implements Graph: once the graph's previous launch has read its pinned buffer, staged
// goes there and the graph is launched on the stream.
func (g *driverGraph) Launch(staged []byte) error {
	d := g.d
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	if len(staged) > len(g.host) {
		return fmt.Errorf("graph launch: %d staged bytes for a graph captured with %d", len(staged), len(g.host))
	}
	if g.fence != nil {
		if err := g.fence.wait(); err != nil {
			return err
		}
		g.fence = nil
	}
	copy(g.host, staged)
	if err := g.exec.Launch(d.stream); err != nil {
		return fmt.Errorf("graph launch: %w", err)
	}
	g.fence, err = d.record()
	return err
}

// Destroy implements Graph.
func (g *driverGraph) Destroy() error {
	d := g.d
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	var errs []error
	if g.fence != nil {
		errs = append(errs, g.fence.wait())
	}
	errs = append(errs, g.exec.Destroy(), drv.FreeHost(g.host), d.free(g.dev))
	return errors.Join(errs...)
}
