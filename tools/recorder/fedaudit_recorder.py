"""Record a federated training loop's runs for `audit import` (docs/import.md).

NumPy only (PyTorch tensors are accepted and converted; torch need not be installed). A training
loop that trains N coupled pairs of runs (pair p once on world C and once on world C', the
dataset that `audit datasets export` writes, with the same noise in both worlds) calls

    from fedaudit_recorder import Deployment, Recorder

    dep = Deployment(model={"kind": "mlp", "hidden": [8], "activation": "tanh"}, rounds=5,
                     local_steps=2, learning_rate=0.5, clip_norm=0.01, noise_std=0.05)
    with Recorder("snaps", pairs=2, deployment=dep, target_client=0,
                  base_config="deployment.yaml") as rec:
        rec.global_model(pair, "C", 0, model.state_dict())        # w_0, then every checkpoint
        rec.upload(pair, "C", t + 1, uploads[0])                  # the target's upload of round t+1
        ...

and the folder then holds what the import reads:

- one safetensors file (float32) per global model and upload, written as it is recorded, named
  p<pair>_<C|Cprime>_r<round>[_client<c>].safetensors;
- manifest.csv (file, world, pair, round, client, canary[, diverged]) when the recorder closes,
  after checking that every pair has both worlds at every checkpoint;
- train.json, the declared deployment as a config fragment ({"pairs": N, "train": {...}}: the
  algorithm, model, rounds, local steps, learning rate, clip, noise, participation, batching,
  checkpoints, informed); with base_config (the experiment config the data was exported from:
  data, adjacency, seed, audit), config.json, the whole config for `audit import --config`.

Every file is written atomically (a temporary file in the same folder, then renamed), the
manifest last, so a crash leaves no manifest that lists a file that is not there. Input is
validated where it is recorded, with errors (ValueError) that name the pair, world, round and
tensor: tensors that change names or shapes, NaN or infinite values, rounds that are not
checkpoints, entries recorded twice, runs that do not start from the same w_0 (the import's
rule, checked bit for bit in float32).

Worlds are "C" (or 0) and "C'" (or "Cprime", 1). fedaudit's canary is in C' (adjacency replace,
add, replace-client); under remove and remove-client, C holds the record C' lacks. The manifest's
canary column says so and is taken from base_config's adjacency (default: in C').
"""

import json
import math
import os
import struct
import tempfile

import numpy as np

__all__ = ["Deployment", "Recorder", "save_safetensors", "parse_world", "replica_of", "ALGORITHMS"]

ALGORITHMS = ("fedavg", "fedprox", "dpsgd", "dp-fedavg", "idp-fedavg", "adaptive-fedavg")
CLIENT_DP = ("dp-fedavg", "idp-fedavg", "adaptive-fedavg")
BATCHINGS = ("full", "fixed", "poisson")
MECHANISMS = ("gaussian", "laplace", "staircase")
WORLD_NAMES = ("C", "Cprime")  # as written in file names and the manifest's world column


def _atomic_write(path, data, sync=False):
    """Writes bytes to path atomically: a temporary file beside it, then renamed (after an
    fsync when sync is set)."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _fsync_path(path, directory=False):
    """Flushes a file's data, or a directory's entries, to disk."""
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _as_array(v, what):
    """A tensor as a float32 NumPy array (torch tensors via detach().cpu().numpy())."""
    if not isinstance(v, np.ndarray) and hasattr(v, "detach"):  # a torch tensor
        v = v.detach().cpu()
        if v.is_floating_point():
            v = v.float()  # bfloat16 and half have no NumPy view
        v = v.numpy()
    a = np.asarray(v)
    if a.dtype.kind not in "fiub":
        raise ValueError(f"{what}: dtype {a.dtype} is not numeric")
    return np.ascontiguousarray(a, dtype="<f4")


def save_safetensors(path, tensors):
    """Writes named tensors as one safetensors file of float32 (8-byte little-endian header
    length, JSON header padded to 8 bytes, raw little-endian data), atomically."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        a = _as_array(t, name)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    _atomic_write(path, struct.pack("<Q", len(h)) + h + b"".join(blobs))


