// Package experiment runs an audit end to end from one config: it builds the adjacent datasets,
// trains the coupled pairs shard by shard into run files, scores them with the attacks, and
// turns the scores into certified bounds set beside the theory. Every stage reads what the one
// before it wrote to the output directory, and skips work that is already complete, so a job
// that dies resumes where it stopped.
//
// It owns configuration and orchestration only:
//
//   - the config (config.go: YAML/JSON, defaults set once in fillDefaults, validation);
//   - data preparation from the config, deterministic from the seed (data.go, sample- and
//     client-level adjacency);
//   - the stages (trainstage.go, attackstage.go, analyze.go, reportstage.go, pipeline.go) over an
//     experiment directory laid out by package expdir;
//   - the mapping of a config onto the theory (theory.go: theory.Config, the exact mu of the
//     quadratic instance, the smoothness constant) and onto its system's claim (claims.go, a
//     call to package claims);
//   - the cost model (plan.go, resources.go).
//
// What it computes is someone else's type: findings (the analysis, rounds.json), report (the
// report, the terminal table, comparisons), claims (accountants), attacks (scores, certified
// and estimated smoothness), audit (the mathematics).
package experiment
