package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/fedaudit/fedaudit/expdir"
)

// Experiment directories are locked with flock(2) on DIR/.lock:
//
//   - a process that works on the whole directory (`audit run`, `audit train` of every shard)
//     takes it exclusively;
//   - a job that trains one shard (`audit train --shards n` in a Slurm array task or a Kubernetes
//     indexed job) takes it shared, so the shard jobs of one directory run side by side, and in
//     addition takes DIR/.lock-shard-I-of-N exclusively, so no two jobs train the same shard.
//
// These locks are never waited for: the second process fails at once, naming the holder (pid,
// host and command, which holders write into their lock file). Serialize's lock (DIR/.lock-config)
// is: it is held only for the moment of checking and writing config.json. The kernel drops a lock when its holder
// exits, however it exits, so a killed process never leaves a directory locked. On a cluster the
// directory is on a shared file system: flock works across nodes on NFS (Linux emulates it with
// NFS byte-range locks) and on Lustre or GPFS mounted with flock support.

// ErrLocked marks a failure to lock a directory another process holds.
var ErrLocked = errors.New("locked")

// Lock is a held directory or shard lock.
type Lock struct {
	files []*os.File // released in reverse order
	// reader: a shared lock of a reader (LockDirReader), which writes no holder line and so
	// clears none.
	reader bool
}

// holderLine is what a holder writes into its lock file.
func holderLine(what string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("pid %d on %s (%s)\n", os.Getpid(), host, what)
}

func openLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

func tryFlock(f *os.File, how int) (bool, error) {
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		return false, nil
	}
	return false, fmt.Errorf("lock %s: %w", f.Name(), err)
}

// record writes the holder line into a lock file the caller holds exclusively.
func record(f *os.File, what string) {
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(holderLine(what)), 0)
	}
}

// LockDir locks dir exclusively for what (e.g. "audit run"), creating dir if need be. It fails
// at once with an error wrapping ErrLocked, naming the holders, when another process holds the
// directory or any of its shards.
func LockDir(dir, what string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	f, err := openLock(expdir.Dir(dir).Lock())
	if err != nil {
		return nil, err
	}
	ok, err := tryFlock(f, syscall.LOCK_EX)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s is in use by %s; wait for it to finish, or stop it", ErrLocked, dir, holders(dir))
		}
		return nil, err
	}
	record(f, what)
	return &Lock{files: []*os.File{f}}, nil
}

// Serialize runs fn while holding the lock file path exclusively, waiting for it: for a step
// that must not interleave with the same step of another process (the shard jobs of an array,
// which hold their directory shared) and takes a moment, so that waiting is the answer rather
// than failing.
func Serialize(path string, fn func() error) error {
	f, err := openLock(path)
	if err != nil {
		return err
	}
	defer f.Close() // releases the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	return fn()
}

// LockDirReader locks dir shared, for a command that reads it and writes nothing but files
// any reader computes alike (`audit analyze`, which may rescore): readers run side by side, a
// writer holding the whole directory (run, train of every shard, attack, report, check) makes
// it fail at once. Shard jobs hold the directory shared, so an analysis may run beside them
// (and refuses the missing shards, unless --allow-partial). A directory
// whose lock file cannot be created or opened for writing (read-only, another user's) has no
// writer of this user to wait for either: it is read without a lock (nil, nil).
func LockDirReader(dir string) (*Lock, error) {
	f, err := os.OpenFile(expdir.Dir(dir).Lock(), os.O_RDWR|os.O_CREATE, 0o644)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	ok, err := tryFlock(f, syscall.LOCK_SH)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s is in use by %s; wait for it to finish, or stop it", ErrLocked, dir, holders(dir))
		}
		return nil, err
	}
	return &Lock{files: []*os.File{f}, reader: true}, nil
}

