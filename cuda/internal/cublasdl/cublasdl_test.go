//go:build cgo

package cublasdl

import (
	"os"
	"path/filepath"
	"strconv"
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

// Where a cuBLAS is installed, Load finds it in a searched directory when the dynamic loader's
// own search finds none (here: a name it cannot find), and Source names the directory.
func TestLoadSearchesCUDAHome(t *testing.T) {
	real, err := Load()
	if err != nil {
		t.Skipf("no cuBLAS on this machine: %v", err)
	}
	home := t.TempDir()
	os.Mkdir(filepath.Join(home, "lib64"), 0o755)
	so := "libcublas.so." + strconv.Itoa(real.Major)
	if err := os.Symlink(real.File, filepath.Join(home, "lib64", so)); err != nil {
		t.Fatal(err)
	}
	e := fakeEnv(t, "/", map[string]string{"CUDA_HOME": home})
	e.loader = []string{"libcublas.so.99"}
	lib, err := load(e)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "lib64") + " ($CUDA_HOME/lib64)"; lib.Source != want || lib.Name != filepath.Join(home, "lib64", so) {
		t.Errorf("loaded %s, found by %q; want %s, found by %q", lib.Name, lib.Source, filepath.Join(home, "lib64", so), want)
	}
	// Found by the loader's own search: Source says so, and no directory is searched.
	e = fakeEnv(t, "/", map[string]string{"CUDA_HOME": home})
	e.loader = []string{"libcublas.so.99", real.Name}
	if lib, err := load(e); err != nil || lib.Source != LoaderSearch || lib.Name != real.Name {
		t.Errorf("the loader's search: %+v, %v; want %s found by %q", lib, err, real.Name, LoaderSearch)
	}
	// FEDAUDIT_CUBLAS: Source names it; when it does not load, nothing else is tried (the
	// loader's names and $CUDA_HOME would find one here).
	e = fakeEnv(t, "/", map[string]string{PathEnv: real.File, "CUDA_HOME": home})
	e.loader = []string{real.Name}
	if lib, err := load(e); err != nil || lib.Source != PathEnv || lib.Name != real.File {
		t.Errorf("%s=%s: %+v, %v; want it, found by %q", PathEnv, real.File, lib, err, PathEnv)
	}
	e = fakeEnv(t, "/", map[string]string{PathEnv: "/nowhere/libcublas.so.12", "CUDA_HOME": home})
	e.loader = []string{real.Name}
	if lib, err := load(e); err == nil || !strings.Contains(err.Error(), "tried /nowhere/libcublas.so.12 (") || strings.Contains(err.Error(), real.Name) {
		t.Errorf("%s naming no library: %+v, %v; want an error naming only it", PathEnv, lib, err)
	}
	// Nothing anywhere: the error names the loader's names and the directories searched.
	e = fakeEnv(t, t.TempDir(), map[string]string{"CUDA_HOME": "/nowhere"})
	e.loader = []string{"libcublas.so.99"}
	_, err = load(e)
	if err == nil || !strings.Contains(err.Error(), "libcublas.so.99 (") || !strings.Contains(err.Error(), "searched /nowhere/lib64, /usr/local/cuda/lib64") {
		t.Errorf("nothing found: %v", err)
	}
}
