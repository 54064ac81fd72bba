//go:build cgo

package cublasdl

import (
	"os"
	"strings"
	"testing"
)

// A missing library is one error that names every library tried, with the loader's reason,
// and says how to fix it.
func TestMissingLibraryNamesEveryName(t *testing.T) {
	names := []string{"libcublas.so.99", "/nonexistent/libcublas.so.12", "libc.so.6"}
	_, err := LoadFrom(names)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, n := range names {
		if !strings.Contains(msg, n+" (") {
			t.Errorf("error does not name %s: %s", n, msg)
		}
	}
	// libc loads, but is not cuBLAS: the reason says which symbol is missing.
	if !strings.Contains(msg, "no symbol cublasCreate_v2") {
		t.Errorf("error does not say libc lacks cuBLAS's symbols: %s", msg)
	}
	if !strings.Contains(msg, PathEnv) {
		t.Errorf("error does not mention %s: %s", PathEnv, msg)
	}
}

// The default list tries CUDA 13, 12 and 11 in that order, then the unversioned name.
func TestSonameOrder(t *testing.T) {
	want := "libcublas.so.13 libcublas.so.12 libcublas.so.11 libcublas.so"
	if got := strings.Join(Sonames, " "); got != want {
		t.Errorf("Sonames = %s, want %s", got, want)
	}
}

// Where a cuBLAS is installed (CI installs Debian's CUDA 11.8), Load finds it and reads its
// version without a GPU. FEDAUDIT_REQUIRE_CUBLAS=1 turns a missing library into a failure.
func TestLoadInstalled(t *testing.T) {
	l, err := Load()
	if err != nil {
		if os.Getenv("FEDAUDIT_REQUIRE_CUBLAS") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no cuBLAS on this machine: %v", err)
	}
	if l.Major < 11 || l.File == "" || !strings.HasPrefix(l.Version, strings.Split(l.Version, ".")[0]+".") {
		t.Errorf("loaded %+v", l)
	}
	t.Logf("cuBLAS %s from %s (opened as %s)", l.Version, l.File, l.Name)
}
