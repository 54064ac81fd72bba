//go:build cgo

// Package cublasdl loads cuBLAS at run time with dlopen instead of linking against it, so a
// binary built against one CUDA toolkit (Debian's 11.8, say) runs on nodes that have another
// (CUDA 12 or 13 ship libcublas.so.12 or .13, not .11). It resolves only the entry points the
// GPU backend uses, whose signatures are the same in cuBLAS 11, 12 and 13, and needs neither
// the cuBLAS headers nor a GPU to load (creating a handle does need one).
package cublasdl

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "cublas_dl.h"

static void* dl_open(const char* name) { return dlopen(name, RTLD_NOW | RTLD_LOCAL); }
static const char* dl_error(void) { const char* e = dlerror(); return e ? e : "unknown error"; }
static void* dl_sym(void* h, const char* name) { return dlsym(h, name); }
static const char* dl_file(void* sym) {
	Dl_info info;
	if (sym && dladdr(sym, &info) && info.dli_fname) return info.dli_fname;
	return "";
}

static int fa_property(void* f, int kind, int* v) { return (int)((fa_cublasGetProperty)f)((fa_cublas_enum)kind, v); }
static int fa_create(void* f, uintptr_t* h) {
	fa_cublas_handle p = 0;
	int s = (int)((fa_cublasCreate_v2)f)(&p);
	*h = (uintptr_t)p;
	return s;
}
static int fa_destroy(void* f, uintptr_t h) { return (int)((fa_cublasDestroy_v2)f)((fa_cublas_handle)h); }
static int fa_set_stream(void* f, uintptr_t h, uintptr_t stream) {
	return (int)((fa_cublasSetStream_v2)f)((fa_cublas_handle)h, (struct CUstream_st*)stream);
}
static int fa_set_math(void* f, uintptr_t h, int mode) {
	return (int)((fa_cublasSetMathMode)f)((fa_cublas_handle)h, (fa_cublas_enum)mode);
}
static int fa_gemm_ex(void* f, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
                      uint64_t a, int lda, long long sa, uint64_t b, int ldb, long long sb, float beta,
                      uint64_t c, int ldc, long long sc, int batch, int compute) {
	// CUDA_R_32F (0) operands and result, CUBLAS_GEMM_DEFAULT (-1).
	return (int)((fa_cublasGemmStridedBatchedEx)f)((fa_cublas_handle)h, (fa_cublas_enum)ta,
	                                               (fa_cublas_enum)tb, m, n, k, &alpha,
	                                               (const void*)(uintptr_t)a, 0, lda, sa,
	                                               (const void*)(uintptr_t)b, 0, ldb, sb, &beta,
	                                               (void*)(uintptr_t)c, 0, ldc, sc, batch,
	                                               (fa_cublas_enum)compute, -1);
}
static int fa_sgemm(void* f1, void* fb, uintptr_t h, int ta, int tb, int m, int n, int k, float alpha,
                    uint64_t a, int lda, long long sa, uint64_t b, int ldb, long long sb, float beta,
                    uint64_t c, int ldc, long long sc, int batch) {
	fa_cublas_handle hd = (fa_cublas_handle)h;
	if (batch == 1)
		return (int)((fa_cublasSgemm_v2)f1)(hd, (fa_cublas_enum)ta, (fa_cublas_enum)tb, m, n, k,
		                                     &alpha, (const float*)(uintptr_t)a, lda,
		                                     (const float*)(uintptr_t)b, ldb, &beta,
		                                     (float*)(uintptr_t)c, ldc);
	return (int)((fa_cublasSgemmStridedBatched)fb)(hd, (fa_cublas_enum)ta, (fa_cublas_enum)tb, m, n,
	                                               k, &alpha, (const float*)(uintptr_t)a, lda, sa,
	                                               (const float*)(uintptr_t)b, ldb, sb, &beta,
	                                               (float*)(uintptr_t)c, ldc, sc, batch);
}
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// PathEnv names an environment variable that, when set, is the only library Load tries (a
// path, or a name for the dynamic loader's search).
const PathEnv = "FEDAUDIT_CUBLAS"

// Library is a loaded cuBLAS.
type Library struct {
	Name    string // the name it was opened by: a soname, or a path
	File    string // the file the dynamic loader found for it
	Version string // major.minor.patch, from cublasGetProperty
	Major   int
	Source  string // how it was found: PathEnv, LoaderSearch, or a Place searched ("DIR (ORIGIN)")

	create, destroy, setStream, setMath, sgemm, sgemmBatched, gemmEx, property unsafe.Pointer
}

