package cpu

import (
	"sync"
	"sync/atomic"
)

// job is one parallel operation: run is called once for every task index in [0, n), with the
// index of the worker running it (for its scratch memory).
type job interface {
	run(task, worker int)
}

// pool is a fixed set of goroutines that split the tasks of one job at a time. Dispatch
// allocates nothing: the job is a pointer kept in an interface, and wake-ups are empty structs.
type pool struct {
	workers int
	cur     job
	n       int64
	next    atomic.Int64
	wg      sync.WaitGroup
	wake    []chan struct{}
	once    sync.Once
}

func newPool(workers int) *pool {
	if workers < 1 {
		workers = 1
	}
	return &pool{workers: workers}
}

func (p *pool) start() {
	p.wake = make([]chan struct{}, p.workers-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{})
		go p.loop(i+1, p.wake[i])
	}
}

func (p *pool) loop(id int, wake chan struct{}) {
	for range wake {
		p.drain(id)
		p.wg.Done()
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

// do runs tasks 0..n-1 of j on the pool and returns when all are done.
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
	helpers := p.workers - 1
	if helpers > n-1 {
		helpers = n - 1
	}
	p.wg.Add(helpers)
	for i := 0; i < helpers; i++ {
		p.wake[i] <- struct{}{}
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

// close stops the worker goroutines.
func (p *pool) close() {
	for _, w := range p.wake {
		close(w)
	}
	p.wake = nil
}
