//go:build unix

package fsutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withUmask runs fn under umask mask, restoring the old one after. The umask is the process's:
// the tests that set it do not run in parallel with others.
func withUmask(mask int, fn func()) {
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

// TempDir's directory has the mode `audit run` gives its own (0o755 less the umask), not
// os.MkdirTemp's 0o700, which a rename into place kept.
func TestTempDirFollowsUmask(t *testing.T) {
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o755}, {0o027, 0o750}, {0o077, 0o700}, {0o002, 0o755}} {
		parent := t.TempDir()
		var dir string
		var err error
		withUmask(c.umask, func() { dir, err = TempDir(parent, ".out.import-") })
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != c.want || !st.IsDir() {
			t.Errorf("umask %#o: mode %v, want %v", c.umask, st.Mode(), c.want)
		}
		if filepath.Dir(dir) != parent || !strings.HasPrefix(filepath.Base(dir), ".out.import-") {
			t.Errorf("made %s, want .out.import-* in %s", dir, parent)
		}
	}
	// Two calls make two directories.
	parent := t.TempDir()
	a, errA := TempDir(parent, "x")
	b, errB := TempDir(parent, "x")
	if errA != nil || errB != nil || a == b {
		t.Fatalf("%s, %v and %s, %v: want two new directories", a, errA, b, errB)
	}
}
