package main

import (
	"bytes"
	"os"
	"strings"
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

// screen is what a terminal shows of out: carriage return, line feed, cursor up (ESC [n A) and
// clear to the end of the screen (ESC [J), the sequences the bars redraw with.
func screen(out string) []string {
	lines := []string{""}
	row, col := 0, 0
	for i := 0; i < len(out); i++ {
		switch ch := out[i]; {
		case ch == '\x1b' && i+1 < len(out) && out[i+1] == '[':
			j := i + 2
			n := 0
			for j < len(out) && out[j] >= '0' && out[j] <= '9' {
				n = 10*n + int(out[j]-'0')
				j++
			}
			if j < len(out) {
				switch out[j] {
				case 'A':
					row = max(0, row-max(n, 1))
				case 'J':
					lines = lines[:row+1]
					lines[row] = lines[row][:min(col, len(lines[row]))]
				}
			}
			i = j
		case ch == '\r':
			col = 0
		case ch == '\n':
			row, col = row+1, 0
			if row == len(lines) {
				lines = append(lines, "")
			}
		default:
			l := lines[row]
			for len(l) < col {
				l += " "
			}
			if col < len(l) {
				l = l[:col] + string(ch) + l[col+1:]
			} else {
				l += string(ch)
			}
			lines[row], col = l, col+1
		}
	}
	return lines
}

// Log lines written while bars are drawn stay on the screen: written beside the bars, they were
// erased by the next redraw, which moves up over the lines it drew and clears below (the log
// lines of `audit train` and the last ones of `audit demo` vanished at a terminal).
func TestLogLinesAboveTheBars(t *testing.T) {
	var out bytes.Buffer
	e := &env{stderr: &out, stderrIsTerminal: true}
	pr := newProgress(e)
	report := pr.bar("train", 10)
	for i := range 10 {
		report(i+1, 10)
		e.logf("line %d", i)
		time.Sleep(30 * time.Millisecond) // a redraw or so between lines (mpb draws every 150 ms)
	}
	pr.wait()
	e.logf("after")
	got := strings.Join(screen(out.String()), "\n")
	for _, want := range []string{"line 0", "line 5", "line 9", "after", "train"} {
		if !strings.Contains(got, want) {
			t.Errorf("the screen lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "train") != 1 {
		t.Errorf("the bar is drawn more than once on the screen:\n%s", got)
	}
}
