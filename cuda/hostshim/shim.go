//go:build cgo

package hostshim

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*find_fn)(const char*, int*);
typedef long long (*rc_check_fn)(long long, long long, long long, long long, long long);
typedef long long (*md_check_fn)(long long, long long, const long long*, int, long long);
typedef int (*launch_fn)(int, unsigned, unsigned, const uint64_t*, int, int);
typedef void (*log_fn)(const double*, double*, long long);
typedef int (*gemm_fn)(int, int, int, int, int, float, uint64_t, int, long long, uint64_t, int,
                       long long, float, uint64_t, int, long long, int, int);

static void* shim_dlopen(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
static const char* shim_dlerror(void) { return dlerror(); }
static void* shim_dlsym(void* h, const char* name) { return dlsym(h, name); }
static int call_find(void* f, const char* name, int* nargs) { return ((find_fn)f)(name, nargs); }
static int call_launch(void* f, int k, unsigned grid, unsigned block, const uint64_t* args, int n, int order) {
	return ((launch_fn)f)(k, grid, block, args, n, order);
}
static int call_gemm(void* f, int ta, int tb, int m, int n, int k, float alpha, uint64_t a, int lda,
                     long long sa, uint64_t b, int ldb, long long sb, float beta, uint64_t c, int ldc,
                     long long sc, int batch, int math) {
	return ((gemm_fn)f)(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch, math);
}
static long long call_rc_check(void* f, long long i0, long long s, long long rows, long long cols,
                               long long steps) {
	return ((rc_check_fn)f)(i0, s, rows, cols, steps);
}
static long long call_md_check(void* f, long long i0, long long s, const long long* radix, int d,
                               long long steps) {
	return ((md_check_fn)f)(i0, s, radix, d, steps);
}
static void call_log(void* f, const double* x, double* out, long long n) { ((log_fn)f)(x, out, n); }
static uint64_t mem_alloc(size_t n) { return (uint64_t)(uintptr_t)calloc(1, n); }
static void mem_free(uint64_t p) { free((void*)(uintptr_t)p); }
static void mem_write(uint64_t dst, const void* src, size_t n) { memcpy((void*)(uintptr_t)dst, src, n); }
static void mem_read(void* dst, uint64_t src, size_t n) { memcpy(dst, (const void*)(uintptr_t)src, n); }
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"unsafe"

	"github.com/fedaudit/fedaudit/cuda"
	"github.com/fedaudit/fedaudit/kernels"
)

// Device is a cuda.Device whose memory is host memory and whose kernels run on the
// calling thread. It is not safe for concurrent use.
type Device struct {
	lib                 unsafe.Pointer
	find, launch, gemm  unsafe.Pointer
	rcCheck, mdCheck    unsafe.Pointer
	goLog               unsafe.Pointer
	index               []C.int
	nargs               []int
	live                map[uint64]int
	stage               uint64
	stageCap            int
	launches, gemmCalls int
	syncs               int
	bytes, peak         int
	capture             *graph // the graph being captured: launches are recorded, not run
	captured, replayed  int
	order               ThreadOrder
}

// ThreadOrder is the sequence in which the shim runs a launch's threads, one after another
// (block kernels aside, which run a host thread per GPU thread): a GPU runs them in no order,
// so a kernel whose result depends on the order has threads that race.
type ThreadOrder int

const (
	Ascending          ThreadOrder = iota // blocks and threads by index
	Descending                            // blocks and threads from the last
	DescendingOddFirst                    // blocks from the last, each block's odd threads first
)

// SetOrder makes the device run its launches' threads in order o from now on.
func (d *Device) SetOrder(o ThreadOrder) { d.order = o }

var kernelList = kernels.All()

var _ cuda.Device = (*Device)(nil)