def parse_world(world):
    """0 for C, 1 for C' (accepts "C", "0", 0, "C'", "Cprime", "1", 1)."""
    s = str(world).strip()
    if s in ("C", "c", "0"):
        return 0
    if s in ("C'", "Cprime", "cprime", "C_prime", "1"):
        return 1
    raise ValueError(f"world {world!r}: want C (or 0) or C' (also Cprime, 1)")


def replica_of(r):
    """The (pair, world) of replica r in the replica-batched layout: pair r // 2, world r % 2."""
    return r // 2, r % 2


def _need_int(name, v, lo, hi=None):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{name} {v!r}: want an integer")
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        raise ValueError(f"{name} {v}: want {lo}.." + (str(hi) if hi is not None else ""))
    return v


def _need_float(name, v, positive=False):
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} {v!r}: want a number")
    v = float(v)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{name} {v}: want a finite number " + ("> 0" if positive else ">= 0"))
    return v


class Deployment:
    """What the deployment declares: the training config's fields as `audit import` reads them
    (train/config.go). The audit checks the runs against these values, so they must be what the
    deployment claims to run, not what a buggy loop happens to do.

    model: the model config (e.g. {"kind": "mlp", "hidden": [8], "activation": "tanh"},
    {"kind": "lenet5"}, {"kind": "external"}). rounds T, local_steps K, learning_rate eta,
    clip_norm V (0: no clipping), noise_std sigma (the std of each upload's noise for fedavg,
    fedprox and dpsgd). Participation: participants n of the m clients per round (0: all), or
    sampling_rate q: for fedavg/fedprox/dpsgd the fraction of clients per round (q * m must be
    a whole number; needs the number of clients, from base_config), for the DP-FedAvg family
    each client's Poisson sampling rate; noise_multiplier and update_clip for that family.
    batching "full" (default), "fixed" or "poisson" with batch_size. checkpoints: the rounds
    recorded (default every round 0..T, which the replayed checks need). informed: ask the
    import to replay the rounds (default True). extra: any other train field, passed as is.
    """

    def __init__(self, model, rounds, local_steps, learning_rate, clip_norm, noise_std, *,
                 algorithm="fedavg", participants=0, sampling_rate=None, batching="full",
                 batch_size=0, mechanism="gaussian", noise_multiplier=None, update_clip=None,
                 checkpoints=None, informed=True, extra=None):
        if not isinstance(model, dict) or not isinstance(model.get("kind"), str) or not model["kind"]:
            raise ValueError(f"model {model!r}: want a dict with a kind (e.g. {{'kind': 'mlp', 'hidden': [8]}})")
        if algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm {algorithm!r}: want one of {', '.join(ALGORITHMS)}")
        if batching not in BATCHINGS:
            raise ValueError(f"batching {batching!r}: want one of {', '.join(BATCHINGS)}")
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism {mechanism!r}: want one of {', '.join(MECHANISMS)}")
        self.model = dict(model)
        self.algorithm = algorithm
        self.rounds = _need_int("rounds", rounds, 1)
        self.local_steps = _need_int("local_steps", local_steps, 1)
        self.learning_rate = _need_float("learning_rate", learning_rate, positive=True)
        self.clip_norm = _need_float("clip_norm", clip_norm)
        self.noise_std = _need_float("noise_std", noise_std)
        self.participants = _need_int("participants", participants, 0)
        self.sampling_rate = None
        if sampling_rate is not None:
            self.sampling_rate = _need_float("sampling_rate", sampling_rate, positive=True)
            if self.sampling_rate > 1:
                raise ValueError(f"sampling_rate {self.sampling_rate}: want a probability in (0, 1]")
            if self.participants:
                raise ValueError("give participants or sampling_rate, not both")
        if algorithm in CLIENT_DP and self.sampling_rate is None:
            raise ValueError(f"{algorithm} samples clients: declare its sampling_rate")
        self.batching = batching
        self.batch_size = _need_int("batch_size", batch_size, 0)
        if batching != "full" and self.batch_size == 0:
            raise ValueError(f"batching {batching} needs a batch_size")
        self.mechanism = mechanism
        self.noise_multiplier = None if noise_multiplier is None else _need_float("noise_multiplier", noise_multiplier)
        self.update_clip = None if update_clip is None else _need_float("update_clip", update_clip)
        if checkpoints is None:
            checkpoints = range(self.rounds + 1)
        cps = sorted({_need_int("checkpoint", c, 0, self.rounds) for c in checkpoints})
        if not cps:
            raise ValueError("checkpoints: none given")
        self.checkpoints = cps
        self.informed = bool(informed)
        if self.informed and algorithm not in CLIENT_DP and self.noise_std == 0:
            raise ValueError("informed: true needs noise_std > 0 (without noise there is no likelihood ratio)")
        self.extra = dict(extra or {})

    def train_section(self, clients=None):
        """The config's train section (a dict) for a deployment of `clients` clients."""
        t = {"algorithm": self.algorithm, "model": self.model, "rounds": self.rounds,
             "local_steps": self.local_steps, "learning_rate": self.learning_rate,
             "batching": self.batching, "clip_norm": self.clip_norm, "noise_std": self.noise_std,
             "checkpoints": list(self.checkpoints), "informed": self.informed}
        if self.batching != "full":
            t["batch_size"] = self.batch_size
        t["mechanism"] = self.mechanism
        if self.algorithm in CLIENT_DP:
            t["sampling_rate"] = self.sampling_rate
            if self.noise_multiplier is not None:
                t["noise_multiplier"] = self.noise_multiplier
            if self.update_clip is not None:
                t["update_clip"] = self.update_clip
        elif self.sampling_rate is None or self.sampling_rate == 1 or self.participants:
            # Written even when 0 (every client): a base config's other number must not survive
            # the merge.
            t["participants"] = self.participants
        else:
            if clients is None:
                raise ValueError("sampling_rate < 1 for a Noisy-FedAvg deployment needs the number of "
                                 "clients (base_config's data.clients) to declare participants")
            n = self.sampling_rate * clients
            if abs(n - round(n)) > 1e-9 or round(n) < 1:
                raise ValueError(f"sampling_rate {self.sampling_rate} of {clients} clients is {n} clients a round: "
                                 "want a whole number >= 1")
            t["participants"] = int(round(n))
        # A constant rate unless extra declares a schedule: written, so that a base config's
        # other schedule (which this loop did not run) cannot survive the merge.
        t["schedule"] = "constant"
        t.update(self.extra)
        return t


