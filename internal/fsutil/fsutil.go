// Package fsutil writes files so that a reader never sees half of one, and locks experiment
// directories against concurrent writers.
//
// Every output file is written to a hidden temporary file beside it (".NAME.tmp-XXXX"), synced,
// and renamed over NAME: rename within a directory is atomic, so NAME is always either the old
// file or the whole new one, even when the process is killed. While it writes, the writer holds
// an exclusive flock on its temporary file; a temporary file nobody holds a lock on was left by
// a killed process (stale) and is removed by CleanStale.
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// tempMarker is what every temporary file's name contains: ".NAME.tmp-RANDOM".
const tempMarker = ".tmp-"

// IsTemp reports whether a base name is that of a temporary file of this package.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// File is a file being written; it appears at its path only when Commit succeeds.
type File struct {
	*os.File
	path string
	done bool
}

// maxCreateTries is how many new temporary files Create makes when a cleaner removes each
// before it is locked.
const maxCreateTries = 1000

// Create starts writing the file path. The caller must end with Commit or Abort; `defer
// f.Abort()` is safe after Commit.
func Create(path string) (*File, error) {
	dir, base := filepath.Split(path)
	if base == "" {
		return nil, fmt.Errorf("create %s: not a file name", path)
	}
	if dir == "" {
		dir = "."
	}
	// A cleaner may find the new file in the instant before it is locked, take it for a killed
	// writer's and remove it (CleanStale removes only what it holds the lock of). The writer
	// then holds the lock of a file no longer in the directory: it sees that once it has the
	// lock, and starts again with a new file.
	for try := 0; ; try++ {
		f, err := os.CreateTemp(dir, "."+base+tempMarker+"*")
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if beforeLock != nil {
			beforeLock(f.Name())
		}
		// The lock tells CleanStale that the file is in use; it goes with the descriptor, so a
		// killed writer's lock goes with it. Blocking: a cleaner holds the lock only to remove.
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == nil && !stillNamed(f) {
			f.Close()
			// A cleaner wins this instant only by chance (TestCommitBesideCleaner's, which
			// cleans without a pause, won ten times in a row once in a few thousand commits):
			// the bound only stops a loop that something else keeps emptying.
			if try < maxCreateTries {
				continue
			}
			err = fmt.Errorf("its temporary file was removed by another process %d times over", maxCreateTries)
		}
		if err == nil {
			// CreateTemp makes files private; outputs are data like any other.
			err = f.Chmod(0o644)
		}
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		return &File{File: f, path: path}, nil
	}
}

// stillNamed reports whether f's name in its directory still refers to f.
func stillNamed(f *os.File) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(f.Name())
	return err == nil && os.SameFile(a, b)
}

// Path is where the file appears on Commit.
func (f *File) Path() string { return f.path }

// Commit syncs the file, renames it into place and closes it, then syncs the directory. On
// failure the temporary file is removed and path is left as it was. The file is renamed before
// it is closed: closing releases its lock, and a temporary file nobody holds is removed by
// CleanStale (another shard job cleaning the directory) before it could be renamed.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("commit %s: already closed", f.path)
	}
	f.done = true
	err := f.Sync()
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		f.File.Close()
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	f.File.Close() // its data is synced already
	SyncDir(filepath.Dir(f.path))
	return nil
}

// Abort discards the temporary file. It does nothing after Commit.
func (f *File) Abort() error {
	if f.done {
		return nil
	}
	f.done = true
	f.File.Close()
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort %s: %w", f.path, err)
	}
	return nil
}

// CanWrite reports, by creating and discarding the temporary file Create would write, whether
// path can be written: a stage that would compute for a long time before writing its result
// asks first, so that a read-only directory fails before the work, not after it.
func CanWrite(path string) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	return f.Abort()
}

// WriteFile writes data to path atomically (temporary file, fsync, rename), with mode 0644.
func WriteFile(path string, data []byte) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir makes a rename in dir durable. Errors are ignored: some file systems cannot sync
// directories, and the file itself is complete already.
func SyncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	d.Sync()
	d.Close()
}

// beforeLock, when set (by tests), runs between creating a temporary file and locking it.
var beforeLock func(name string)

// InUse reports whether a temporary file's writer is still at work (holds its lock). A file that
// cannot be opened or locked for another reason counts as in use: it is never removed by mistake.
// A file nobody holds is stale however young it is: a writer locks its file the instant it
// creates it (see Create for a cleaner that comes in that instant).
func InUse(path string) bool {
	f, held := holdStale(path)
	if f != nil {
		f.Close()
	}
	return held
}

// holdStale opens path and takes its lock without waiting. It returns the open file, locked,
// when nobody else held it (closing it releases the lock); held is true when a writer holds it
// or it cannot be opened or locked for another reason.
func holdStale(path string) (f *os.File, held bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, !errors.Is(err, fs.ErrNotExist)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, true
	}
	return f, false
}

// CleanStale removes the temporary files in dir that no live writer holds (left by killed
// processes) and returns their paths. Temporary files in use are left alone.
func CleanStale(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clean %s: %w", dir, err)
	}
	var removed []string
	for _, e := range entries {
		if e.IsDir() || !IsTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, held := holdStale(p)
		if f == nil || held {
			continue
		}
		// Removed while its lock is held, so that a writer that created it an instant ago and
		// is about to lock it finds it gone (Create) rather than losing it later.
		err := os.Remove(p)
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("clean %s: %w", dir, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
