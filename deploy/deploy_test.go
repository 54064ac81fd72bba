package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The parts of Kubernetes objects the tests look at.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		// Job
		CompletionMode string `yaml:"completionMode"`
		Completions    *int   `yaml:"completions"`
		Parallelism    *int   `yaml:"parallelism"`
		Template       struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		PodFailurePolicy struct {
			Rules []struct {
				Action      string `yaml:"action"`
				OnExitCodes struct {
					ContainerName string `yaml:"containerName"`
					Operator      string `yaml:"operator"`
					Values        []int  `yaml:"values"`
				} `yaml:"onExitCodes"`
			} `yaml:"rules"`
		} `yaml:"podFailurePolicy"`
		// PersistentVolumeClaim
		AccessModes []string `yaml:"accessModes"`
	} `yaml:"spec"`
}

// failsOn reports whether job's pod failure policy takes action on exit code code of its
// container.
func failsOn(job object, action string, code int) bool {
	for _, r := range job.Spec.PodFailurePolicy.Rules {
		c := job.Spec.Template.Spec.Containers
		if r.Action == action && r.OnExitCodes.Operator == "In" && slices.Contains(r.OnExitCodes.Values, code) &&
			len(c) == 1 && r.OnExitCodes.ContainerName == c[0].Name {
			return true
		}
	}
	return false
}

type podSpec struct {
	RestartPolicy string      `yaml:"restartPolicy"`
	Containers    []container `yaml:"containers"`
	Volumes       []struct {
		Name string `yaml:"name"`
		PVC  *struct {
			ClaimName string `yaml:"claimName"`
		} `yaml:"persistentVolumeClaim"`
	} `yaml:"volumes"`
}