def _load_config(base):
    if base is None or isinstance(base, dict):
        return None if base is None else json.loads(json.dumps(base))
    path = os.fspath(base)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return json.loads(raw)
    except ValueError:
        pass
    try:
        import yaml  # optional: PyYAML reads YAML configs
    except ImportError:
        raise ValueError(f"{path}: not JSON, and PyYAML is not installed to read it as YAML "
                         "(give the config as a dict or a .json file)") from None
    cfg = yaml.safe_load(raw)
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: not an experiment config (a mapping)")
    return cfg


class Recorder:
    """Writes a training loop's global models and uploads, the manifest and the declared
    deployment into the folder `out` (created; existing files of the same names are replaced).

    pairs: N, the coupled pairs (pair ids 0..N-1). deployment: a Deployment (its rounds and
    checkpoints bound what may be recorded). target_client: the client whose uploads are
    recorded (adjacency.client; default base_config's). base_config: the experiment config
    (dict, or a JSON/YAML path) whose data, adjacency, seed and audit sections the data file came
    from; its train section's declared fields must agree with the deployment. names: the
    parameter tensors' names, in the model's order (default: those of the first snapshot).
    """

    def __init__(self, out, pairs, deployment, *, target_client=None, base_config=None, names=None):
        if not isinstance(deployment, Deployment):
            raise ValueError("deployment: want a Deployment")
        self.out = os.fspath(out)
        self.pairs = _need_int("pairs", pairs, 1)
        self.dep = deployment
        self.base = _load_config(base_config)
        self.clients = None
        canary_in = 1
        if self.base is not None:
            data = self.base.get("data") or {}
            adj = self.base.get("adjacency") or {}
            if isinstance(data.get("clients"), int):
                self.clients = data["clients"]
            if adj.get("kind") in ("remove", "remove-client"):
                canary_in = 0
            if target_client is None and isinstance(adj.get("client"), int):
                target_client = adj["client"]
            elif target_client is not None and isinstance(adj.get("client"), int) and adj["client"] != target_client:
                raise ValueError(f"target_client {target_client}, but base_config's adjacency.client is {adj['client']}")
            self._check_base_train()
        self.canary_in = canary_in
        self.target = None if target_client is None else _need_int("target_client", target_client, 0,
                                                                    None if self.clients is None else self.clients - 1)
        self.names = None if names is None else [str(n) for n in names]
        self.shapes = None
        self.rows = []  # manifest rows in the order recorded
        self.globals = set()  # (pair, world, round)
        self.ups = {}  # (pair, round, client) -> set of worlds
        self.diverged = False
        self.w0 = None  # (pair, world, [arrays]) of the first round-0 model
        self.closed = False
        os.makedirs(self.out, exist_ok=True)
        self.train_section = deployment.train_section(self.clients)

    def _check_base_train(self):
        bt = self.base.get("train") or {}
        if not isinstance(bt, dict):
            raise ValueError("base_config's train is not a mapping")
        # The deployment's declared values are written; a base config that says otherwise is a
        # mistake (two descriptions of one deployment).
        declared = self.dep.train_section(self.clients)
        for k in ("algorithm", "rounds", "local_steps", "learning_rate", "clip_norm", "noise_std",
                  "participants", "sampling_rate", "batching", "batch_size", "mechanism", "model",
                  "schedule", "schedule_table"):
            if k in bt and k in declared and bt[k] != declared[k]:
                raise ValueError(f"base_config's train.{k} is {bt[k]!r}, the deployment declares {declared[k]!r}")

    # ---- recording ----

    def _tensors(self, params, what):
        """The snapshot's tensors as an ordered dict name -> float32 array, checked against the
        layout of the first snapshot (or names)."""
        if isinstance(params, dict) or hasattr(params, "items"):
            items = [(str(k), _as_array(v, f"{what}, tensor {k}")) for k, v in params.items()]
            if self.names is not None:
                got = [k for k, _ in items]
                missing = [n for n in self.names if n not in got]
                if missing:
                    raise ValueError(f"{what}: no tensor {missing[0]!r} (the names are {self.names})")
                d = dict(items)
                items = [(n, d[n]) for n in self.names]
        else:
            seq = list(params) if isinstance(params, (list, tuple)) else [params]
            if self.names is None:
                if len(seq) == 1:
                    self.names = ["params"]
                else:
                    raise ValueError(f"{what}: {len(seq)} unnamed tensors: give names to the Recorder or pass a dict")
            if len(seq) != len(self.names):
                raise ValueError(f"{what}: {len(seq)} tensors, the names are {len(self.names)}: {self.names}")
            items = [(n, _as_array(v, f"{what}, tensor {n}")) for n, v in zip(self.names, seq)]
        if not items:
            raise ValueError(f"{what}: no tensors")
        if self.shapes is None:
            self.names = [k for k, _ in items]
            self.shapes = [a.shape for _, a in items]
        else:
            names = [k for k, _ in items]
            if names != self.names:
                raise ValueError(f"{what}: tensors {names}, the first snapshot's were {self.names}")
            for (k, a), s in zip(items, self.shapes):
                if a.shape != s:
                    raise ValueError(f"{what}: tensor {k} has shape {list(a.shape)}, the first snapshot's {list(s)}")
        for k, a in items:
            bad = ~np.isfinite(a)
            if bad.any():
                i = int(np.flatnonzero(bad.reshape(-1))[0])
                raise ValueError(f"{what}: tensor {k} holds {int(bad.sum())} NaN or infinite values "
                                 f"(first at element {i}: {a.reshape(-1)[i]}); record the last finite model "
                                 "with diverged=True instead")
        return dict(items)

    def _where(self, pair, world, rnd, client=None):
        s = f"pair {pair}, world {WORLD_NAMES[world] if world in (0, 1) else world}, round {rnd}"
        return s + (f", client {client}'s upload" if client is not None else "")

    def _check_open(self):
        if self.closed:
            raise ValueError("the recorder is closed")

    def global_model(self, pair, world, round, params, diverged=False):
        """Records the global model w_round of run (pair, world): params is a dict of named
        tensors (a state_dict), a list in the names' order, or one flat vector. diverged: the
        trainer declared the run diverged by this round (it keeps an earlier, finite model)."""
        self._check_open()
        pair = _need_int("pair", pair, 0, self.pairs - 1)
        world = parse_world(world)
        rnd = _need_int("round", round, 0, self.dep.rounds)
        where = self._where(pair, world, rnd)
        if rnd not in self.dep.checkpoints:
            raise ValueError(f"{where}: round {rnd} is not a checkpoint (the deployment's are {self.dep.checkpoints})")
        if (pair, world, rnd) in self.globals:
            raise ValueError(f"{where}: the global model is recorded twice")
        t = self._tensors(params, where)
        if rnd == 0:
            self._check_w0(pair, world, t)
        f = f"p{pair:05d}_{WORLD_NAMES[world]}_r{rnd:04d}.safetensors"
        save_safetensors(os.path.join(self.out, f), t)
        self.globals.add((pair, world, rnd))
        self.diverged = self.diverged or bool(diverged)
        self.rows.append((f, world, pair, rnd, "", bool(diverged)))
        return f

    def _check_w0(self, pair, world, t):
        if self.w0 is None:
            self.w0 = (pair, world, {k: a.copy() for k, a in t.items()})
            return
        p0, w0, ref = self.w0
        for k, a in t.items():
            b = ref[k]
            ne = a.view(np.uint32) != b.view(np.uint32)
            if ne.any():
                i = int(np.flatnonzero(ne.reshape(-1))[0])
                raise ValueError(f"{self._where(pair, world, 0)} starts from another w_0 than {self._where(p0, w0, 0)}: "
                                 f"tensor {k} differs first at element {i}: {a.reshape(-1)[i]!r} against "
                                 f"{b.reshape(-1)[i]!r} (w_0 is public: every run must start from the same one)")

    def upload(self, pair, world, round, params, client=None):
        """Records client's upload of round `round` (1 is the first): the noisy model it sent
        the server, computed from w_{round-1}. client defaults to the target client."""
        self._check_open()
        if client is None:
            client = self.target
        if client is None:
            raise ValueError("upload: no client given and no target client")
        client = _need_int("client", client, 0, None if self.clients is None else self.clients - 1)
        pair = _need_int("pair", pair, 0, self.pairs - 1)
        world = parse_world(world)
        rnd = _need_int("round", round, 1, self.dep.rounds)
        where = self._where(pair, world, rnd, client)
        if rnd not in self.dep.checkpoints or rnd - 1 not in self.dep.checkpoints:
            raise ValueError(f"{where}: an upload of round {rnd} needs rounds {rnd - 1} and {rnd} among the checkpoints "
                             f"({self.dep.checkpoints}): the upload attacks and checks subtract w_{rnd - 1}")
        key = (pair, rnd, client)
        if world in self.ups.get(key, ()):
            raise ValueError(f"{where}: recorded twice")
        t = self._tensors(params, where)
        f = f"p{pair:05d}_{WORLD_NAMES[world]}_r{rnd:04d}_client{client}.safetensors"
        save_safetensors(os.path.join(self.out, f), t)
        self.ups.setdefault(key, set()).add(world)
        self.rows.append((f, world, pair, rnd, client, False))
        return f

    def replicas(self, round, params, client=None, upload=False):
        """Records every run at once from replica-batched tensors: params is a list (in the
        names' order) or dict of tensors with a leading dimension of 2 x pairs, replica r being
        pair r // 2 in world r % 2. upload=True records them as `client`'s uploads."""
        items = list(params.items()) if hasattr(params, "items") else list(zip(self.names or [None] * len(params), params))
        if any(k is None for k, _ in items):
            raise ValueError("replicas: give the Recorder names or pass a dict")
        R = 2 * self.pairs
        for k, v in items:
            n = v.shape[0] if hasattr(v, "shape") and len(v.shape) else None
            if n != R:
                raise ValueError(f"replicas: tensor {k} has leading dimension {n}, want 2 x {self.pairs} pairs = {R}")
        for r in range(R):
            pair, world = replica_of(r)
            one = {k: v[r] for k, v in items}
            if upload:
                self.upload(pair, world, round, one, client)
            else:
                self.global_model(pair, world, round, one)

    # ---- closing ----

    def missing(self):
        """What the import would refuse as missing, as a list of messages (empty when complete)."""
        out = []
        for p in range(self.pairs):
            for w in (0, 1):
                for t in self.dep.checkpoints:
                    if (p, w, t) not in self.globals:
                        out.append(f"{self._where(p, w, t)}: no global model")
        if self.ups:
            everyone = self.dep.algorithm not in CLIENT_DP and self.dep.participants == 0 and \
                (self.dep.sampling_rate is None or self.dep.sampling_rate == 1)
            for (p, t, c), ws in sorted(self.ups.items()):
                if len(ws) == 1:
                    w = 1 - next(iter(ws))
                    out.append(f"{self._where(p, w, t, c)}: missing, though world {WORLD_NAMES[1 - w]} has it "
                               "(a client sits out a round in both worlds of a pair or in neither)")
            if everyone and self.target is not None:
                for p in range(self.pairs):
                    for t in self.dep.checkpoints:
                        if t >= 1 and (p, t, self.target) not in self.ups:
                            out.append(f"{self._where(p, 0, t, self.target)} and world Cprime's: missing "
                                       "(every client takes part in every round)")
        return out

    def close(self):
        """Checks that every run is complete, then writes train.json, config.json (with a base
        config) and the manifest, each atomically. Returns the manifest's path."""
        if self.closed:
            return os.path.join(self.out, "manifest.csv")
        miss = self.missing()
        if miss:
            more = f"\n... and {len(miss) - 20} more" if len(miss) > 20 else ""
            raise ValueError(f"{self.out}: the runs are incomplete, no manifest written:\n" + "\n".join(miss[:20]) + more)
        # The snapshots were written without an fsync each (cheap while training); the manifest
        # must not outlive them on disk, or a power loss could leave a manifest naming empty files.
        for f, *_ in self.rows:
            _fsync_path(os.path.join(self.out, f))
        _fsync_path(self.out, directory=True)
        train = dict(self.train_section)
        train["record_params"] = True
        train["record_upload"] = bool(self.ups)
        frag = {"pairs": self.pairs, "train": train}
        _atomic_write(os.path.join(self.out, "train.json"), (json.dumps(frag, indent=2) + "\n").encode(), sync=True)
        if self.base is not None:
            cfg = dict(self.base)
            cfg["pairs"] = self.pairs
            cfg["train"] = {**(cfg.get("train") or {}), **train}
            _atomic_write(os.path.join(self.out, "config.json"), (json.dumps(cfg, indent=2) + "\n").encode(), sync=True)
        head = "file,world,pair,round,client,canary" + (",diverged" if self.diverged else "")
        lines = [head]
        for f, w, p, t, c, dv in self.rows:
            line = f"{f},{WORLD_NAMES[w]},{p},{t},{c},{'true' if w == self.canary_in else 'false'}"
            if self.diverged:
                line += ",true" if dv else ","
            lines.append(line)
        path = os.path.join(self.out, "manifest.csv")
        _atomic_write(path, ("\n".join(lines) + "\n").encode(), sync=True)
        _fsync_path(self.out, directory=True)
        self.closed = True
        return path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        return False
