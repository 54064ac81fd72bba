package cuda_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// A gpu build must not ask the dynamic loader for libcublas: cuBLAS is opened at run time by
// probing its sonames (package cuda/internal/cublasdl), so a binary built against CUDA 11.8
// runs where only libcublas.so.12 or .13 exists. The only CUDA library it may need is the
// driver's libcuda.so.1, which every driver version provides. This builds the audit command
// with -tags gpu and reads its dynamic section; it is skipped where the CUDA headers are not
// installed (FEDAUDIT_REQUIRE_GPU_BUILD=1, set by .ci/gpu-checks, makes that a failure).
func TestGPUBuildDoesNotLinkCublas(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF check: linux only")
	}
	if testing.Short() {
		t.Skip("builds the audit command with -tags gpu")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		t.Skipf("no Go toolchain here (%v): a kit binary on a GPU node", err)
	}
	if _, err := os.Stat("../cmd/audit"); err != nil {
		t.Skipf("not in the source tree: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "audit-gpu")
	cmd := exec.Command(goBin, "build", "-tags", "gpu", "-o", bin, "../cmd/audit")
	out, err := cmd.CombinedOutput()
	if err != nil {
		if os.Getenv("FEDAUDIT_REQUIRE_GPU_BUILD") != "1" && (strings.Contains(string(out), "cuda.h") || strings.Contains(string(out), "cannot find -lcuda")) {
			t.Skipf("no CUDA toolkit to build against: %s", firstLine(string(out)))
		}
		t.Fatalf("go build -tags gpu ./cmd/audit: %v\n%s", err, out)
	}
	checkNeeded(t, bin)
}

// checkNeeded fails unless bin's DT_NEEDED entries include libcuda.so.1 and no libcublas.
func checkNeeded(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	hasCuda := false
	for _, l := range libs {
		if strings.HasPrefix(l, "libcublas") {
			t.Errorf("%s needs %s; cuBLAS must be loaded at run time", bin, l)
		}
		hasCuda = hasCuda || l == "libcuda.so.1"
	}
	if !hasCuda {
		t.Errorf("%s does not need libcuda.so.1 (needs %v): is it a gpu build?", bin, libs)
	}
	t.Logf("NEEDED: %v", libs)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