var (
	loadOnce sync.Once
	loaded   *Library
	loadErr  error
)

// Load opens cuBLAS once per process: the library named by FEDAUDIT_CUBLAS if set; else the
// first of Sonames the dynamic loader finds (LD_LIBRARY_PATH, the ld.so cache, the standard
// directories); else the first cuBLAS file in the places where CUDA toolkits and NVIDIA's
// Python wheels put it ($CUDA_HOME/lib64, /usr/local/cuda/lib64, /usr/local/cuda-X.Y/lib64,
// site-packages/nvidia/cublas/lib, ...: see places), so that no LD_LIBRARY_PATH is needed.
// Library.Source says which.
func Load() (*Library, error) {
	loadOnce.Do(func() { loaded, loadErr = load(osEnv()) })
	return loaded, loadErr
}

func load(e searchEnv) (*Library, error) {
	if p := e.getenv(PathEnv); p != "" {
		lib, err := LoadFrom([]string{p})
		if err == nil {
			lib.Source = PathEnv
		}
		return lib, err
	}
	var tried []string
	if lib := openFirst(e.loader, &tried); lib != nil {
		lib.Source = LoaderSearch
		return lib, nil
	}
	for _, c := range candidates(e) {
		lib, err := open(c.Path)
		if err == nil {
			lib.Source = fmt.Sprintf("%s (%s)", c.Place.Dir, c.Place.Origin)
			return lib, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", c.Path, err))
	}
	var dirs []string
	for _, p := range places(e) {
		dirs = append(dirs, p.Dir)
	}
	return nil, notFound(tried, "; searched "+strings.Join(dirs, ", "))
}

// LoadFrom opens the first of names that loads and has every entry point the backend uses.
// The error names every library tried and why it was refused.
func LoadFrom(names []string) (*Library, error) {
	var tried []string
	if lib := openFirst(names, &tried); lib != nil {
		return lib, nil
	}
	return nil, notFound(tried, "")
}

// openFirst opens the first of names that loads, adding each one refused to tried with the
// reason; nil when none loads.
func openFirst(names []string, tried *[]string) *Library {
	for _, name := range names {
		lib, err := open(name)
		if err == nil {
			return lib
		}
		*tried = append(*tried, fmt.Sprintf("%s (%v)", name, err))
	}
	return nil
}

func notFound(tried []string, searched string) error {
	return fmt.Errorf("cuBLAS not found: tried %s%s; install cuBLAS from a CUDA 11, 12 or 13 toolkit, put its directory in LD_LIBRARY_PATH, or set %s to the library's path",
		strings.Join(tried, ", "), searched, PathEnv)
}

func open(name string) (*Library, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	h := C.dl_open(cname)
	if h == nil {
		return nil, fmt.Errorf("%s", C.GoString(C.dl_error()))
	}
	// The handle is never closed: the library stays loaded for the life of the process, as
	// the cuBLAS handles created from it do.
	l := &Library{Name: name}
	for _, s := range []struct {
		name string
		p    *unsafe.Pointer
	}{
		{"cublasCreate_v2", &l.create}, {"cublasDestroy_v2", &l.destroy},
		{"cublasSetStream_v2", &l.setStream}, {"cublasSetMathMode", &l.setMath},
		{"cublasSgemm_v2", &l.sgemm}, {"cublasSgemmStridedBatched", &l.sgemmBatched},
		{"cublasGemmStridedBatchedEx", &l.gemmEx},
		{"cublasGetProperty", &l.property},
	} {
		cs := C.CString(s.name)
		*s.p = C.dl_sym(h, cs)
		C.free(unsafe.Pointer(cs))
		if *s.p == nil {
			return nil, fmt.Errorf("loaded, but it has no symbol %s", s.name)
		}
	}
	l.File = C.GoString(C.dl_file(l.create))
	var v [3]C.int
	for i := range v {
		// MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL of libraryPropertyType.
		if s := C.fa_property(l.property, C.int(i), &v[i]); s != 0 {
			return nil, fmt.Errorf("cublasGetProperty: %s", Status(s))
		}
	}
	l.Major = int(v[0])
	l.Version = fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2])
	return l, nil
}

// Status is a cublasStatus_t.
type Status int

var statusNames = map[Status]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR",
}

func (s Status) String() string {
	if n, ok := statusNames[s]; ok {
		return fmt.Sprintf("%s (%d)", n, int(s))
	}
	return fmt.Sprintf("cuBLAS status %d", int(s))
}