// LockShard locks shard index of count in dir for what: dir shared (other shard jobs may work
// there, a whole-directory process may not), the shard exclusively.
func LockShard(dir string, index, count int, what string) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	d, err := openLock(expdir.Dir(dir).Lock())
	if err != nil {
		return nil, err
	}
	ok, err := tryFlock(d, syscall.LOCK_SH)
	if err != nil || !ok {
		d.Close()
		if err == nil {
			err = fmt.Errorf("%w: %s is in use by %s; wait for it to finish, or stop it", ErrLocked, dir, holders(dir))
		}
		return nil, err
	}
	spath := expdir.Dir(dir).ShardLock(index, count)
	s, err := openLock(spath)
	if err == nil {
		if ok, err = tryFlock(s, syscall.LOCK_EX); err == nil && !ok {
			err = fmt.Errorf("%w: shard %d/%d of %s is being trained by %s", ErrLocked, index, count, dir, lockHolder(spath))
		}
		if err != nil {
			s.Close()
		}
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	record(s, what)
	return &Lock{files: []*os.File{d, s}}, nil
}

// Unlock releases the lock. The holder line is cleared first, so a lock file's content always
// names a live holder or nobody.
func (l *Lock) Unlock() {
	if l == nil {
		return
	}
	for i := len(l.files) - 1; i >= 0; i-- {
		f := l.files[i]
		if i == len(l.files)-1 && !l.reader {
			f.Truncate(0)
		}
		f.Close() // closing the last descriptor releases the flock
	}
	l.files = nil
}

// lockHolder reads the holder line of a lock file.
func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if s := strings.TrimSpace(string(b)); err == nil && s != "" {
		return s
	}
	return "another process"
}

// holders names who holds dir: the shard jobs whose shard locks are held, else the holder line
// of the directory lock.
func holders(dir string) string {
	entries, _ := os.ReadDir(dir)
	var shards []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), expdir.ShardLockPrefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		held, err := tryFlock(f, syscall.LOCK_SH)
		f.Close() // releases the probe's lock, if it got one
		if err == nil && !held {
			shards = append(shards, strings.TrimPrefix(e.Name(), ".lock-")+": "+lockHolder(p))
		}
	}
	if len(shards) > 0 {
		sort.Strings(shards)
		return "shard jobs (" + strings.Join(shards, "; ") + ")"
	}
	return lockHolder(expdir.Dir(dir).Lock())
}

// CleanStaleDirs removes the directories in parent whose names begin with prefix that no live
// process holds: the staging directories of killed writers (an import fills one beside its
// output and renames it into place). A writer holds its staging directory's lock (LockDir)
// from the instant after it creates it; only directories older than minAge are looked at, so
// that instant is never caught. It returns the directories removed.
func CleanStaleDirs(parent, prefix string, minAge time.Duration) ([]string, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("clean %s: %w", parent, err)
	}
	var removed []string
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if info, err := e.Info(); err != nil || time.Since(info.ModTime()) < minAge {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		f, err := os.OpenFile(expdir.Dir(dir).Lock(), os.O_RDWR, 0)
		switch {
		case errors.Is(err, fs.ErrNotExist): // a writer of a version before the lock
		case err != nil:
			continue
		default:
			held, err := tryFlock(f, syscall.LOCK_EX)
			if err != nil || !held {
				f.Close()
				continue
			}
		}
		// Removed while its lock is held, so its writer cannot be starting on it.
		err = os.RemoveAll(dir)
		if f != nil {
			f.Close()
		}
		if err != nil {
			return removed, fmt.Errorf("clean %s: %w", dir, err)
		}
		removed = append(removed, dir)
	}
	return removed, nil
}

// StagingDir makes a hidden directory in parent, named prefix and a random suffix, for a
// writer that fills it and renames it into place, and locks it for what (the lock goes with it
// through the rename). The staging directories of killed writers with the same prefix, which
// no process holds and are older than a minute, are removed first and returned.
func StagingDir(parent, prefix, what string) (dir string, lock *Lock, removed []string, err error) {
	removed, err = CleanStaleDirs(parent, prefix, time.Minute)
	if err != nil {
		return "", nil, removed, err
	}
	dir, err = TempDir(parent, prefix)
	if err != nil {
		return "", nil, removed, err
	}
	if lock, err = LockDir(dir, what); err != nil {
		os.RemoveAll(dir)
		return "", nil, removed, err
	}
	return dir, lock, removed, nil
}
