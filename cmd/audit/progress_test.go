package main

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// 2>/dev/null is a character device but no terminal: no progress bars there.
func TestNullDeviceIsNoTerminal(t *testing.T) {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatalf("isTerminal(%s) = true", os.DevNull)
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Fatal("isTerminal(buffer) = true")
	}
}

// Bars that never reach their total (a shard found complete, a stage stopped by an error) must
// not keep wait from returning.
func TestProgressWaitEndsUnfinishedBars(t *testing.T) {
	var out bytes.Buffer
	pr := newProgress(&env{stderr: &out, stderrIsTerminal: true})
	stage := pr.stages([]string{"train", "attack"})
	stage("train")
	pr.bar("shard 0", 5)
	report := pr.bar("shard 1", 3)
	report(1, 3)
	done := make(chan struct{})
	go func() {
		pr.wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return with unfinished bars")
	}
}
