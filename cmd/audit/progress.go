package main

import (
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progress draws bars on stderr for a person at a terminal, and nothing otherwise (pipes, logs,
// --quiet), so batch jobs' logs stay readable.
type progress struct {
	p *mpb.Progress
}

func newProgress(e *env) *progress {
	if e.quiet || !e.stderrIsTerminal {
		return &progress{}
	}
	return &progress{p: mpb.New(mpb.WithOutput(e.stderr), mpb.WithWidth(40))}
}

// bar returns a callback reporting done of total for a named stage; it is safe to call with
// a nil receiver's bars disabled.
func (pr *progress) bar(name string, total int) func(done, total int) {
	if pr.p == nil {
		return func(int, int) {}
	}
	b := pr.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncWidth)),
		mpb.AppendDecorators(decor.Percentage(decor.WCSyncSpace), decor.EwmaETA(decor.ET_STYLE_GO, 30, decor.WCSyncWidth)),
	)
	return func(done, _ int) { b.SetCurrent(int64(done)) }
}

// wait flushes the bars before other output is written.
func (pr *progress) wait() {
	if pr.p != nil {
		pr.p.Wait()
	}
}
