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

// pool is a fixed set of goroutines that split the tasks of one job at a time: the caller of
// do is worker 0, helpers are workers 1..workers-1. Dispatch allocates nothing: the job is a
// pointer kept in an interface, and wake-ups are empty structs.
//
// The hand-off keeps these rules, each visible in the code below:
//
//  1. Jobs are numbered 1, 2, ... by do. do gives job s to helpers 1..h, h = min(workers-1,
//     n-1), and to no other, by storing s in each one's slot (helper.job), after it has set
//     the job's fields and added h to the WaitGroup. Helpers beyond h are not told of the job
//     and never touch it.
//  2. A helper remembers the last job it ran (done) and runs a job exactly when its slot holds
//     another number: it drains the job's tasks, calls Done once, and sets done to that number.
//     It never looks at a job other than the one in its slot.
//  3. do returns only after all h helpers called Done, so a slot is written again only after
//     its helper finished the job it held: a helper never misses a job given to it, and never
//     runs one twice, whatever the timing.
//  4. A wake-up is only a hint to look at the slot. A parked helper can be woken for a job it
//     has already run (it saw the slot while spinning, ran the job and parked again before the
//     descheduled caller got to waking it): it finds done equal to its slot and waits again.
//  5. Tokens balance: only the helper sets its parked flag, only do clears it with a
//     compare-and-swap and then sends one token, and a helper whose own compare-and-swap lost
//     takes that token before it sets the flag again, so the one-slot channel never holds two.
//
// A helper that has finished a job spins for a while (spinWait) watching its slot before it
// parks on its channel. A training step is a chain of operations of a millisecond or less with
// almost nothing between them, and waking a parked goroutine (a futex wake of an idle thread,
// then the scheduler) was measured at about 150 microseconds on the 2-core development VM: a
// fifth of the second core's time in W2 went to waiting to be woken.
type pool struct {
	workers int
	cur     job
	n       int64
	next    atomic.Int64
	jobs    uint64 // the job count (do's alone)
	wg      sync.WaitGroup
	helpers []helper // helpers[i] is worker i+1
	once    sync.Once
	closed  atomic.Bool
}

// helper is one helper's mailbox, padded to its own cache lines: a spinning helper reads only
// its slot, and do's write of one slot does not disturb the others.
type helper struct {
	job    atomic.Uint64 // the number of the last job given to this helper (rule 1)
	parked atomic.Bool   // the helper waits on wake (or is about to); do clears it to wake it
	wake   chan struct{}
	_      [128 - 8 - 8 - 8]byte
}

// spinWait is how long an idle helper watches for the next job before parking: longer than
// the gaps between a step's operations, short enough that an idle backend frees its cores
// at once for anything else.
const spinWait = 200 * time.Microsecond

func newPool(workers int) *pool {
	return &pool{workers: max(workers, 1)}
}

func (p *pool) start() {
	p.helpers = make([]helper, p.workers-1)
	for i := range p.helpers {
		p.helpers[i].wake = make(chan struct{}, 1)
		go p.loop(i+1, &p.helpers[i])
	}
}

// loop is helper id's life (rule 2).
func (p *pool) loop(id int, h *helper) {
	var done uint64 // no job yet: do numbers them from 1
	for {
		s := p.await(h, done)
		if s == 0 {
			return
		}
		p.drain(id)
		p.wg.Done()
		done = s
	}
}

// await returns the number of the job in h's slot once it differs from done, or 0 when the pool
// closes. It spins for spinWait, then parks.
func (p *pool) await(h *helper, done uint64) uint64 {
	deadline := time.Now().Add(spinWait)
	for i := 1; ; i++ {
		if s := h.job.Load(); s != done {
			return s
		}
		if i%64 == 0 {
			if p.closed.Load() {
				return 0
			}
			if time.Now().After(deadline) {
				break
			}
			runtime.Gosched()
		}
	}
	for {
		h.parked.Store(true)
		if s := h.job.Load(); s != done {
			if !h.parked.CompareAndSwap(true, false) {
				// do claimed the flag after storing s: take its token (rule 5).
				if _, ok := <-h.wake; !ok {
					return 0
				}
			}
			return s
		}
		if _, ok := <-h.wake; !ok {
			return 0
		}
		// Look at the slot again: the token may be for the job last run (rule 4).
	}
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
// take part; the others are not told of the job.
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
	helpers := p.helpers[:min(p.workers-1, n-1)]
	p.wg.Add(len(helpers))
	p.jobs++
	for i := range helpers {
		h := &helpers[i]
		h.job.Store(p.jobs) // before the flag: a helper that wakes must find its job (rule 4)
		if h.parked.CompareAndSwap(true, false) {
			h.wake <- struct{}{}
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
	if p.closed.Swap(true) {
		return
	}
	for i := range p.helpers {
		close(p.helpers[i].wake)
	}
}
