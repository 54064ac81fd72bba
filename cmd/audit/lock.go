package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/experiment/spec"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// lockExperiment checks cfg's later stages against the runs it trains (spec.CheckStages)
// and dir against cfg (refusing before anything is written, as the stages would), then locks
// it: exclusively for a whole-directory command, or, for a job training one shard, shared with
// the other shard jobs and exclusively for its shard (see fsutil). A second process fails at
// once, naming the holder. Once the lock is held, temporary files left by
// killed writers are removed. The caller unlocks.
func lockExperiment(e *env, cfg *spec.Config, dir string, shards int, shard *runs.Shard, what string) (*fsutil.Lock, error) {
	// What the attack stage needs of the runs is checked before they are trained.
	if err := spec.CheckStages(cfg); err != nil {
		return nil, err
	}
	if _, err := experiment.CheckDirectory(cfg, dir, shards); err != nil {
		return nil, err
	}
	var lock *fsutil.Lock
	var err error
	if shard != nil {
		lock, err = fsutil.LockShard(dir, shard.Index, shard.Count, fmt.Sprintf("%s, shard %s", what, shard))
	} else {
		lock, err = fsutil.LockDir(dir, what)
	}
	if err != nil {
		return nil, err
	}
	if err := cleanStale(e, dir, what); err != nil {
		lock.Unlock()
		return nil, err
	}
	return lock, nil
}

// cleanStale removes the temporary files killed writers left in dir, under the caller's lock.
func cleanStale(e *env, dir, what string) error {
	for _, sub := range expdir.Dir(dir).Written() {
		removed, err := fsutil.CleanStale(sub)
		if err != nil {
			return err
		}
		for _, p := range removed {
			e.logf("%s: removed %s, left by a killed writer", what, p)
		}
	}
	return nil
}

// lockWriter locks an experiment directory exclusively for a command that writes into it
// besides training (attack: the score files; report: findings, report and config.json;
// check: check.json), then removes what killed writers left. Without it two reports of
// different claims at once left findings.json, report.md and report.html of different
// verdicts, and a report beside a running `audit run` rewrote the directory under it.
func lockWriter(e *env, dir, what string) (*fsutil.Lock, error) {
	lock, err := fsutil.LockDir(dir, what)
	if err != nil {
		// what names the holder in the lock ("audit report"); main prefixes "audit: " already.
		return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(what, "audit "), err)
	}
	if err := cleanStale(e, dir, what); err != nil {
		lock.Unlock()
		return nil, err
	}
	return lock, nil
}

// existedBefore reports whether dir exists; forgetIfRefused takes it to know whether the
// command created dir (for its lock).
func existedBefore(dir string) bool {
	_, err := os.Stat(dir)
	return err == nil
}

// forgetIfRefused removes dir when this command created it for its lock and was then refused
// for its configuration (a model that cannot take the data, known only once the data is
// loaded) before writing anything but the lock files: a refused command leaves no trace.
func forgetIfRefused(dir string, existed bool, err error) {
	var ce *spec.ConfigError
	if existed || !errors.As(err, &ce) {
		return
	}
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".lock") {
			return
		}
	}
	os.RemoveAll(dir)
}