type container struct {
	Name      string   `yaml:"name"`
	Image     string   `yaml:"image"`
	Command   []string `yaml:"command"`
	Args      []string `yaml:"args"`
	Env       []struct{ Name, Value string }
	Resources struct {
		Limits map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

// readObjects decodes every document of every manifest in k8s/.
func readObjects(t *testing.T) map[string]object {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("k8s", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	objs := map[string]object{}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(false) // Kubernetes objects have many fields the tests do not model
		for {
			var o object
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or name", p)
			}
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return objs
}

// flagValue returns the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// mountedPVC reports whether path lies under a mount of a PersistentVolumeClaim volume.
func mountedPVC(spec podSpec, c container, path string) bool {
	for _, m := range c.VolumeMounts {
		if path != m.MountPath && !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.PVC != nil && v.PVC.ClaimName != "" {
				return true
			}
		}
	}
	return false
}

func TestKubernetesTrainJob(t *testing.T) {
	objs := readObjects(t)
	job, ok := objs["Job/fedaudit-train"]
	if !ok {
		t.Fatalf("no Job fedaudit-train among %v", slices.Sorted(mapKeys(objs)))
	}
	if job.APIVersion != "batch/v1" || job.Spec.CompletionMode != "Indexed" {
		t.Errorf("train job: %s, completionMode %q; want batch/v1, Indexed (JOB_COMPLETION_INDEX selects the shard)", job.APIVersion, job.Spec.CompletionMode)
	}
	if job.Spec.Completions == nil || job.Spec.Parallelism == nil {
		t.Fatal("train job: completions and parallelism must be set")
	}
	n, par := *job.Spec.Completions, *job.Spec.Parallelism
	if par < 1 || par > n {
		t.Errorf("parallelism %d outside 1..completions %d", par, n)
	}
	spec := job.Spec.Template.Spec
	if spec.RestartPolicy != "Never" && spec.RestartPolicy != "OnFailure" {
		t.Errorf("restartPolicy %q: a Job needs Never or OnFailure", spec.RestartPolicy)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "train" {
		t.Fatalf("args %q: want audit train ...", c.Args)
	}
	if s := flagValue(c.Args, "--shards"); s != strconv.Itoa(n) {
		t.Errorf("--shards %q but completions %d: every index must be a shard and every shard an index", s, n)
	}
	for _, f := range []string{"--config", "--out"} {
		if v := flagValue(c.Args, f); v == "" || !mountedPVC(spec, c, v) {
			t.Errorf("%s %q is not on the shared volume", f, v)
		}
	}
	if c.Resources.Limits["nvidia.com/gpu"] == "" || c.Resources.Limits["nvidia.com/gpu"] == "0" {
		t.Errorf("no nvidia.com/gpu limit: %v", c.Resources.Limits)
	}
	checkCLI(t, "train job", c.Args)
	// A config error fails every retry alike: the index fails at once.
	if !failsOn(job, "FailIndex", 2) {
		t.Errorf("train job: no podFailurePolicy failing the index on exit 2: %+v", job.Spec.PodFailurePolicy)
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestKubernetesFinishJob(t *testing.T) {
	objs := readObjects(t)
	train, finish := objs["Job/fedaudit-train"], objs["Job/fedaudit-finish"]
	if finish.Kind != "Job" {
		t.Fatal("no Job fedaudit-finish")
	}
	spec := finish.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	tc := train.Spec.Template.Spec.Containers[0]
	if env["CONFIG"] != flagValue(tc.Args, "--config") || env["OUT"] != flagValue(tc.Args, "--out") || env["SHARDS"] != flagValue(tc.Args, "--shards") {
		t.Errorf("finish env %v does not match the train job's --config, --out, --shards %q", env, tc.Args)
	}
	if !mountedPVC(spec, c, env["OUT"]) {
		t.Errorf("OUT %q is not on the shared volume", env["OUT"])
	}
	if c.Image != tc.Image {
		t.Errorf("images differ: %s, %s", c.Image, tc.Image)
	}
	script := strings.Join(c.Args, "\n")
	for _, step := range []string{"audit status", "audit run", `cp "$OUT/findings.json" "$OUT/analysis.json.tmp"`} {
		if !strings.Contains(script, step) {
			t.Errorf("finish script lacks %q", step)
		}
	}
	for _, line := range auditLines(script, "audit ") {
		checkCLI(t, "finish job", expand(line, env))
	}
	// The same check as finish.sbatch: every byte of the run files, not the score files, which
	// attack writes again (TestFinishSequenceAgreesWithRun).
	if !strings.Contains(script, `audit status "$OUT/runs" --shards "$SHARDS" --verify`) {
		t.Errorf("the finish job's status line is not finish.sbatch's:\n%s", script)
	}
	// Its exit status is the audit's answer: a verdict or a failed check is not retried.
	for _, code := range []int{1, 2, 3, 4} {
		if !failsOn(finish, "FailJob", code) {
			t.Errorf("finish job: exit %d would be retried (podFailurePolicy %+v)", code, finish.Spec.PodFailurePolicy)
		}
	}
	if !slices.Contains(objs["PersistentVolumeClaim/fedaudit-data"].Spec.AccessModes, "ReadWriteMany") {
		t.Error("the claim must be ReadWriteMany: shard pods on different nodes write to it")
	}
}

// TestSlurmScripts checks the audit command lines of the sbatch scripts against the CLI, with
// the variables submit.sh sets.
func TestSlurmScripts(t *testing.T) {
	env := map[string]string{"CONFIG": "/shared/audit.yaml", "OUT": "/shared/out", "SHARDS": "4", "BACKEND": "auto"}
	// The array task's command lines run as a task does: audit train reads the task's index.
	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	for _, f := range []string{"train-array.sbatch", "finish.sbatch"} {
		raw, err := os.ReadFile(filepath.Join("slurm", f))
		if err != nil {
			t.Fatal(err)
		}
		lines := auditLines(string(raw), `"$AUDIT" `)
		if len(lines) == 0 {
			t.Fatalf("%s runs no audit command", f)
		}
		for _, line := range lines {
			checkCLI(t, f, expand(line, env))
		}
	}
	raw, err := os.ReadFile(filepath.Join("slurm", "submit.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`--array="0-$((shards - 1))"`, `--dependency="afterok:$train"`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("submit.sh lacks %s", want)
		}
	}
}

// auditLines returns the words after prefix of every line that runs audit, up to a
// redirection, pipe or "then".
func auditLines(script, prefix string) [][]string {
	var out [][]string
	sc := bufio.NewScanner(strings.NewReader(script))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue
		}
		_, rest, ok := strings.Cut(line, prefix)
		if !ok {
			continue
		}
		var words []string
		for _, w := range strings.Fields(rest) {
			if w == ">" || w == "|" || w == ";" || w == "2>&1" || w == "||" || w == "&&" {
				break
			}
			words = append(words, strings.Trim(w, `"`))
		}
		if len(words) > 0 && words[0] != "help" {
			out = append(out, words)
		}
	}
	return out
}

var shellVar = regexp.MustCompile(`\$\{?([A-Z_]+)\}?`)

func expand(words []string, env map[string]string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = shellVar.ReplaceAllStringFunc(w, func(v string) string {
			return env[shellVar.FindStringSubmatch(v)[1]]
		})
	}
	return out
}

var auditBinary string

func TestMain(m *testing.M) {
	code := m.Run()
	if auditBinary != "" {
		os.RemoveAll(filepath.Dir(auditBinary))
	}
	os.Exit(code)
}

// buildAudit builds the audit binary once per test process, in a folder TestMain removes,
// and returns its path.
func buildAudit(t *testing.T) string {
	t.Helper()
	if auditBinary == "" {
		dir, err := os.MkdirTemp("", "deploytest")
		if err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "audit")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goTool, "build", "-o", bin, "../cmd/audit").CombinedOutput(); err != nil {
			t.Fatalf("build audit: %v\n%s", err, out)
		}
		auditBinary = bin
	}
	return auditBinary
}

