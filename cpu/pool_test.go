package cpu

import (
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// countJob records which tasks ran and on which workers.
type countJob struct {
	runs    []atomic.Int32
	workers []atomic.Int32
	sleep   time.Duration
	yield   bool
}

func (j *countJob) run(task, worker int) {
	j.runs[task].Add(1)
	j.workers[worker].Add(1)
	if j.sleep > 0 {
		time.Sleep(j.sleep)
	}
	if j.yield {
		runtime.Gosched()
	}
}

// Every task of every job runs exactly once, whether the helpers are spinning (jobs back to
// back), parked (a pause longer than spinWait before the job) or just started, and whatever
// the worker count, and a job of n tasks takes no helper beyond the first n-1 (jobs of fewer
// tasks than workers let the others go by). Run with -race to check the hand-off.
func TestPoolRunsEveryTaskOnce(t *testing.T) {
	for _, workers := range []int{2, 3, 8} {
		p := newPool(workers)
		for job := 0; job < 300; job++ {
			n := 1 + job%7
			if job%50 == 0 {
				n = 64
			}
			j := &countJob{runs: make([]atomic.Int32, n), workers: make([]atomic.Int32, workers)}
			if job%37 == 5 {
				time.Sleep(2 * spinWait) // the helpers park
			}
			if job == 100 {
				j.sleep = time.Millisecond // long tasks: the helpers take part while they run
			}
			p.do(j, n)
			for task := range j.runs {
				if got := j.runs[task].Load(); got != 1 {
					t.Fatalf("%d workers, job %d: task %d ran %d times", workers, job, task, got)
				}
			}
			// n tasks take at most n-1 helpers besides the caller (worker 0): helpers 1..n-1.
			for w := n; w < workers; w++ {
				if got := j.workers[w].Load(); got != 0 {
					t.Fatalf("%d workers, job %d of %d tasks: helper %d ran %d of them", workers, job, n, w, got)
				}
			}
		}
		p.close()
	}
}

// A pool closed while its helpers spin or are parked leaves no goroutine behind: close
// reaches both states.
func TestPoolCloseEndsHelpers(t *testing.T) {
	for _, pause := range []time.Duration{0, 3 * spinWait} {
		before := runtime.NumGoroutine()
		p := newPool(4)
		p.do(&countJob{runs: make([]atomic.Int32, 8), workers: make([]atomic.Int32, 4)}, 8)
		time.Sleep(pause)
		p.close()
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("pause %v: %d goroutines after close, %d before the pool", pause, n, before)
		}
	}
}

// The pool under stress: many helpers (3 to 64, more than the test's GOMAXPROCS when run with
// -cpu 1,2,3), jobs of 1 to 2*workers tasks in random order, and pauses drawn around spinWait so
// that jobs start while helpers are spinning, parking, parked or just woken. Some tasks yield or
// sleep, so that the dispatching goroutine is descheduled between publishing a job and waking its
// helpers, the interleaving that made a helper run one job twice (sync: negative WaitGroup
// counter) on every machine with 3 or more threads. Every task must run exactly once and no
// helper beyond n-1 may take part; a helper that ran a job twice either panics in Done or
// makes a task count 2. Run it with -race and -cpu 1,2,3,8.
func TestPoolStress(t *testing.T) {
	jobs := 1500
	if testing.Short() {
		jobs = 300
	}
	rng := rand.New(rand.NewPCG(27, uint64(runtime.GOMAXPROCS(0))))
	for _, workers := range []int{3, 4, 5, 8, 16, 64} {
		p := newPool(workers)
		for job := 0; job < jobs; job++ {
			n := 1 + rng.IntN(2*workers)
			j := &countJob{runs: make([]atomic.Int32, n), workers: make([]atomic.Int32, workers)}
			switch rng.IntN(8) {
			case 0:
				time.Sleep(time.Duration(rng.Int64N(int64(2 * spinWait)))) // around the spin's end
			case 1:
				runtime.Gosched()
			case 2:
				j.yield = true // tasks give up the thread: the caller may be descheduled
			}
			p.do(j, n)
			for task := range j.runs {
				if got := j.runs[task].Load(); got != 1 {
					t.Fatalf("%d workers, job %d: task %d of %d ran %d times", workers, job, task, n, got)
				}
			}
			for w := n; w < workers; w++ {
				if got := j.workers[w].Load(); got != 0 {
					t.Fatalf("%d workers, job %d of %d tasks: helper %d ran %d of them", workers, job, n, w, got)
				}
			}
		}
		p.close()
	}
}
