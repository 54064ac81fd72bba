//go:build unix

package importer

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// An imported directory has the mode `audit run` gives its own, 0o755 less the umask: it was
// made by os.MkdirTemp (0o700) and renamed into place, so it was drwx------ whatever the umask,
// unreadable by the group that reads trained directories. (The umask is the process's: no test
// of this package runs in parallel.)
func TestImportDirectoryFollowsUmask(t *testing.T) {
	cfg := smallConfig(t)
	for _, c := range []struct {
		umask int
		want  fs.FileMode
	}{{0o022, 0o755}, {0o027, 0o750}} {
		old := syscall.Umask(c.umask)
		res, err, _ := importFlat(t, flatSpec{cfg: cfg})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(res.Dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != c.want {
			t.Errorf("umask %#o: %s has mode %v, want %v", c.umask, filepath.Base(res.Dir), st.Mode().Perm(), c.want)
		}
	}
}