// Build compiles the kernels found in kernelDir (the directory of package kernels) with the
// shim's C++ sources in shimDir (this package's cxx directory) into a shared library in
// outDir and loads it.
func Build(kernelDir, shimDir, outDir string) (*Device, error) {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "g++"
	}
	lib := filepath.Join(outDir, "libfedaudit_shim.so")
	// -ffp-contract=off: no fused multiply-adds, like the PTX (nvcc -fmad=false) and Go on
	// amd64, so elementwise results agree bit for bit.
	flags := []string{"-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math", "-fPIC",
		"-shared", "-Wall", "-Werror"}
	asan := ASan()
	if asan && !asanLoaded() {
		// Loading an instrumented library without the runtime preloaded kills the process.
		return nil, fmt.Errorf("hostshim: %s=1 needs the ASan runtime loaded first: run with "+
			"LD_PRELOAD=$(%s -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0 (as .ci/gpu-checks does)", ASanEnv, cxx)
	}
	if asan {
		// Every kernel access is checked against the allocation it falls in; the device
		// memory is malloc'd by the Go side's C code, which the preloaded ASan runtime
		// intercepts, so every buffer has red zones around it.
		flags = append(flags, "-fsanitize=address", "-fno-omit-frame-pointer", "-g")
	}
	flags = append(flags, "-I", kernelDir, "-I", shimDir, "-o", lib, filepath.Join(shimDir, "shim.cc"))
	cmd := exec.Command(cxx, flags...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("hostshim: compile kernels: %w\n%s", err, stderr.String())
	}
	return Load(lib)
}

// asanLoaded reports whether the AddressSanitizer runtime is mapped into this process.
func asanLoaded() bool {
	maps, err := os.ReadFile("/proc/self/maps")
	return err == nil && bytes.Contains(maps, []byte("libasan"))
}

// ASanEnv is the environment variable that makes Build compile the shim with AddressSanitizer
// (-fsanitize=address), so that a kernel reading or writing outside its buffers aborts the
// test with a report naming the kernel's source line.
const ASanEnv = "FEDAUDIT_SHIM_ASAN"

// ASan reports whether Build instruments the shim with AddressSanitizer.
func ASan() bool { return os.Getenv(ASanEnv) == "1" }

// Load loads a shim library built by Build.
func Load(lib string) (*Device, error) {
	cpath := C.CString(lib)
	defer C.free(unsafe.Pointer(cpath))
	h := C.shim_dlopen(cpath)
	if h == nil {
		return nil, fmt.Errorf("hostshim: load %s: %s", lib, C.GoString(C.shim_dlerror()))
	}
	d := &Device{lib: h, live: map[uint64]int{}, index: make([]C.int, len(kernelList)), nargs: make([]int, len(kernelList))}
	for _, s := range []struct {
		name string
		p    *unsafe.Pointer
	}{{"shim_find", &d.find}, {"shim_launch_ordered", &d.launch}, {"shim_gemm", &d.gemm}, {"shim_rc_check", &d.rcCheck}, {"shim_md_check", &d.mdCheck},
		{"shim_go_log", &d.goLog}} {
		cs := C.CString(s.name)
		*s.p = C.shim_dlsym(h, cs)
		C.free(unsafe.Pointer(cs))
		if *s.p == nil {
			return nil, fmt.Errorf("hostshim: %s has no symbol %s", lib, s.name)
		}
	}
	for i, k := range kernelList {
		cs := C.CString(k.Name())
		var n C.int
		d.index[i] = C.call_find(d.find, cs, &n)
		C.free(unsafe.Pointer(cs))
		if d.index[i] < 0 {
			return nil, fmt.Errorf("hostshim: kernel %s is not in the shim's table", k.Name())
		}
		d.nargs[i] = int(n)
	}
	return d, nil
}

// CheckIndex walks the kernels' incremental index arithmetic (rc_index in common.cuh) from
// flat index i0 with stride s over a batch of rows x cols arrays for steps steps, comparing
// each step with division; it returns the first step that differs, or -1.
func (d *Device) CheckIndex(i0, s, rows, cols, steps int64) int64 {
	return int64(C.call_rc_check(d.rcCheck, C.longlong(i0), C.longlong(s), C.longlong(rows), C.longlong(cols), C.longlong(steps)))
}

// CheckMixedIndex is CheckIndex for the image kernels' mixed-radix index arithmetic (md_index
// in conv.cu) over the radices (radix[0], the batch, is not read; 2 to 7 of them): the first
// step whose coordinates differ from division, or -1.
func (d *Device) CheckMixedIndex(i0, s int64, radix []int64, steps int64) int64 {
	if len(radix) < 2 || len(radix) > 7 {
		panic(fmt.Sprintf("hostshim: CheckMixedIndex takes 2 to 7 radices, not %d", len(radix)))
	}
	r := make([]C.longlong, len(radix))
	for i, v := range radix {
		r[i] = C.longlong(v)
	}
	return int64(C.call_md_check(d.mdCheck, C.longlong(i0), C.longlong(s), &r[0], C.int(len(radix)), C.longlong(steps)))
}

