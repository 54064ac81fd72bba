//go:build cgo

package hostshim

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/compute"
	"github.com/fedaudit/fedaudit/cuda"
)

const asanChildEnv = "FEDAUDIT_SHIM_ASAN_CHILD"

// Under FEDAUDIT_SHIM_ASAN=1 a kernel that writes one element past its buffer is caught: the
// test runs such a launch in a child process (ASan aborts the process it finds the error in)
// and requires AddressSanitizer's heap-buffer-overflow report naming the kernel.
func TestASanCatchesOutOfBounds(t *testing.T) {
	if !ASan() {
		t.Skipf("runs only with %s=1", ASanEnv)
	}
	if os.Getenv(asanChildEnv) == "1" {
		d := device(t)
		ops := cuda.NewOps(d, cuda.Options{})
		y := ops.Alloc(10)
		// 11 elements into a buffer of 10.
		ops.Axpby(0, compute.Mat{}, 0, compute.Mat{Buf: y, Rows: 1, Cols: 11, Stride: 11, Batch: 1}, nil)
		t.Fatalf("the out-of-bounds write was not caught (err %v)", ops.Err())
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestASanCatchesOutOfBounds$", "-test.count=1")
	cmd.Env = append(os.Environ(), asanChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child passed:\n%s", out)
	}
	if !strings.Contains(string(out), "AddressSanitizer: heap-buffer-overflow") || !strings.Contains(string(out), "axpby") {
		t.Fatalf("no ASan report naming axpby:\n%s", out)
	}
}