// checkCLI runs audit with args (paths that do not exist) and fails the test when the command
// line is a usage error (exit 2): flags unknown to the command, missing required flags. Every
// other outcome means the CLI accepted the command line and went on to touch the files.
func checkCLI(t *testing.T, where string, args []string) {
	t.Helper()
	bin := buildAudit(t)
	out, err := exec.Command(bin, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 2 && args[0] == "report" && bytes.Contains(out, []byte(`unknown command "report"`)) {
		// The scripts run report only when the binary has it (it is being added); the line
		// is checked once it does.
		t.Logf("%s: this audit has no report command yet", where)
	} else if errors.As(err, &exit) && exit.ExitCode() == 2 {
		t.Errorf("%s: audit %s: usage error: %s", where, strings.Join(args, " "), out)
	} else if err != nil && !errors.As(err, &exit) {
		t.Errorf("%s: audit %s: %v", where, strings.Join(args, " "), err)
	}
}

// TestDockerfile checks that the image is built the documented way: the gpu tag, ./cmd/audit,
// CUDA devel image to build and runtime image to run, the Go of go.mod.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	var froms, builds []string
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			froms = append(froms, line)
		case strings.HasPrefix(line, "RUN go build "):
			builds = append(builds, line)
		}
	}
	if len(froms) != 2 || !strings.Contains(froms[0], "nvidia/cuda:") || !strings.Contains(froms[0], "-devel-") ||
		!strings.Contains(froms[1], "nvidia/cuda:") || !strings.Contains(froms[1], "-runtime-") {
		t.Errorf("stages %q: want a CUDA devel build stage and a CUDA runtime stage", froms)
	}
	if len(builds) != 1 {
		t.Fatalf("%d go build steps, want 1", len(builds))
	}
	build := strings.Fields(builds[0])
	if flagValue(build, "-tags") != "gpu" || build[len(build)-1] != "./cmd/audit" {
		t.Errorf("build step %q: want go build -tags gpu ... ./cmd/audit", builds[0])
	}
	bin := flagValue(build, "-o")
	if !strings.Contains(text, "COPY --from=build "+bin+" ") {
		t.Errorf("the runtime stage does not copy the built %s", bin)
	}
	if !strings.Contains(text, "CGO_ENABLED=1") {
		t.Error("the GPU backend needs cgo: CGO_ENABLED=1")
	}
	goMod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(goMod)
	got := regexp.MustCompile(`ARG GO_VERSION=(\d+\.\d+)`).FindStringSubmatch(text)
	if want == nil || got == nil || got[1] != string(want[1]) {
		t.Errorf("Dockerfile Go %v, go.mod %s: keep them in step", got, want)
	}
	for _, f := range []string{"k8s/train-job.yaml", "k8s/finish-job.yaml"} {
		m, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(m, []byte("image: fedaudit/audit:gpu")) || !strings.Contains(text, "-t fedaudit/audit:gpu") {
			t.Errorf("%s and the Dockerfile's build command name different images", f)
		}
	}
}