// Handle is a cuBLAS handle bound to the CUDA context current when it was created.
type Handle struct {
	lib *Library
	h   C.uintptr_t
}

// NewHandle creates a handle on the current context's default stream, in FP32 arithmetic
// (CUBLAS_DEFAULT_MATH: no TF32 rounding of the inputs, so products keep float32 accuracy like
// the CPU backend's).
func (l *Library) NewHandle() (*Handle, error) {
	h := &Handle{lib: l}
	if s := C.fa_create(l.create, &h.h); s != 0 {
		return nil, fmt.Errorf("cublasCreate: %s", Status(s))
	}
	if s := C.fa_set_math(l.setMath, h.h, 0); s != 0 {
		h.Close()
		return nil, fmt.Errorf("cublasSetMathMode: %s", Status(s))
	}
	if s := C.fa_set_stream(l.setStream, h.h, 0); s != 0 {
		h.Close()
		return nil, fmt.Errorf("cublasSetStream: %s", Status(s))
	}
	return h, nil
}

// SetTF32 sets the handle's math mode: CUBLAS_TF32_TENSOR_OP_MATH (3: the inputs of every
// float32 product rounded to TF32 on tensor cores, sums in float32) when on, else
// CUBLAS_DEFAULT_MATH (0: float32 throughout), for the calls issued after it.
func (h *Handle) SetTF32(on bool) error {
	mode := C.int(0)
	if on {
		mode = 3
	}
	if s := C.fa_set_math(h.lib.setMath, h.h, mode); s != 0 {
		return fmt.Errorf("cublasSetMathMode(%d): %s", int(mode), Status(s))
	}
	return nil
}

// SetStream makes the handle issue its work on stream (a CUstream as an integer; 0 is the
// legacy default stream), in order with everything else issued there.
func (h *Handle) SetStream(stream uintptr) error {
	if s := C.fa_set_stream(h.lib.setStream, h.h, C.uintptr_t(stream)); s != 0 {
		return fmt.Errorf("cublasSetStream: %s", Status(s))
	}
	return nil
}

// Close destroys the handle.
func (h *Handle) Close() error {
	if s := C.fa_destroy(h.lib.destroy, h.h); s != 0 {
		return fmt.Errorf("cublasDestroy: %s", Status(s))
	}
	return nil
}

func b2i(v bool) C.int {
	if v {
		return 1 // CUBLAS_OP_T
	}
	return 0 // CUBLAS_OP_N
}

// Sgemm is cublasSgemm for batch 1 and cublasSgemmStridedBatched otherwise (column-major;
// addresses are device addresses, strides in elements).
func (h *Handle) Sgemm(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, sa int64,
	b uint64, ldb int, sb int64, beta float32, c uint64, ldc int, sc int64, batch int) error {
	s := C.fa_sgemm(h.lib.sgemm, h.lib.sgemmBatched, h.h, b2i(ta), b2i(tb), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.uint64_t(a), C.int(lda), C.longlong(sa), C.uint64_t(b), C.int(ldb),
		C.longlong(sb), C.float(beta), C.uint64_t(c), C.int(ldc), C.longlong(sc), C.int(batch))
	if s != 0 {
		return fmt.Errorf("sgemm m=%d n=%d k=%d batch=%d: %s", m, n, k, batch, Status(s))
	}
	return nil
}

// SgemmBF16 is Sgemm on float32 operands at compute type CUBLAS_COMPUTE_32F_FAST_16BF
// (cublasGemmStridedBatchedEx): the library may down-convert the inputs to bfloat16 (7-bit
// mantissa) or TF32 for the tensor cores; the sums and the result stay float32.
func (h *Handle) SgemmBF16(ta, tb bool, m, n, k int, alpha float32, a uint64, lda int, sa int64,
	b uint64, ldb int, sb int64, beta float32, c uint64, ldc int, sc int64, batch int) error {
	const computeFast16BF = 75
	s := C.fa_gemm_ex(h.lib.gemmEx, h.h, b2i(ta), b2i(tb), C.int(m), C.int(n), C.int(k),
		C.float(alpha), C.uint64_t(a), C.int(lda), C.longlong(sa), C.uint64_t(b), C.int(ldb),
		C.longlong(sb), C.float(beta), C.uint64_t(c), C.int(ldc), C.longlong(sc), C.int(batch), computeFast16BF)
	if s != 0 {
		return fmt.Errorf("gemm (fast bf16) m=%d n=%d k=%d batch=%d: %s", m, n, k, batch, Status(s))
	}
	return nil
}
