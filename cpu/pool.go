package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// job is one parallel operation: run is called once for every task index in [0, n), with the
// index of the worker running it (for its scratch memory).
type job interface {
	run(task, worker int)
}

// pool is a fixed set of goroutines that split the tasks of one job at a time. Dispatch
// allocates nothing: the job is a pointer kept in an interface, and wake-ups are empty structs.
//
// A helper that has finished a job spins for a while (spinWait) watching for the next one
// before it parks on its channel. A training step is a chain of operations of a millisecond
// or less with almost nothing between them, and waking a parked goroutine (a futex wake of an
// idle thread, then the scheduler) was measured at about 150 microseconds on the 2-core
// development VM: a fifth of the second core's time in W2 went to waiting to be woken.
type pool struct {
	workers int
	cur     job
	n       int64
	next    atomic.Int64
	// state is the job count times stateJobs plus the number of helpers taking part in the
	// current job (helpers 1..that): one word, so that a helper reads both at once.
	state  atomic.Uint64
	jobs   uint64 // the job count (do's alone)
	wg     sync.WaitGroup
	wake   []chan struct{}
	parked []atomic.Bool // helper i+1 is parked on wake[i] (or about to be) until claimed
	once   sync.Once
	closed atomic.Bool
}

// stateJobs is state's unit of the job count: helper counts stay below it.
const stateJobs = 1 << 24

// spinWait is how long an idle helper watches for the next job before parking: longer than
// the gaps between a step's operations, short enough that an idle backend frees its cores
// at once for anything else.
const spinWait = 200 * time.Microsecond

func newPool(workers int) *pool {
	workers = min(max(workers, 1), stateJobs)
	return &pool{workers: workers}
}

func (p *pool) start() {
	p.wake = make([]chan struct{}, p.workers-1)
	p.parked = make([]atomic.Bool, p.workers-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.loop(i+1, p.wake[i], p.state.Load())
	}
}

// loop is helper id's life; seen is the state when it was started (read by start, before do
// counts the job that started the pool, so that the helper takes part in it). A helper takes
// part in the jobs whose helper count reaches its id and lets the others go by: a job cannot
// end before each of its helpers has seen it, so none of them misses one.
func (p *pool) loop(id int, wake <-chan struct{}, seen uint64) {
	for {
		if !p.spin(seen) && !p.park(&p.parked[id-1], wake, seen) {
			return
		}
		seen = p.state.Load()
		if id <= int(seen%stateJobs) {
			p.drain(id)
			p.wg.Done()
		}
	}
}

// spin reports whether the state moved on from seen (a job started) within spinWait.
func (p *pool) spin(seen uint64) bool {
	deadline := time.Now().Add(spinWait)
	for i := 1; ; i++ {
		if p.state.Load() != seen {
			return true
		}
		if i%64 == 0 {
			if p.closed.Load() || time.Now().After(deadline) {
				return false
			}
			runtime.Gosched()
		}
	}
}

// park blocks a helper (its flag and channel) until the state moves on from seen (true) or
// the pool closes (false). Either the helper takes back its parked flag itself, having seen
// the new job, or do claims the flag (only for a job the helper takes part in) and sends on
// its channel: exactly one of the two.
func (p *pool) park(flag *atomic.Bool, wake <-chan struct{}, seen uint64) bool {
	flag.Store(true)
	if p.state.Load() != seen && flag.CompareAndSwap(true, false) {
		return true
	}
	_, ok := <-wake
	return ok
}

func (p *pool) drain(id int) {
	for {
		t := p.next.Add(1) - 1
		if t >= p.n {
			return
		}
		p.cur.run(int(t), id)
	}
}

// do runs tasks 0..n-1 of j on the pool and returns when all are done. Up to n-1 helpers
// take part; the rest, spinning or parked, stay out of it.
func (p *pool) do(j job, n int) {
	if n <= 0 {
		return
	}
	if p.workers == 1 || n == 1 {
		for t := 0; t < n; t++ {
			j.run(t, 0)
		}
		return
	}
	p.once.Do(p.start)
	p.cur = j
	p.n = int64(n)
	p.next.Store(0)
	helpers := min(p.workers-1, n-1)
	p.wg.Add(helpers)
	p.jobs++
	p.state.Store(p.jobs*stateJobs + uint64(helpers))
	for i := range p.parked[:helpers] {
		if p.parked[i].CompareAndSwap(true, false) {
			p.wake[i] <- struct{}{}
		}
	}
	p.drain(0)
	p.wg.Wait()
	p.cur = nil
}

// inlineWork is the estimated work (multiply-adds or element operations) below which a job
// runs on the calling goroutine alone: waking a parked worker costs several microseconds,
// more than such a job takes, and much more when other processes hold the cores.
const inlineWork = 1 << 15

// doSized is do for a job whose total work is estimated at work: small jobs run inline. The
// tasks and their results are the same either way.
func (p *pool) doSized(j job, n, work int) {
	if work < inlineWork {
		for t := 0; t < n; t++ {
			j.run(t, 0)
		}
		return
	}
	p.do(j, n)
}

// close stops the worker goroutines: spinning ones see the flag, parked ones their closed
// channel.
func (p *pool) close() {
	p.closed.Store(true)
	for _, w := range p.wake {
		close(w)
	}
	p.wake = nil
}
