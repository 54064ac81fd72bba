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
	"time"
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
	f, err := os.CreateTemp(dir, "."+base+tempMarker+"*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	// The lock tells CleanStale that the file is in use; it goes with the descriptor, so a killed
	// writer's lock goes with it. Blocking: InUse may hold the lock for an instant.
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
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

// Path is where the file appears on Commit.
func (f *File) Path() string { return f.path }

// Commit syncs the file, closes it and renames it into place, then syncs the directory. On
// failure the temporary file is removed and path is left as it was.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("commit %s: already closed", f.path)
	}
	f.done = true
	err := f.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", f.path, err)
	}
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

// staleAge is how old an unlocked temporary file must be before CleanStale removes it: it
// closes the instant between a writer creating its file and locking it.
const staleAge = 5 * time.Second

// InUse reports whether a temporary file's writer is still at work (holds its lock). A file that
// cannot be opened or locked for another reason counts as in use: it is never removed by mistake.
func InUse(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if st, err := f.Stat(); err == nil && time.Since(st.ModTime()) < staleAge {
		return true
	}
	return false
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
		if InUse(p) {
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("clean %s: %w", dir, err)
		}
		removed = append(removed, p)
	}
	return removed, nil
}
