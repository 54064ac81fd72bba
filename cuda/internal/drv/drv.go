//go:build gpu

// Package drv binds the few CUDA driver API calls the GPU backend needs beyond
// gorgonia.org/cu v0.9.6, which has no pinned host memory (cuMemAllocHost), no stream capture
// and no graph launch, and whose kernel launch allocates C memory twice per call: streams,
// events, asynchronous copies and memset, pinned host memory, module loading and kernel
// launches, stream capture and graphs. Every call works on the calling thread's current
// context; the caller locks its goroutine to the thread and makes the context current.
//
// The declarations come from the toolkit's cuda.h (11.8 or 12.x: see docs/gpu.md), so the
// compiler checks every signature; the versioned entry points the header selects
// (cuMemcpyHtoDAsync_v2, cuStreamBeginCapture_v2, ...) exist in every driver from CUDA 11.4
// on, CUDA 12 and 13 included.
package drv

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>
#include <stdlib.h>

// drv_launch launches f with the n 8-byte argument slots of args: kernelParams[i] points to
// slot i, from which the driver reads the parameter's size (4-byte parameters in the low
// bytes). The slots are copied to this C frame, as cgo forbids passing Go memory holding the
// pointers.
static CUresult drv_launch(CUfunction f, unsigned grid, unsigned block, CUstream s,
                           const uint64_t* args, int n) {
	uint64_t vals[64];
	void* params[64];
	if (n > 64) return CUDA_ERROR_INVALID_VALUE;
	for (int i = 0; i < n; i++) {
		vals[i] = args[i];
		params[i] = &vals[i];
	}
	return cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, NULL);
}

