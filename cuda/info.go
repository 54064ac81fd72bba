package cuda

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Info is what `audit gpu-info` reports: whether this build and this node can run the GPU
// backend, and with what.
type Info struct {
	Build         string   `json:"build"`                     // "gpu", or "no GPU backend"
	HeaderVersion string   `json:"cuda_headers"`              // the cuda.h the binary was built against
	DriverVersion string   `json:"driver_cuda"`               // the CUDA version the driver supports
	Devices       int      `json:"devices"`                   // GPUs the driver sees
	Ordinal       int      `json:"device"`                    // the one described below
	Name          string   `json:"name"`                      // its model
	Compute       string   `json:"compute"`                   // compute capability, e.g. 9.0
	MemoryTotal   int64    `json:"memory_total"`              // bytes
	MemoryFree    int64    `json:"memory_free"`               // bytes, now
	CublasName    string   `json:"cublas_soname"`             // the soname or path it was opened by
	CublasFile    string   `json:"cublas_file"`               // the file behind it
	CublasVersion string   `json:"cublas_version"`            // major.minor.patch
	CublasSource  string   `json:"cublas_found_by,omitempty"` // how: FEDAUDIT_CUBLAS, the loader's search, or a directory searched
	PTXTarget     string   `json:"ptx_target"`                // the virtual architecture of the embedded PTX
	KernelsLoaded bool     `json:"kernels_loaded"`            // the driver JIT-compiled every module
	Kernels       int      `json:"kernels"`                   // entry points found
	BackendOpened bool     `json:"backend_opened"`            // the backend opened (context, kernels, cuBLAS handle)
	Graphs        bool     `json:"cuda_graphs,omitempty"`     // the driver can instantiate CUDA graphs (Options.Graphs)
	Options       []string `json:"options,omitempty"`         // the tuning variables set in the environment (EnvSettings), NAME=VALUE
	Warnings      []string `json:"warnings,omitempty"`        // what does not stop the backend: variables with EnvPrefix that change nothing (EnvSettings)
	Problems      []string `json:"problems,omitempty"`
}

// options lists the tuning variables set, or says that the defaults hold.
func options(set []string) string {
	if len(set) == 0 {
		return "defaults (no " + EnvPrefix + "* variable set)"
	}
	return strings.Join(set, " ")
}

// PTXTarget is the virtual architecture the committed PTX is generated for (kernels/genptx.sh).
const PTXTarget = "compute_70"

// GPUInfo inspects device ordinal: the driver, the device, cuBLAS and the embedded kernels,
// each step independent of the others as far as possible, so one failure does not hide the
// rest. The error is nil only when the backend can run; Info is filled as far as it got. A
// build without the gpu tag returns ErrNotBuilt.
func GPUInfo(ordinal int) (*Info, error) {
	in, err := gpuInfo(ordinal)
	if in != nil {
		in.addEnv(os.Environ())
	}
	return in, err
}

// addEnv records the tuning variables environ sets and warns of those that change nothing.
func (in *Info) addEnv(environ []string) {
	in.Options, in.Warnings = EnvSettings(environ)
}

// Write prints the info as aligned lines.
func (in *Info) Write(w io.Writer) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	mib := func(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
	rows := [][2]string{
		{"build", in.Build},
		{"CUDA headers", in.HeaderVersion},
		{"driver", "CUDA " + in.DriverVersion},
		{"devices", fmt.Sprint(in.Devices)},
		{"device", fmt.Sprintf("%d: %s (compute capability %s)", in.Ordinal, in.Name, in.Compute)},
		{"memory", fmt.Sprintf("%s total, %s free", mib(in.MemoryTotal), mib(in.MemoryFree))},
		{"cuBLAS", fmt.Sprintf("%s (%s, %s)", in.CublasVersion, in.CublasName, in.CublasFile)},
		{"cuBLAS from", in.CublasSource},
		{"kernels", fmt.Sprintf("%s PTX, %d entry points, loaded: %s", in.PTXTarget, in.Kernels, yes(in.KernelsLoaded))},
		{"backend opens", yes(in.BackendOpened)},
		{"CUDA graphs", yes(in.Graphs) + " (used with FEDAUDIT_CUDA_GRAPHS=1)"},
		{"options", options(in.Options)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%-14s %s\n", r[0]+":", r[1])
	}
	for _, p := range in.Warnings {
		fmt.Fprintf(w, "warning:       %s\n", p)
	}
	for _, p := range in.Problems {
		fmt.Fprintf(w, "problem:       %s\n", p)
	}
}
