package experiment

import (
	"strings"
	"testing"

	"github.com/fedaudit/fedaudit/cuda"
)

// What a profiled GPU training logs: the total, the largest operations with their shares, and
// the rest in one line.
func TestProfileLines(t *testing.T) {
	prof := []cuda.OpTime{{Op: "im2col", Calls: 10, Seconds: 0.5}, {Op: "gemm NN 6x18432x26 x64", Calls: 5, Seconds: 0.3},
		{Op: "axpby", Calls: 40, Seconds: 0.15}, {Op: "pool", Calls: 10, Seconds: 0.05}}
	for _, c := range []struct {
		name  string
		prof  []cuda.OpTime
		top   int
		lines int // the total's line, the operations listed, the rest's line
		want  []string
	}{
		{"nothing profiled", nil, 12, 0, nil},
		{"all listed", prof, 12, 1 + 4, []string{"1.000 s of device time in 65 calls", "im2col", "50.0%", "gemm NN 6x18432x26 x64", "30.0%", "axpby", "pool", "5.0%"}},
		{"the rest in one line", prof, 2, 1 + 2 + 1, []string{"1.000 s of device time in 65 calls", "im2col", "gemm NN", "the other 2", "50 calls", "20.0%"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			lines := profileLines(c.prof, c.top)
			if len(lines) != c.lines {
				t.Fatalf("%d lines, want %d: %q", len(lines), c.lines, lines)
			}
			joined := strings.Join(lines, "\n")
			at := 0
			for _, w := range c.want {
				i := strings.Index(joined[at:], w)
				if i < 0 {
					t.Fatalf("lines lack %q after position %d:\n%s", w, at, joined)
				}
				at += i
			}
		})
	}
}
