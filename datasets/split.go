package datasets

import (
	"fmt"
	"math"
)

// SplitIID deals perClient samples to each of clients clients, drawn uniformly without
// replacement from d. Client i is named "<d.Name>/client<i>" and holds copies of its rows.
// The split depends only on d and seed.
func SplitIID(d *Dataset, clients, perClient int, seed uint64) ([]*Dataset, error) {
	if err := checkSplit(d, clients, perClient); err != nil {
		return nil, err
	}
	order := newRNG(seed, "split-iid").perm(d.Len())
	out := make([]*Dataset, clients)
	for c := range out {
		out[c] = d.Subset(clientName(d, c), order[c*perClient:(c+1)*perClient])
	}
	return out, nil
}

// SplitDirichlet deals perClient samples to each of clients clients with label skew: client c
// draws class proportions p_c from a symmetric Dirichlet(alpha) distribution, then each of its
// samples takes a class from p_c (restricted to classes with samples left, renormalised; if p_c
// puts no weight on any class left, the class is drawn in proportion to what is left) and the
// next unused sample of that class. Small alpha gives clients dominated by one or two classes
// (the paper uses alpha = 0.1); large alpha approaches the IID split. Samples are never reused.
// The split depends only on d, alpha and seed.
func SplitDirichlet(d *Dataset, clients, perClient int, alpha float64, seed uint64) ([]*Dataset, error) {
	if err := checkSplit(d, clients, perClient); err != nil {
		return nil, err
	}
	if !(alpha > 0) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("split %q: Dirichlet alpha %v, need a finite value > 0", d.Name, alpha)
	}
	r := newRNG(seed, "split-dirichlet")
	// pools[k] lists class k's samples in a random order; next[k] is the first unused one.
	pools := make([][]int, d.Classes)
	for i, y := range d.Labels {
		pools[y] = append(pools[y], i)
	}
	for _, p := range pools {
		r.shuffle(p)
	}
	next := make([]int, d.Classes)
	weights := make([]float64, d.Classes)
	out := make([]*Dataset, clients)
	for c := range out {
		p := r.dirichlet(d.Classes, alpha)
		idx := make([]int, 0, perClient)
		for range perClient {
			var total float64
			for k := range weights {
				weights[k] = 0
				if next[k] < len(pools[k]) {
					weights[k] = p[k]
				}
				total += weights[k]
			}
			if total == 0 {
				for k := range weights {
					weights[k] = float64(len(pools[k]) - next[k])
					total += weights[k]
				}
			}
			k := r.categorical(weights, total)
			idx = append(idx, pools[k][next[k]])
			next[k]++
		}
		out[c] = d.Subset(clientName(d, c), idx)
	}
	return out, nil
}

// categorical draws index k with probability weights[k]/total; total is their sum.
func (r *rng) categorical(weights []float64, total float64) int {
	u := r.float64() * total
	last := 0
	for k, w := range weights {
		if w <= 0 {
			continue
		}
		if u < w {
			return k
		}
		u -= w
		last = k
	}
	return last // u can reach the end through rounding; give it the last class with weight
}

func checkSplit(d *Dataset, clients, perClient int) error {
	if err := d.Validate(); err != nil {
		return fmt.Errorf("split: %w", err)
	}
	if clients <= 0 || perClient <= 0 {
		return fmt.Errorf("split %q: %d clients of %d samples, need at least 1 of each", d.Name, clients, perClient)
	}
	if perClient > d.Len()/clients {
		return fmt.Errorf("split %q: %d clients of %d samples need %d samples, the dataset has %d",
			d.Name, clients, perClient, clients*perClient, d.Len())
	}
	return nil
}

func clientName(d *Dataset, c int) string { return fmt.Sprintf("%s/client%d", d.Name, c) }
