package cuda

import "testing"

// How many depth slices a product is computed in: the weight gradients of the benchmarks'
// convolutions at few replicas are split, their forward products and any product with enough
// output tiles are not, and the scratch stays under 32 MiB.
func TestSplitCount(t *testing.T) {
	for _, c := range []struct {
		name              string
		m, n, k, batch, d int
		want              int
	}{
		{"W2 conv1 weight gradient, R 64", 6, 26, 32 * 784, 64, 1024, 4}, // 64 tiles: 4 slices reach 256
		{"W2 conv2 weight gradient, R 64", 16, 151, 32 * 100, 64, 1024, 2},
		{"W2 conv2 weight gradient, R 1024", 16, 151, 32 * 100, 1024, 1024, 1}, // 2048 tiles
		{"W3 first stage weight gradient, R 8", 64, 577, 32 * 1024, 8, 1024, 4},
		{"W2 conv2 forward, R 64", 16, 3200, 151, 64, 1024, 1}, // depth 151
		{"depth exactly two slices", 8, 8, 2048, 1, 1024, 2},
		{"depth under two slices", 8, 8, 2047, 1, 1024, 1},
		{"at most 32 slices", 8, 8, 1 << 20, 1, 1024, 32},
		{"split off", 8, 8, 1 << 20, 1, 0, 1},
		{"test depth", 5, 7, 9, 3, 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := splitCount(c.m, c.n, c.k, c.batch, c.d)
			if got != c.want {
				t.Errorf("splitCount(%d, %d, %d, %d, %d) = %d, want %d", c.m, c.n, c.k, c.batch, c.d, got, c.want)
			}
			if got > 1 && (got&(got-1) != 0 || got*c.d > c.k) {
				t.Errorf("%d slices: not a power of two, or slices shallower than %d", got, c.d)
			}
		})
	}
	// The scratch bound, over every output size and batch below the tile limit.
	for m := 1; m <= 2048; m += 61 {
		for n := 1; n <= 2048; n += 67 {
			for _, batch := range []int{1, 2, 7, 64} {
				if s := splitCount(m, n, 1<<22, batch, 1024); s > 1 && 4*s*batch*m*n >= 32<<20 {
					t.Fatalf("m %d n %d batch %d: %d slices take %d bytes", m, n, batch, s, 4*s*batch*m*n)
				}
			}
		}
	}
}
