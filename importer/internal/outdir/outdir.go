// Package outdir makes the hidden directory an import fills beside its output directory and
// renames into place, for both imports (package importer's snapshots, importer/outputs' tables).
package outdir

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// Perm is the mode a new output directory is made with, less the umask: the one `audit run`
// makes its directory with (experiment: os.MkdirAll(dir, 0o755)), so that an imported directory
// and a trained one are readable by the same people.
const Perm fs.FileMode = 0o755

// Temp makes a new directory in parent named prefix followed by a random number, with mode Perm
// less the umask, and returns its path. os.MkdirTemp makes 0o700 whatever the umask, and a
// rename keeps the mode: an imported directory was drwx------ where `audit run` writes
// drwxr-xr-x. os.Mkdir applies the umask itself, so nothing reads it (syscall.Umask can only
// read it by setting it, for every goroutine of the process at once).
func Temp(parent, prefix string) (string, error) {
	for range 10000 {
		dir := filepath.Join(parent, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		err := os.Mkdir(dir, Perm)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", &fs.PathError{Op: "mkdirtemp", Path: filepath.Join(parent, prefix+"*"), Err: fs.ErrExist}
}