// GoLog returns the kernels' port of Go's math.Log (go_log in noise.cu) of every x.
func (d *Device) GoLog(x []float64) []float64 {
	out := make([]float64, len(x))
	if len(x) > 0 {
		C.call_log(d.goLog, (*C.double)(unsafe.Pointer(&x[0])), (*C.double)(unsafe.Pointer(&out[0])), C.longlong(len(x)))
	}
	return out
}

// NumArgs is the number of parameters of kernel k, from the compiled source.
func (d *Device) NumArgs(k kernels.Kernel) int { return d.nargs[k] }

// Launches and GemmCalls count the calls so far.
func (d *Device) Launches() int  { return d.launches }
func (d *Device) GemmCalls() int { return d.gemmCalls }

// Sync implements cuda.Syncer: every launch has finished when it returns, so there is nothing
// to wait for; it counts the calls, for the tests of Options.SyncEachLaunch.
func (d *Device) Sync() error {
	d.syncs++
	return nil
}

// Syncs counts the Sync calls so far.
func (d *Device) Syncs() int { return d.syncs }

// PeakBytes is the largest number of bytes allocated at once so far (device memory on a GPU).
func (d *Device) PeakBytes() int { return d.peak }

// Live is the number of allocations not yet freed.
func (d *Device) Live() int { return len(d.live) }

// Alloc implements cuda.Device.
func (d *Device) Alloc(n int) (uint64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("hostshim: alloc %d bytes", n)
	}
	a := uint64(C.mem_alloc(C.size_t(n)))
	if a == 0 {
		return 0, fmt.Errorf("hostshim: out of memory allocating %d bytes", n)
	}
	d.live[a] = n
	d.bytes += n
	d.peak = max(d.peak, d.bytes)
	return a, nil
}

// Free implements cuda.Device.
func (d *Device) Free(a uint64) error {
	if _, ok := d.live[a]; !ok {
		return fmt.Errorf("hostshim: free of %#x, which is not allocated", a)
	}
	d.bytes -= d.live[a]
	delete(d.live, a)
	C.mem_free(C.uint64_t(a))
	return nil
}

// check reports whether [a, a+n) lies inside one live allocation.
func (d *Device) check(a uint64, n int) error {
	for base, size := range d.live {
		if a >= base && a+uint64(n) <= base+uint64(size) {
			return nil
		}
	}
	if a >= d.stage && a+uint64(n) <= d.stage+uint64(d.stageCap) && d.stage != 0 {
		return nil
	}
	return fmt.Errorf("hostshim: %d bytes at %#x are outside every allocation", n, a)
}

