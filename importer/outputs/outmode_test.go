//go:build unix

package outputs

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An imported outputs directory has the mode `audit run` gives its own, 0o755 less the umask:
// made by os.MkdirTemp (0o700) and renamed into place, it was drwx------ whatever the umask.
// (The umask is the process's: no test of this package runs in parallel.)
func TestImportDirectoryFollowsUmask(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "outputs.csv")
	if err := os.WriteFile(in, csvLogitColumns(simulate(4, 0, 1, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o755}, {0o027, 0o750}} {
		out := filepath.Join(dir, []string{"a", "b"}[i])
		old := syscall.Umask(c.umask)
		_, err := Import(context.Background(), ImportOptions{Input: in, Out: out})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != c.want {
			t.Errorf("umask %#o: %s has mode %v, want %v", c.umask, out, got, c.want)
		}
	}
}
