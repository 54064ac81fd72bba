// Package bounds maps an experiment's config onto the theory: the smoothness constant L
// (certified from the model and data, given, or estimated at recorded parameters), the
// theory's parameters (TheoryConfig) and bounds at the audited rounds (TheoryAt), and the
// exact mu of the instances where it is known (ExactMu: the quadratic reference instance;
// ExactMuOneRun: its record canaries and dp-fedavg's direction canaries).
//
// It sits below package experiment, whose analysis judges rows against these values.
package bounds
