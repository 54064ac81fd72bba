// Package experiment runs an audit end to end from one config: it builds the adjacent datasets,
// trains the coupled pairs shard by shard into run files, scores them with the attacks, and
// turns the scores into certified bounds set beside the theory. Every stage reads what the one
// before it wrote to the output directory, and skips work that is already complete, so a job
// that dies resumes where it stopped.
//
// It owns orchestration; what an experiment is and what it costs live in its sub-packages:
//
//   - the config, its checks and the data it describes are package spec's (below experiment);
//   - the mapping of a config onto the theory (theory.Config, the exact mu of the quadratic
//     instance, the smoothness constant) is package bounds's (below experiment);
//   - the headline that sums the rows of an analysis up is package headline's (below
//     experiment);
//   - the cost model and the measured cost of one-run audits are package cost's (above
//     experiment: it runs audits through Run);
//   - the stages (trainstage.go, attackstage.go, analyze.go, reportstage.go, pipeline.go,
//     sequential.go) over an experiment directory laid out by package expdir, and the claim of
//     a config's system (claims.go, a call to package claims), are its own.
//
// What it computes is someone else's type: findings (the analysis, rounds.json), report (the
// report, the terminal table, comparisons), claims (accountants), attacks (scores, certified
// and estimated smoothness), audit (the mathematics).
package experiment