static const char* drv_error_name(CUresult r) {
	const char* s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown CUDA error";
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Error is a CUresult other than CUDA_SUCCESS.
type Error int

func (e Error) Error() string {
	return fmt.Sprintf("%s (%d)", C.GoString(C.drv_error_name(C.CUresult(e))), int(e))
}

func check(r C.CUresult) error {
	if r != C.CUDA_SUCCESS {
		return Error(r)
	}
	return nil
}

// DriverVersion is the CUDA version the driver supports, as 1000 major + 10 minor.
func DriverVersion() (int, error) {
	var v C.int
	err := check(C.cuDriverGetVersion(&v))
	return int(v), err
}

// GraphsSupported reports whether a driver of version v (DriverVersion) has the graph entry
// points the backend calls (cuGraphInstantiateWithFlags: CUDA 11.4).
func GraphsSupported(v int) bool { return v >= 11040 }

// Stream is a CUDA stream.
type Stream struct{ s C.CUstream }

// Handle is the stream's CUstream as an integer (for cuBLAS's cublasSetStream).
func (s Stream) Handle() uintptr { return uintptr(unsafe.Pointer(s.s)) }

// NewStream creates a stream that is ordered with the legacy default stream (CU_STREAM_DEFAULT):
// work the driver or a library issues there implicitly waits for it and vice versa.
func NewStream() (Stream, error) {
	var s Stream
	err := check(C.cuStreamCreate(&s.s, C.CU_STREAM_DEFAULT))
	return s, err
}

// Destroy releases the stream once its work is done.
func (s Stream) Destroy() error { return check(C.cuStreamDestroy(s.s)) }

// Synchronize waits for every piece of work issued to the stream and returns its error.
func (s Stream) Synchronize() error { return check(C.cuStreamSynchronize(s.s)) }

// AllocHost returns n bytes of pinned (page-locked) host memory, from which asynchronous
// copies run without an intermediate copy by the driver, at the time the stream reaches them.
func AllocHost(n int) ([]byte, error) {
	var p unsafe.Pointer
	if err := check(C.cuMemAllocHost(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// FreeHost releases memory from AllocHost.
func FreeHost(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return check(C.cuMemFreeHost(unsafe.Pointer(&b[0])))
}

// CopyHtoDAsync queues a copy of n bytes at src to device address dst on s. From pageable
// memory the driver takes the bytes before returning; from pinned memory (AllocHost) the copy
// reads them when it runs, so src must stay unchanged until then.
func CopyHtoDAsync(dst uint64, src unsafe.Pointer, n int, s Stream) error {
	return check(C.cuMemcpyHtoDAsync(C.CUdeviceptr(dst), src, C.size_t(n), s.s))
}

// CopyDtoHAsync queues a copy of n bytes from device address src to dst on s; into pageable
// memory it returns once the copy is done.
func CopyDtoHAsync(dst unsafe.Pointer, src uint64, n int, s Stream) error {
	return check(C.cuMemcpyDtoHAsync(dst, C.CUdeviceptr(src), C.size_t(n), s.s))
}

// SetAsync queues setting n bytes at device address dst to v on s.
func SetAsync(dst uint64, v byte, n int, s Stream) error {
	return check(C.cuMemsetD8Async(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n), s.s))
}

// Event is a CUDA event without timing.
type Event struct{ e C.CUevent }

// NewEvent creates an event (CU_EVENT_DISABLE_TIMING: recording and waiting only).
func NewEvent() (Event, error) {
	var e Event
	err := check(C.cuEventCreate(&e.e, C.CU_EVENT_DISABLE_TIMING))
	return e, err
}

// Record records the event after the work issued to s so far.
func (e Event) Record(s Stream) error { return check(C.cuEventRecord(e.e, s.s)) }

// Synchronize waits until the work before the event's last recording has finished.
func (e Event) Synchronize() error { return check(C.cuEventSynchronize(e.e)) }

// Destroy releases the event.
func (e Event) Destroy() error { return check(C.cuEventDestroy(e.e)) }

// NewTimingEvent creates an event that records a time stamp (CU_EVENT_DEFAULT), for Elapsed.
func NewTimingEvent() (Event, error) {
	var e Event
	err := check(C.cuEventCreate(&e.e, C.CU_EVENT_DEFAULT))
	return e, err
}

// Elapsed returns the milliseconds between two recorded timing events (cuEventElapsedTime,
// resolution about half a microsecond); both must have passed.
func Elapsed(start, end Event) (float32, error) {
	var ms C.float
	err := check(C.cuEventElapsedTime(&ms, start.e, end.e))
	return float32(ms), err
}

// Module is a loaded PTX module.
type Module struct{ m C.CUmodule }

// LoadModule JIT-compiles PTX source for the current device and loads it.
func LoadModule(ptx string) (Module, error) {
	src := C.CString(ptx)
	defer C.free(unsafe.Pointer(src))
	var m Module
	err := check(C.cuModuleLoadData(&m.m, unsafe.Pointer(src)))
	return m, err
}

// Unload unloads the module.
func (m Module) Unload() error { return check(C.cuModuleUnload(m.m)) }

// Function is a kernel entry point.
type Function struct{ f C.CUfunction }

// Function looks up the entry point name.
func (m Module) Function(name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f Function
	err := check(C.cuModuleGetFunction(&f.f, m.m, cs))
	return f, err
}

// Launch queues the kernel on s over grid blocks of block threads, with one 8-byte slot per
// parameter in args (at most 64).
func (f Function) Launch(grid, block int, s Stream, args []uint64) error {
	var p *C.uint64_t
	if len(args) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	return check(C.drv_launch(f.f, C.uint(grid), C.uint(block), s.s, p, C.int(len(args))))
}

// BeginCapture starts capturing the work issued to s into a graph, in thread-local mode:
// calls from this thread that are unsafe during a capture (a synchronization, an allocation)
// fail instead of breaking it; other threads are unaffected.
func BeginCapture(s Stream) error {
	return check(C.cuStreamBeginCapture(s.s, C.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))
}

// Graph is a captured graph.
type Graph struct{ g C.CUgraph }

// EndCapture ends the capture of s and returns the graph (also when the capture failed: then
// with the error, and a graph to destroy if it is not zero).
func EndCapture(s Stream) (Graph, error) {
	var g Graph
	err := check(C.cuStreamEndCapture(s.s, &g.g))
	return g, err
}

// Valid reports whether the graph exists.
func (g Graph) Valid() bool { return g.g != nil }

// Destroy releases the graph (an instantiated copy stays valid).
func (g Graph) Destroy() error { return check(C.cuGraphDestroy(g.g)) }

// Exec is an instantiated graph.
type Exec struct{ x C.CUgraphExec }

// Instantiate makes the graph launchable.
func (g Graph) Instantiate() (Exec, error) {
	var x Exec
	err := check(C.cuGraphInstantiateWithFlags(&x.x, g.g, 0))
	return x, err
}

// Launch queues the graph on s.
func (x Exec) Launch(s Stream) error { return check(C.cuGraphLaunch(x.x, s.s)) }

// Destroy releases the instantiated graph.
func (x Exec) Destroy() error { return check(C.cuGraphExecDestroy(x.x)) }