// submit.sh with GPUS=1 asks Slurm for one GPU per array task and makes the tasks train on it
// (BACKEND=gpu), while the finish job, which trains nothing, asks for none; any other GPUS is
// refused before anything is submitted. sbatch and audit are stand-ins on PATH that record
// their arguments and environment.
func TestSlurmSubmitGPUs(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "sbatch.log")
	fake := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake("sbatch", `echo "args: $* BACKEND=${BACKEND:-} CONFIG=$CONFIG" >> `+logf+"\necho 42\n")
	fake("audit", "exit 0\n")
	cfg := filepath.Join(dir, "audit.yaml")
	if err := os.WriteFile(cfg, []byte("pairs: 4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	submit := func(gpus string) (string, error) {
		cmd := exec.Command("bash", filepath.Join("slurm", "submit.sh"), cfg, filepath.Join(dir, "out"), "4")
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "AUDIT="+filepath.Join(dir, "audit"), "GPUS="+gpus)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := submit("1")
	if err != nil {
		t.Fatalf("submit.sh with GPUS=1: %v\n%s", err, out)
	}
	// The jobs read a copy of the config made at submission, so an edit of the config while
	// they wait in the queue changes nothing they do.
	copied := regexp.MustCompile(`(?m)^config=(.*/out/logs/config-[0-9TZ]+-[0-9]+\.yaml)$`).FindStringSubmatch(out)
	if copied == nil {
		t.Fatalf("submit.sh names no copy of the config:\n%s", out)
	}
	if got, err := os.ReadFile(copied[1]); err != nil || string(got) != "pairs: 4\n" {
		t.Errorf("the copy of the config: %q, %v", got, err)
	}
	raw, err := os.ReadFile(logf)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(calls) != 2 {
		t.Fatalf("%d sbatch calls, want 2:\n%s", len(calls), raw)
	}
	for _, c := range calls {
		if !strings.HasSuffix(c, "CONFIG="+copied[1]) {
			t.Errorf("a job does not read the copy of the config: %s", c)
		}
	}
	if !strings.Contains(calls[0], "--gres=gpu:1") || !strings.Contains(calls[0], "train-array.sbatch") || !strings.Contains(calls[0], "BACKEND=gpu") {
		t.Errorf("the array's sbatch call does not ask for a GPU and the gpu backend: %s", calls[0])
	}
	if strings.Contains(calls[1], "--gres") || !strings.Contains(calls[1], "finish.sbatch") {
		t.Errorf("the finish job's sbatch call: %s", calls[1])
	}
	os.Remove(logf)
	if out, err := submit("2"); err == nil || !strings.Contains(out, "GPUS must be 1") {
		t.Errorf("GPUS=2: %v, %s; want a refusal", err, out)
	}
	if _, err := os.Stat(logf); err == nil {
		t.Error("GPUS=2 submitted jobs before refusing")
	}
	// A gpu build on a node without the NVIDIA driver cannot start: the shell's 127, explained.
	fake("audit", "exit 127\n")
	out, err = submit("1")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 127 || !strings.Contains(out, "cannot start on this node") {
		t.Errorf("an audit binary that cannot start: %v\n%s", err, out)
	}
}

