package main

import (
	"fmt"

	"github.com/fedaudit/fedaudit/expdir"
	"github.com/fedaudit/fedaudit/experiment"
	"github.com/fedaudit/fedaudit/internal/fsutil"
	"github.com/fedaudit/fedaudit/runs"
)

// lockExperiment checks dir against cfg (refusing before anything is written, as the stages
// would), then locks it: exclusively for a whole-directory command, or, for a job training one
// shard, shared with the other shard jobs and exclusively for its shard (see fsutil). A second
// process fails at once, naming the holder. Once the lock is held, temporary files left by
// killed writers are removed. The caller unlocks.
func lockExperiment(e *env, cfg *experiment.Config, dir string, shards int, shard *runs.Shard, what string) (*fsutil.Lock, error) {
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
	for _, sub := range expdir.Dir(dir).Written() {
		removed, err := fsutil.CleanStale(sub)
		if err != nil {
			lock.Unlock()
			return nil, err
		}
		for _, p := range removed {
			e.logf("%s: removed %s, left by a killed writer", what, p)
		}
	}
	return lock, nil
}
