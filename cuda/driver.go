//go:build gpu

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/fedaudit/fedaudit/kernels"
)

// device is a Device on one GPU. Everything runs on the legacy default stream, in
// issue order: kernels, cuBLAS calls and copies, so no operation needs an explicit wait.
// CUDA contexts are bound to OS threads while goroutines move between them, so every call
// locks its goroutine to its thread and makes the context current first.
type device struct {
	dev    cu.Device
	ctx    cu.CUContext
	blas   *blasHandle
	mods   []cu.Module
	fns    []cu.Function
	params []unsafe.Pointer
	stage  *stageRing // per-call arguments (stage.go)
	events []cu.Event // recorded fences' events, free for reuse
	name   string
	closed bool
}

var _ Device = (*device)(nil)

// enter binds the context to the calling thread until the returned function runs.
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
	mods, err := kernels.Modules()
	if err != nil {
		return fail(err)
	}
	for _, m := range mods {
		// The driver compiles the compute_70 PTX for this GPU here (and caches the result).
		mod, err := cu.LoadData(m.PTX)
		if err != nil {
			return fail(fmt.Errorf("load PTX module %s: %w", m.Name, err))
		}
		d.mods = append(d.mods, mod)
	}
	for _, k := range kernels.All() {
		var fn cu.Function
		var found bool
		for _, mod := range d.mods {
			if f, err := mod.Function(k.Name()); err == nil {
				fn, found = f, true
				break
			}
		}
		if !found {
			return fail(fmt.Errorf("kernel %s is in no PTX module", k.Name()))
		}
		d.fns = append(d.fns, fn)
	}
	if d.blas, err = newBLAS(); err != nil {
		return fail(err)
	}
	return d, nil
}

// release frees what openDevice acquired; the caller holds the context.
func (d *device) release() error {
	var errs []error
	if d.stage != nil {
		errs = append(errs, d.stage.close())
	}
	for i := range d.events {
		errs = append(errs, cu.DestroyEvent(&d.events[i]))
	}
	d.events = nil
	if d.blas != nil {
		errs = append(errs, d.blas.close())
		d.blas = nil
	}
	for _, m := range d.mods {
		errs = append(errs, m.Unload())
	}
	d.mods, d.fns = nil, nil
	errs = append(errs, d.dev.ReleasePrimaryCtx())
	return errors.Join(errs...)
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

// Alloc implements Device.
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
	if err := cu.MemsetD8(p, 0, int64(n)); err != nil {
		cu.MemFree(p)
		return 0, fmt.Errorf("zero %d bytes: %w", n, err)
	}
	return uint64(p), nil
}

// Free implements Device.
func (d *device) Free(a uint64) error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.MemFree(cu.DevicePtr(a))
}

// Write implements Device.
func (d *device) Write(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
}

// Read implements Device.
func (d *device) Read(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	return cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)))
}

// stageSlots is the number of staging slots: a slot is reused after 15 further Stage calls,
// by which time the kernels that read it have long finished unless the device is far behind
// (then take waits for them).
const stageSlots = 16

// Stage implements Device: src goes into the next slot of the staging ring (stage.go). The
// asynchronous copy from pageable memory takes src before the call returns (the driver stages
// it) and runs in stream order, before the kernels that read it. On the legacy default stream
// one reused buffer would do (stage.go says why); the ring keeps Stage correct when copies or
// kernels move to other streams, pinned memory or graphs.
func (d *device) Stage(src []byte) (uint64, error) {
	leave, err := d.enter()
	if err != nil {
		return 0, err
	}
	defer leave()
	a, err := d.stage.take(len(src))
	if err != nil {
		return 0, err
	}
	if len(src) > 0 {
		if err := cu.MemcpyHtoDAsync(cu.DevicePtr(a), unsafe.Pointer(&src[0]), int64(len(src)), cu.Stream{}); err != nil {
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

// record records an event on the stream, taken from the free events or made.
func (d *device) record() (fence, error) {
	var ev cu.Event
	if n := len(d.events); n > 0 {
		ev, d.events = d.events[n-1], d.events[:n-1]
	} else {
		var err error
		if ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return nil, fmt.Errorf("make event: %w", err)
		}
	}
	if err := ev.Record(cu.Stream{}); err != nil {
		return nil, fmt.Errorf("record event: %w", err)
	}
	return eventFence{d, ev}, nil
}

// eventFence is a recorded event; wait synchronizes with it and returns it to the free list.
type eventFence struct {
	d  *device
	ev cu.Event
}

func (f eventFence) wait() error {
	err := f.ev.Synchronize()
	f.d.events = append(f.d.events, f.ev)
	return err
}

// Launch implements Device. cu's Launch copies each argument as 8 bytes from the
// address it is given; the driver then takes each parameter's size from the start of its
// slot, which is how Ops encodes 4-byte parameters.
func (d *device) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	leave, err := d.enter()
	if err != nil {
		return err
	}
	defer leave()
	d.params = d.params[:0]
	for i := range args {
		d.params = append(d.params, unsafe.Pointer(&args[i]))
	}
	if err := d.fns[k].Launch(grid, 1, 1, block, 1, 1, 0, cu.Stream{}, d.params); err != nil {
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
	return cu.Synchronize()
}

func (d *device) memInfo() (free, total int64, err error) {
	leave, err := d.enter()
	if err != nil {
		return 0, 0, err
	}
	defer leave()
	return cu.MemInfo()
}
