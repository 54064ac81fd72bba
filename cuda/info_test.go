package cuda

import (
	"bytes"
	"strings"
	"testing"
)

// gpu-info says where cuBLAS came from, on its own line (issue 27: it was found only with
// LD_LIBRARY_PATH set by hand, and nothing said where a library came from).
func TestInfoSaysWhereCublasCameFrom(t *testing.T) {
	in := &Info{Build: "gpu", CublasName: "/usr/local/cuda/lib64/libcublas.so.13", CublasFile: "/usr/local/cuda/lib64/libcublas.so.13.1.0.3",
		CublasVersion: "13.1.0", CublasSource: "/usr/local/cuda/lib64 (the default CUDA install)"}
	var b bytes.Buffer
	in.Write(&b)
	if !strings.Contains(b.String(), "\ncuBLAS from:   /usr/local/cuda/lib64 (the default CUDA install)\n") {
		t.Errorf("gpu-info:\n%s", b.String())
	}
}
