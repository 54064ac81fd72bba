// Package spec is what an experiment is before anything runs: its configuration (Config, read
// from YAML or JSON by Load, Parse and FromJSON, defaults set once in FillDefaults, every field
// checked by Validate), the checks of the stages after training made with the config alone
// (CheckStages against PlannedMeta, the run-file columns training will record; whole numbers;
// the job's size), and the data it describes (Prepare: the clients of C and C', the test set
// and the target, deterministic from the seed, with the checks only the data decides: the
// model's shape and classes, a given smoothness against the certified one, CheckSmoothness).
// The demo's config (Demo) is one of them.
//
// It sits below package experiment, which runs what it describes; it imports no experiment
// package.
package spec
