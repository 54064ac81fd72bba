package cuda

import "testing"

// How many depth slices a product is computed in: where the slices of one batch element
// outnumber the batch elements (each element's slices are one call, the elements one after
// another), as many as reach 256 output tiles for one element, a power of two dividing the
// depth; never where the batch already has the tiles or as many elements as slices; and the
// scratch of one element's slices stays under 32 MiB.
func TestSplitCount(t *testing.T) {
	for _, c := range []struct {
		name              string
		m, n, k, batch, d int
		want              int
	}{
		{"W3 first stage weight gradient, R 8", 64, 577, 32 * 1024, 8, 1024, 32},   // 5 tiles an element
		{"W3 stem weight gradient, stacked, R 8", 512, 28, 32 * 1024, 1, 1024, 32}, // 4 tiles
		{"W3 first stage weight gradient, R 32", 64, 577, 32 * 1024, 32, 1024, 1},  // as many elements as slices
		{"W3 second stage weight gradient, R 8", 128, 1153, 32 * 256, 8, 1024, 1},  // 8 slices of 1024 for 8 elements
		{"W3 second stage weight gradient, R 4", 128, 1153, 32 * 256, 4, 1024, 8},  // 10 tiles, 8 slices reach 80
		{"W3 second stage weight gradient, R 8, slices of 512", 128, 1153, 32 * 256, 8, 512, 16},
		{"W2 conv1 weight gradient, stacked, R 64", 384, 26, 32 * 784, 1, 1024, 16}, // 24 slices deep: 16 divides 25088
		{"W2 conv1 weight gradient, stacked, R 1024", 6144, 26, 32 * 784, 1, 1024, 4},
		{"W2 conv2 weight gradient, R 64", 16, 151, 32 * 100, 64, 1024, 1},
		{"W2 conv2 weight gradient, R 1", 16, 151, 32 * 100, 1, 1024, 2},
		{"W2 conv2 forward, R 64", 16, 3200, 151, 64, 1024, 1}, // depth 151
		{"depth exactly two slices", 8, 8, 2048, 1, 1024, 2},
		{"depth under two slices", 8, 8, 2047, 1, 1024, 1},
		{"odd depth", 8, 8, 1<<20 + 1, 1, 1024, 1},
		{"at most 32 slices", 8, 8, 1 << 20, 1, 1024, 32},
		{"split off", 8, 8, 1 << 20, 1, 0, 1},
		{"test depth", 5, 7, 64, 3, 8, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := splitCount(c.m, c.n, c.k, c.batch, c.d)
			if got != c.want {
				t.Errorf("splitCount(%d, %d, %d, %d, %d) = %d, want %d", c.m, c.n, c.k, c.batch, c.d, got, c.want)
			}
			if got > 1 && (got&(got-1) != 0 || got*c.d > c.k || c.k%got != 0 || got <= c.batch) {
				t.Errorf("%d slices: not a power of two dividing %d, shallower than %d, or not more than the batch", got, c.k, c.d)
			}
		})
	}
	// The scratch bound (one element's slices), over every output size and batch below the
	// tile limit.
	for m := 1; m <= 2048; m += 61 {
		for n := 1; n <= 2048; n += 67 {
			for _, batch := range []int{1, 2, 7, 64} {
				if s := splitCount(m, n, 1<<22, batch, 1024); s > 1 && 4*s*m*n >= 32<<20 {
					t.Fatalf("m %d n %d batch %d: %d slices take %d bytes", m, n, batch, s, 4*s*m*n)
				}
			}
		}
	}
}
