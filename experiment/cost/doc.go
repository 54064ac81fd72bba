// Package cost says what an experiment costs before and after it runs: the work of its
// training counted the way the engine does it (Plan: FLOPs, steps, run-file bytes), a measured
// training speed of this machine (Calibrate), the memory of its stages against the machine's
// (EstimateMemory, CheckMemory, MemAvailable), and the measured cost of a one-run audit
// (MeasureOneRun: what real trainings with k canaries certify).
//
// It sits above package experiment: it reads experiment's Config and Data, and MeasureOneRun
// runs whole audits with experiment.Run; experiment itself never imports it.
package cost
