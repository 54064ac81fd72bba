package train

// InformedStatNames names the statistic columns a training of c records in every checkpoint
// (Checkpoint.StatNames): with Informed, the informed adversary's ratios and mu^2, for
// Noisy-FedAvg, FedProx and DP-SGD also the uploads observer's; none without Informed. It is
// what the engine's rounds declare, so that a later stage can be checked before training.
func (c *Config) InformedStatNames() []string {
	if !c.Informed {
		return nil
	}
	if c.IsClientDP() {
		return (&clientDPRounds{}).statNames()
	}
	return (&fedRounds{}).statNames()
}
