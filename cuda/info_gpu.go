//go:build gpu

package cuda

/*
#include <cuda.h>
static int header_version(void) { return CUDA_VERSION; }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"

	"gorgonia.org/cu"

	"github.com/fedaudit/fedaudit/cuda/internal/cublasdl"
	"github.com/fedaudit/fedaudit/cuda/internal/drv"
	"github.com/fedaudit/fedaudit/kernels"
)

func cudaVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }

func gpuInfo(ordinal int) (*Info, error) {
	in := &Info{Build: "gpu", HeaderVersion: cudaVersion(int(C.header_version())), PTXTarget: PTXTarget, Ordinal: ordinal}
	problem := func(format string, args ...any) {
		in.Problems = append(in.Problems, fmt.Sprintf(format, args...))
	}
	in.DriverVersion = cudaVersion(cu.Version())
	if v, err := drv.DriverVersion(); err == nil {
		in.Graphs = drv.GraphsSupported(v)
	}
	if lib, err := cublasdl.Load(); err != nil {
		problem("%v", err)
	} else {
		in.CublasName, in.CublasFile, in.CublasVersion, in.CublasSource = lib.Name, lib.File, lib.Version, lib.Source
	}
	n, err := cu.NumDevices()
	if err != nil {
		problem("count devices: %v", err)
	}
	in.Devices = n
	if ordinal < 0 || ordinal >= n {
		problem("device %d does not exist (%d devices)", ordinal, n)
		return in, errors.New(in.Problems[0])
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		problem("device %d: %v", ordinal, err)
		return in, errors.New(in.Problems[0])
	}
	in.Name, _ = dev.Name()
	major, minor, _ := dev.ComputeCapability()
	in.Compute = fmt.Sprintf("%d.%d", major, minor)
	in.MemoryTotal, _ = dev.TotalMem()
	if major < 7 {
		problem("compute capability %s: the %s PTX needs 7.0 or later", in.Compute, PTXTarget)
	}
	// The kernels on their own, so that a JIT failure is named even when cuBLAS is missing.
	in.KernelsLoaded, in.Kernels = loadKernels(dev, problem)
	if d, err := openDevice(ordinal); err != nil {
		problem("open the backend: %v", err)
	} else {
		in.BackendOpened = true
		in.MemoryFree, _, _ = d.memInfo()
		if err := d.close(); err != nil {
			problem("close the backend: %v", err)
		}
	}
	if len(in.Problems) > 0 {
		return in, fmt.Errorf("the GPU backend cannot run here: %s", in.Problems[0])
	}
	return in, nil
}

// loadKernels JIT-compiles every embedded PTX module in a primary context and counts the entry
// points found.
func loadKernels(dev cu.Device, problem func(string, ...any)) (bool, int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		problem("retain context: %v", err)
		return false, 0
	}
	defer dev.ReleasePrimaryCtx()
	if err := cu.SetCurrentContext(ctx); err != nil {
		problem("set context: %v", err)
		return false, 0
	}
	mods, err := kernels.Modules()
	if err != nil {
		problem("%v", err)
		return false, 0
	}
	// Each kernel is looked up only in the module that declares it (kernels.Locate), as the
	// backend does: no CUDA_ERROR_NOT_FOUND for compute-sanitizer to report.
	where, err := kernels.Locate(mods)
	if err != nil {
		problem("%v", err)
		return false, 0
	}
	loaded := make([]*cu.Module, len(mods)) // nil where the JIT failed
	defer func() {
		for _, m := range loaded {
			if m != nil {
				m.Unload()
			}
		}
	}()
	ok := true
	for i, m := range mods {
		mod, err := cu.LoadData(m.PTX)
		if err != nil {
			problem("JIT-compile PTX module %s: %v", m.Name, err)
			ok = false
			continue
		}
		loaded[i] = &mod
	}
	found := 0
	for _, k := range kernels.All() {
		mod := loaded[where[k]]
		if mod == nil {
			continue
		}
		if _, err := mod.Function(k.Name()); err == nil {
			found++
		} else {
			problem("kernel %s in PTX module %s: %v", k.Name(), mods[where[k]].Name, err)
		}
	}
	if ok && found != len(kernels.All()) {
		problem("%d of %d kernels found in the PTX", found, len(kernels.All()))
		ok = false
	}
	return ok, found
}
