"""Unit tests of fedaudit_recorder (NumPy only; the torch case is skipped without torch).

    python3 -m unittest -v test_fedaudit_recorder      (from tools/recorder; go test ./tools/recorder runs it)
"""
import csv
import json
import os
import struct
import tempfile
import unittest

import numpy as np

from fedaudit_recorder import Deployment, Recorder, parse_world, save_safetensors

SHAPES = {"fc1.weight": (4, 3), "fc1.bias": (4,), "fc2.weight": (2, 4), "fc2.bias": (2,)}
BASE = {"name": "t", "seed": 1, "pairs": 9,
        "data": {"source": "synthetic", "synthetic": {"dim": 3, "classes": 2}, "clients": 4, "per_client": 5},
        "adjacency": {"kind": "replace", "client": 1, "index": 0, "canary": "dirac"},
        "train": {"algorithm": "fedavg", "clip_norm": 0.1, "threads": 1},
        "audit": {"claim_mu": 1}}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    assert n % 8 == 0
    out = {}
    for k, v in head.items():
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], "<f4").reshape(v["shape"])
    return list(head), out


def load_json(path):
    with open(path) as f:
        return json.load(f)


def model(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return {k: (scale * rng.standard_normal(s)).astype(np.float32) for k, s in SHAPES.items()}


def dep(**kw):
    args = dict(model={"kind": "mlp", "hidden": [4], "activation": "tanh"}, rounds=2, local_steps=1,
                learning_rate=0.5, clip_norm=0.1, noise_std=0.01)
    args.update(kw)
    return Deployment(**args)


class RecorderTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "snaps")

    def tearDown(self):
        self.tmp.cleanup()

    def complete(self, rec, pairs=2, uploads=True):
        w0 = model(0)
        for p in range(pairs):
            for w in ("C", "C'"):
                rec.global_model(p, w, 0, w0)
        for t in (1, 2):
            for p in range(pairs):
                for w in (0, 1):
                    rec.global_model(p, w, t, model(10 * t + p))
                    if uploads:
                        rec.upload(p, w, t, model(100 * t + p))

    def manifest(self):
        with open(os.path.join(self.out, "manifest.csv")) as f:
            return list(csv.DictReader(f))

    def test_writes_what_the_import_reads(self):
        with Recorder(self.out, 2, dep(), base_config=BASE) as rec:
            self.complete(rec)
        rows = self.manifest()
        self.assertEqual(len(rows), 2 * 2 * 3 + 2 * 2 * 2)
        self.assertEqual(rows[0], {"file": "p00000_C_r0000.safetensors", "world": "C", "pair": "0", "round": "0",
                                   "client": "", "canary": "false"})
        ups = [r for r in rows if r["client"]]
        self.assertTrue(all(r["client"] == "1" for r in ups))  # the base config's adjacency.client
        self.assertEqual({r["canary"] for r in rows if r["world"] == "Cprime"}, {"true"})
        names, t = read_safetensors(os.path.join(self.out, "p00001_Cprime_r0002.safetensors"))
        self.assertEqual(names, list(SHAPES))
        np.testing.assert_array_equal(t["fc1.weight"], model(21)["fc1.weight"])
        cfg = load_json(os.path.join(self.out, "config.json"))
        self.assertEqual(cfg["pairs"], 2)
        self.assertEqual(cfg["data"], BASE["data"])
        tr = cfg["train"]
        self.assertEqual((tr["rounds"], tr["local_steps"], tr["learning_rate"], tr["clip_norm"], tr["noise_std"]),
                         (2, 1, 0.5, 0.1, 0.01))
        self.assertEqual(tr["checkpoints"], [0, 1, 2])
        self.assertTrue(tr["informed"] and tr["record_params"] and tr["record_upload"])
        self.assertEqual(tr["threads"], 1)  # the base's other train fields stay
        frag = load_json(os.path.join(self.out, "train.json"))
        self.assertEqual(frag["pairs"], 2)
        self.assertEqual(frag["train"]["model"]["kind"], "mlp")
        self.assertEqual([f for f in os.listdir(self.out) if f.endswith(".tmp")], [])

    def test_replicas(self):
        rec = Recorder(self.out, 2, dep(), names=list(SHAPES))
        batched = [np.stack([model(0)[k]] * 4) for k in SHAPES]
        rec.replicas(0, batched)
        rec.replicas(1, [np.stack([model(r)[k] for r in range(4)]) for k in SHAPES])
        rec.replicas(2, [np.stack([model(r)[k] for r in range(4)]) for k in SHAPES])
        rec.close()
        rows = self.manifest()
        self.assertEqual([(r["pair"], r["world"]) for r in rows[:4]], [("0", "C"), ("0", "Cprime"), ("1", "C"), ("1", "Cprime")])
        with self.assertRaisesRegex(ValueError, "leading dimension 3, want 2 x 2 pairs = 4"):
            Recorder(os.path.join(self.tmp.name, "x"), 2, dep(), names=list(SHAPES)).replicas(0, [np.zeros((3, 4, 3))] * 4)

    def test_flat_vector_and_list(self):
        rec = Recorder(self.out, 1, dep(rounds=1))
        rec.global_model(0, 0, 0, np.zeros(10))
        with self.assertRaisesRegex(ValueError, "tensor params has shape \\[11\\], the first snapshot's \\[10\\]"):
            rec.global_model(0, 1, 0, np.zeros(11))
        rec2 = Recorder(os.path.join(self.tmp.name, "x"), 1, dep(rounds=1))
        with self.assertRaisesRegex(ValueError, "2 unnamed tensors"):
            rec2.global_model(0, 0, 0, [np.zeros(2), np.zeros(3)])

    def test_refusals(self):
        rec = Recorder(self.out, 2, dep(), target_client=0)
        rec.global_model(0, "C", 0, model(0))
        cases = [
            (lambda: rec.global_model(2, "C", 0, model(0)), "pair 2: want 0..1"),
            (lambda: rec.global_model(0, "D", 0, model(0)), "world 'D'"),
            (lambda: rec.global_model(0, "C", 3, model(0)), "round 3: want 0..2"),
            (lambda: rec.global_model(0, "C", 0, model(0)), "pair 0, world C, round 0: the global model is recorded twice"),
            (lambda: rec.global_model(0, "C'", 0, model(1)), "starts from another w_0 than pair 0, world C, round 0: tensor fc1.weight differs first at element 0"),
            (lambda: rec.global_model(1, 0, 1, {**model(0), "fc1.bias": np.full(4, np.nan)}), "tensor fc1.bias holds 4 NaN or infinite values"),
            (lambda: rec.global_model(1, 0, 1, {k: v for k, v in model(0).items() if k != "fc2.bias"}), "pair 1, world C, round 1: no tensor 'fc2.bias'"),
            (lambda: rec.global_model(1, 0, 1, {**model(0), "fc2.bias": np.zeros(3)}), "tensor fc2.bias has shape \\[3\\], the first snapshot's \\[2\\]"),
            (lambda: rec.global_model(1, 0, 1, {**model(0), "fc2.bias": np.array(["a", "b"])}), "dtype <U1 is not numeric"),
            (lambda: rec.upload(0, 0, 0, model(0)), "round 0: want 1..2"),
            (lambda: rec.upload(0, 0, 1.5, model(0)), "round 1.5: want an integer"),
        ]
        for fn, msg in cases:
            with self.assertRaisesRegex(ValueError, msg):
                fn()

    def test_checkpoints_and_uploads(self):
        rec = Recorder(self.out, 1, dep(rounds=3, checkpoints=[0, 2, 3]), target_client=0)
        with self.assertRaisesRegex(ValueError, "round 1 is not a checkpoint"):
            rec.global_model(0, 0, 1, model(0))
        with self.assertRaisesRegex(ValueError, "needs rounds 1 and 2 among the checkpoints"):
            rec.upload(0, 0, 2, model(0))
        rec.upload(0, 0, 3, model(0))
        rec.upload(0, 1, 3, model(0))
        with self.assertRaisesRegex(ValueError, "recorded twice"):
            rec.upload(0, 1, 3, model(0))

    def test_incomplete_writes_no_manifest(self):
        rec = Recorder(self.out, 3, dep(), target_client=0)
        rec.global_model(0, 0, 0, model(0))
        rec.upload(1, "C'", 2, model(0))
        with self.assertRaises(ValueError) as e:
            rec.close()
        msg = str(e.exception)
        self.assertIn("pair 0, world Cprime, round 0: no global model", msg)
        self.assertIn("pair 1, world C, round 2, client 0's upload: missing, though world Cprime has it", msg)
        self.assertIn("... and", msg)
        self.assertFalse(os.path.exists(os.path.join(self.out, "manifest.csv")))

    def test_deployment_refusals(self):
        cases = [
            (dict(model="mlp"), "want a dict with a kind"),
            (dict(algorithm="sgd"), "algorithm 'sgd'"),
            (dict(rounds=0), "rounds 0: want 1.."),
            (dict(learning_rate=0), "learning_rate 0.0: want a finite number > 0"),
            (dict(clip_norm=float("nan")), "clip_norm nan"),
            (dict(noise_std=-1), "noise_std -1.0"),
            (dict(noise_std=0), "informed: true needs noise_std > 0"),
            (dict(sampling_rate=1.5), "want a probability"),
            (dict(sampling_rate=0.5, participants=2), "not both"),
            (dict(algorithm="dp-fedavg"), "declare its sampling_rate"),
            (dict(batching="fixed"), "needs a batch_size"),
            (dict(checkpoints=[0, 5]), "checkpoint 5: want 0..2"),
        ]
        for kw, msg in cases:
            with self.assertRaisesRegex(ValueError, msg):
                dep(**kw)

    def test_sampling_rate_and_base_conflicts(self):
        self.assertEqual(dep(sampling_rate=0.5).train_section(4)["participants"], 2)
        with self.assertRaisesRegex(ValueError, "is 1.2 clients a round"):
            dep(sampling_rate=0.3).train_section(4)
        with self.assertRaisesRegex(ValueError, "needs the number of clients"):
            Recorder(self.out, 1, dep(sampling_rate=0.5))
        t = dep(algorithm="dp-fedavg", sampling_rate=0.2, noise_multiplier=1.0, update_clip=0.5).train_section()
        self.assertEqual((t["sampling_rate"], t["noise_multiplier"], t["update_clip"]), (0.2, 1.0, 0.5))
        self.assertNotIn("participants", t)
        self.assertEqual(dep().train_section(4)["participants"], 0)
        with self.assertRaisesRegex(ValueError, "base_config's train.participants is 3, the deployment declares 0"):
            Recorder(self.out, 1, dep(), base_config=dict(BASE, train={"participants": 3}))
        with self.assertRaisesRegex(ValueError, "base_config's train.clip_norm is 0.1, the deployment declares 0.2"):
            Recorder(self.out, 1, dep(clip_norm=0.2), base_config=BASE)
        # A loop at a constant rate declares it, so a base config's other schedule is a conflict,
        # not a declaration the runs would fail the checks of; extra declares another.
        with self.assertRaisesRegex(ValueError, "base_config's train.schedule is 'cyclic', the deployment declares 'constant'"):
            Recorder(self.out, 1, dep(), base_config=dict(BASE, train={"schedule": "cyclic"}))
        self.assertEqual(dep(extra={"schedule": "cyclic"}).train_section(4)["schedule"], "cyclic")
        with self.assertRaisesRegex(ValueError, "target_client 2, but base_config's adjacency.client is 1"):
            Recorder(self.out, 1, dep(), base_config=BASE, target_client=2)
        with self.assertRaisesRegex(ValueError, "client 4: want 0..3"):
            Recorder(self.out, 1, dep(), base_config=BASE).upload(0, 0, 1, model(0), client=4)
        path = os.path.join(self.tmp.name, "base.json")
        with open(path, "w") as f:
            json.dump(BASE, f)
        self.assertEqual(Recorder(self.out, 1, dep(), base_config=path).target, 1)

    def test_remove_adjacency_and_diverged(self):
        base = dict(BASE, adjacency={"kind": "remove-client", "client": 0})
        with Recorder(self.out, 1, dep(rounds=1), base_config=base) as rec:
            rec.global_model(0, 0, 0, model(0))
            rec.global_model(0, 1, 0, model(0))
            rec.global_model(0, 0, 1, model(1), diverged=True)
            rec.global_model(0, 1, 1, model(2))
        rows = self.manifest()
        self.assertEqual({r["world"]: r["canary"] for r in rows}, {"C": "true", "Cprime": "false"})
        self.assertEqual([r["diverged"] for r in rows], ["", "", "true", ""])

    def test_worlds(self):
        for w, want in (("C", 0), (0, 0), ("0", 0), ("C'", 1), ("Cprime", 1), (1, 1)):
            self.assertEqual(parse_world(w), want)

    def test_torch_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("no torch")
        p = os.path.join(self.tmp.name, "t.safetensors")
        x = torch.arange(6, dtype=torch.float64, requires_grad=True).reshape(2, 3)
        save_safetensors(p, {"w": x, "h": torch.ones(2, dtype=torch.bfloat16)})
        names, t = read_safetensors(p)
        self.assertEqual(names, ["w", "h"])
        np.testing.assert_array_equal(t["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
        np.testing.assert_array_equal(t["h"], np.ones(2, dtype=np.float32))


if __name__ == "__main__":
    unittest.main()
