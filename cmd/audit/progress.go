package main

import (
	"sync/atomic"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress draws bars on stderr for a person at a terminal, and nothing otherwise (pipes, logs,
// --quiet), so batch jobs' logs stay readable.
type progress struct {
	e          *env
	p          *mpb.Progress
	bars       []*mpb.Bar
	stageBar   *mpb.Bar // nil unless stages was called
	stageCount int64
}

func newProgress(e *env) *progress {
	if e.quiet || !e.stderrIsTerminal {
		return &progress{}
	}
	// Refreshed whatever mpb makes of the writer: isTerminal decided already (and a test's
	// buffer is drawn on as a terminal would be).
	p := mpb.New(mpb.WithOutput(e.stderr), mpb.WithWidth(40), mpb.WithAutoRefresh())
	e.bars.Store(p)
	return &progress{e: e, p: p}
}

// bar returns a callback reporting done of total for a named stage; it is safe to call with
// a nil receiver's bars disabled.
func (pr *progress) bar(name string, total int) func(done, total int) {
	if pr.p == nil {
		return func(int, int) {}
	}
	b := pr.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace)),
	)
	pr.bars = append(pr.bars, b)
	// The callback's total may be larger than the bar's: a shard trained in groups of pairs
	// counts every group's rounds. The bar shows the same fraction.
	return func(done, n int) {
		if n > 0 && n != total {
			done = int(int64(done) * int64(total) / int64(n))
		}
		b.SetCurrent(int64(done))
	}
}

// wait flushes the bars before other output is written.
func (pr *progress) wait() {
	if pr.p == nil {
		return
	}
	if pr.stageBar != nil {
		pr.stageBar.SetCurrent(pr.stageCount) // reaching the total completes the bar
	}
	// A bar that never reached its total (a shard found complete, a stage that stopped on an
	// error) would keep Wait waiting forever: end it where it stands.
	for _, b := range pr.bars {
		b.Abort(false) // no-op for a completed bar; the others stay drawn where they stopped
	}
	pr.p.Wait()
	// Log lines go to stderr again (a Write after Wait fails, and logf falls back to it too).
	pr.e.bars.CompareAndSwap(pr.p, nil)
}

// stages returns a callback that advances one bar over the named stages of a run, so that a
// person sees where the whole job stands; wait completes it.
func (pr *progress) stages(names []string) func(string) {
	if pr.p == nil {
		return func(string) {}
	}
	pr.stageCount = int64(len(names))
	var current atomic.Value // the running stage's name, read by the bar's goroutine
	current.Store("")
	pr.stageBar = pr.p.AddBar(int64(len(names)),
		mpb.PrependDecorators(decor.Name("stages", decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Any(func(decor.Statistics) string { return current.Load().(string) })),
	)
	return func(name string) {
		for i, n := range names {
			if n == name {
				current.Store(name)
				pr.stageBar.SetCurrent(int64(i))
			}
		}
	}
}