// TestSlurmSubmitRefusals: submit.sh refuses, before any sbatch call, what would make the jobs
// fail or wait on the wrong thing: an N with a leading zero (octal in bash and Go: 010 is 8
// shards), a --dependency or --export among the extra arguments (sbatch keeps the last of a
// repeated option, so it replaced the finish job's wait on the array), a SEQUENTIAL other than
// 0 or 1 (yes submitted a fixed-size audit), and with SEQUENTIAL=1 a shard count its array
// tasks refuse (every task exited 2 after submit.sh exited 0). MEMORY reaches the check.
func TestSlurmSubmitRefusals(t *testing.T) {
	dir := t.TempDir()
	logf := filepath.Join(dir, "sbatch.log")
	if err := os.WriteFile(filepath.Join(dir, "sbatch"), []byte("#!/bin/sh\necho \"$*\" >> "+logf+"\necho 42\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := filepath.Abs(filepath.Join("..", "cmd", "audit", "testdata", "sequential_leaky.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	submit := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("bash", append([]string{filepath.Join("slurm", "submit.sh"), cfg, filepath.Join(dir, "out")}, args...)...)
		cmd.Env = append(os.Environ(), append(env, "PATH="+dir+":"+os.Getenv("PATH"), "AUDIT="+buildAudit(t))...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"010"}, "without leading zeros"},
		{nil, []string{"4", "--dependency=afterok:555"}, "--dependency=afterok:555: submit.sh sets --dependency"},
		{nil, []string{"4", "--export=NONE"}, "--export=NONE: submit.sh sets"},
		// sbatch reads an option by any unambiguous prefix, and a short one with its value.
		{nil, []string{"4", "-dafterany:555"}, "-dafterany:555: submit.sh sets"},
		{nil, []string{"4", "--dep=afterok:555"}, "--dep=afterok:555: submit.sh sets"},
		{nil, []string{"4", "--array=0-1"}, "--array=0-1: submit.sh sets"},
		{nil, []string{"4", "-a", "0-1"}, "-a: submit.sh sets"},
		{nil, []string{"4", "--output=x.log"}, "--output=x.log: submit.sh sets"},
		{nil, []string{"4", "-e", "x.err"}, "-e: submit.sh sets"},
		{[]string{"SEQUENTIAL=yes"}, []string{"4"}, "SEQUENTIAL must be 0 or 1"},
		{[]string{"SEQUENTIAL=1"}, []string{"1"}, "--sequential looks after 1, 2, 4, ... shards and needs at least 2"},
		{[]string{"MEMORY=1MiB"}, []string{"4"}, "the budget is 1 MiB"},
	} {
		out, err := submit(c.env, c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, c.want) {
			t.Errorf("%v %v: %v\n%s\nwant exit 2 saying %q", c.env, c.args, err, out, c.want)
		}
		if _, err := os.Stat(logf); err == nil {
			t.Fatalf("%v %v: sbatch was called before the refusal", c.env, c.args)
		}
	}
	// What each task's audit train refuses at its start is refused before the submission:
	// a directory holding another shard layout (every task exited 2 after submit.sh exited 0).
	train := exec.Command(buildAudit(t), "train", "--config", cfg, "--out", filepath.Join(dir, "out"), "--shard", "0/4", "--quiet")
	if out, err := train.CombinedOutput(); err != nil {
		t.Fatalf("train shard 0/4: %v\n%s", err, out)
	}
	out, err := submit(nil, "8")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "holds shard 0/4 of a 4-shard layout") {
		t.Errorf("8 shards into a directory of 4: %v\n%s\nwant exit 2 naming the layout", err, out)
	}
	if _, err := os.Stat(logf); err == nil {
		t.Fatal("8 shards into a directory of 4: sbatch was called before the refusal")
	}
	if copies, _ := filepath.Glob(filepath.Join(dir, "out", "logs", "config-*.yaml")); len(copies) > 0 {
		t.Errorf("a refused submission left its copy of the config: %v", copies)
	}
	// A submission its check refuses leaves no folder it made.
	fresh := filepath.Join(dir, "fresh")
	precheck := exec.Command("bash", filepath.Join("slurm", "submit.sh"), cfg, fresh, "4")
	precheck.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "AUDIT="+buildAudit(t), "MEMORY=1MiB")
	if out, err := precheck.CombinedOutput(); err == nil {
		t.Fatalf("MEMORY=1MiB: %s", out)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a submission refused by its check left %s (%v)", fresh, err)
	}
	if out, err := submit([]string{"SEQUENTIAL=1", "MEMORY=64GiB"}, "4"); err != nil {
		t.Errorf("a sequential submission of 4 shards: %v\n%s", err, out)
	}
}

// A precision the tasks' backend cannot give is refused by submit.sh, not by every task.
func TestSlurmSubmitRefusesPrecisionWithoutGPU(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sbatch"), []byte("#!/bin/sh\necho 42\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "cmd", "audit", "testdata", "sequential_leaky.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "tf32.yaml")
	if err := os.WriteFile(cfg, bytes.Replace(raw, []byte("train:\n"), []byte("train:\n  precision: tf32\n"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("slurm", "submit.sh"), cfg, filepath.Join(dir, "out"), "4")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "AUDIT="+buildAudit(t))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !bytes.Contains(out, []byte("precision tf32 needs the gpu backend")) || bytes.Contains(out, []byte("train_job=")) {
		t.Errorf("train.precision tf32 on the CPU backend: %v\n%s\nwant exit 2 before any submission", err, out)
	}
}
