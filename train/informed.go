package train

// informedStats observes training for the informed adversary, who knows everything but the
// world and the noise: per replica, the log-likelihood ratio of the whole transcript (llrAll,
// summed over rounds), of the last round (llrLast) and the squared GDP parameter of the
// transcript (mu2); for the federated family also those of the observer of the target's
// uploads (llrUp, mu2Up; upDots is that round's inner product of the target's own noise with
// the shift). The round strategies fill it; checkpoints read it, in the order of names.
type informedStats struct {
	names                []string
	llrAll, llrLast, mu2 []float64
	llrUp, mu2Up, upDots []float64
}

// newInformedStats returns zeroed statistics for R replicas, recorded under names (the round
// strategy's statNames: the first three, or all five).
func newInformedStats(R int, names []string) *informedStats {
	return &informedStats{
		names:  names,
		llrAll: make([]float64, R), llrLast: make([]float64, R), mu2: make([]float64, R),
		llrUp: make([]float64, R), mu2Up: make([]float64, R), upDots: make([]float64, R),
	}
}

// values returns replica r's statistics in the order of names.
func (s *informedStats) values(r int) []float64 {
	v := []float64{s.llrAll[r], s.llrLast[r], s.mu2[r], s.llrUp[r], s.mu2Up[r]}
	return v[:len(s.names)]
}
