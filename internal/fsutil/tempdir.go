package fsutil

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// DirPerm is the mode an output directory is made with, less the umask: the one `audit run`
// makes its directory with (os.MkdirAll(dir, 0o755)), so that a directory published by rename
// (an import's) and a trained one are readable by the same people.
const DirPerm fs.FileMode = 0o755

// TempDir makes a new directory in parent named prefix followed by a random number, with mode
// DirPerm less the umask, and returns its path: a directory filled out of sight and renamed
// into place whole. os.MkdirTemp makes 0o700 whatever the umask, and a rename keeps the mode:
// an imported directory was drwx------ where `audit run` writes drwxr-xr-x. os.Mkdir applies
// the umask itself, so nothing reads it (syscall.Umask can only read it by setting it, for
// every goroutine of the process at once).
func TempDir(parent, prefix string) (string, error) {
	for range 10000 {
		dir := filepath.Join(parent, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(dir, DirPerm)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", &fs.PathError{Op: "mkdirtemp", Path: filepath.Join(parent, prefix+"*"), Err: fs.ErrExist}
}