// Write implements cuda.Device.
func (d *Device) Write(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := d.check(dst, len(src)); err != nil {
		return err
	}
	C.mem_write(C.uint64_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	return nil
}

// Read implements cuda.Device.
func (d *Device) Read(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := d.check(src, len(dst)); err != nil {
		return err
	}
	C.mem_read(unsafe.Pointer(&dst[0]), C.uint64_t(src), C.size_t(len(dst)))
	return nil
}

// Stage implements cuda.Device: launches run at once here, so one buffer is reused.
func (d *Device) Stage(src []byte) (uint64, error) {
	if len(src) > d.stageCap {
		if d.stage != 0 {
			C.mem_free(C.uint64_t(d.stage))
		}
		d.stageCap = max(len(src), 2*d.stageCap)
		d.stage = uint64(C.mem_alloc(C.size_t(d.stageCap)))
		if d.stage == 0 {
			d.stageCap = 0
			return 0, errors.New("hostshim: out of memory staging arguments")
		}
	}
	if len(src) > 0 {
		C.mem_write(C.uint64_t(d.stage), unsafe.Pointer(&src[0]), C.size_t(len(src)))
	}
	return d.stage, nil
}

// Launch implements cuda.Device.
func (d *Device) Launch(k kernels.Kernel, grid, block int, args []uint64) error {
	if len(args) != d.nargs[k] {
		return fmt.Errorf("hostshim: %s takes %d arguments, got %d", k.Name(), d.nargs[k], len(args))
	}
	if d.capture != nil {
		d.capture.ops = append(d.capture.ops, graphOp{k: k, grid: grid, block: block, args: slices.Clone(args)})
		return nil
	}
	return d.run(k, grid, block, args)
}

func (d *Device) run(k kernels.Kernel, grid, block int, args []uint64) error {
	d.launches++
	var p *C.uint64_t
	if len(args) > 0 {
		p = (*C.uint64_t)(unsafe.Pointer(&args[0]))
	}
	if C.call_launch(d.launch, d.index[k], C.uint(grid), C.uint(block), p, C.int(len(args)), C.int(d.order)) != 0 {
		return fmt.Errorf("hostshim: launch %s with grid %d, block %d refused", k.Name(), grid, block)
	}
	return nil
}

// GemmInOrder implements cuda.InOrderGemmer: every element of a product is one sum over the
// depth in index order, whatever the call's shape or batch.
func (d *Device) GemmInOrder() bool { return true }

// Gemm implements cuda.Device.
func (d *Device) Gemm(g cuda.GemmArgs) error {
	if d.capture != nil {
		d.capture.ops = append(d.capture.ops, graphOp{gemm: true, g: g})
		return nil
	}
	return d.runGemm(g)
}

func (d *Device) runGemm(g cuda.GemmArgs) error {
	d.gemmCalls++
	if C.call_gemm(d.gemm, b2i(g.TransA), b2i(g.TransB), C.int(g.M), C.int(g.N), C.int(g.K),
		C.float(g.Alpha), C.uint64_t(g.A), C.int(g.LDA), C.longlong(g.StrideA),
		C.uint64_t(g.B), C.int(g.LDB), C.longlong(g.StrideB), C.float(g.Beta),
		C.uint64_t(g.C), C.int(g.LDC), C.longlong(g.StrideC), C.int(g.Batch), C.int(g.Math)) != 0 {
		return fmt.Errorf("hostshim: gemm %+v: invalid value", g)
	}
	return nil
}

func b2i(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Close frees the device's memory; the library stays loaded (unloading code that Go may still
// reference through cached symbols is not worth the risk in tests).
func (d *Device) Close() {
	for a := range d.live {
		C.mem_free(C.uint64_t(a))
	}
	d.live = map[uint64]int{}
	d.bytes = 0
	if d.stage != 0 {
		C.mem_free(C.uint64_t(d.stage))
		d.stage, d.stageCap = 0, 0
	}
}

// graph is a captured batch: the launches and GEMMs in issue order, and the staging area of
// its arguments, as a CUDA graph holds its kernel nodes and the copy into its staging memory.
type graph struct {
	d    *Device
	area uint64
	n    int
	ops  []graphOp
}

type graphOp struct {
	gemm        bool
	k           kernels.Kernel
	grid, block int
	args        []uint64
	g           cuda.GemmArgs
}

var _ cuda.GraphDevice = (*Device)(nil)

// CaptureGraph implements cuda.GraphDevice: the launches and GEMMs issue makes are recorded
// and run only when the graph is launched, so a graph replayed with the wrong arguments (a
// cache that matched batches it should not) computes wrong results.
func (d *Device) CaptureGraph(n int, issue func(staged uint64) error) (cuda.Graph, error) {
	if d.capture != nil {
		return nil, errors.New("hostshim: capture inside a capture")
	}
	area, err := d.Alloc(max(n, 8))
	if err != nil {
		return nil, err
	}
	g := &graph{d: d, area: area, n: n}
	d.capture = g
	err = issue(area)
	d.capture = nil
	if err != nil {
		d.Free(area)
		return nil, err
	}
	d.captured++
	return g, nil
}

// Launch implements cuda.Graph: the staged bytes go into the graph's area, then its launches
// and GEMMs run in order.
func (g *graph) Launch(staged []byte) error {
	if len(staged) > g.n {
		return fmt.Errorf("hostshim: %d staged bytes for a graph captured with %d", len(staged), g.n)
	}
	if len(staged) > 0 {
		C.mem_write(C.uint64_t(g.area), unsafe.Pointer(&staged[0]), C.size_t(len(staged)))
	}
	g.d.replayed++
	for _, op := range g.ops {
		var err error
		if op.gemm {
			err = g.d.runGemm(op.g)
		} else {
			err = g.d.run(op.k, op.grid, op.block, op.args)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Destroy implements cuda.Graph.
func (g *graph) Destroy() error { return g.d.Free(g.area) }

// Graphs returns how many graphs were captured and how many graph launches ran.
func (d *Device) Graphs() (captured, launched int) { return d.captured, d.replayed }
