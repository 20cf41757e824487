"""Threads calling run on one model: correct results, and the GIL released while running."""

import threading
import time

import numpy as np
from onnx import helper

import ubfuse
from conftest import MODELS, model_bytes, seed_block_model


def test_threads_share_one_model():
    m = ubfuse.load_onnx(MODELS / "llama_stack.onnx")
    inputs = [np.random.default_rng(s).standard_normal((1, 3 + s, 64), dtype=np.float32)
              for s in range(4)]
    want = [m.run({"hidden_states": x}) for x in inputs]
    got = [[] for _ in inputs]
    errors = []

    def work(i):
        try:
            for _ in range(5):
                got[i].append(m.run({"hidden_states": inputs[i]}))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i, runs in enumerate(got):
        assert len(runs) == 5
        for out in runs:
            for k, v in want[i].items():
                np.testing.assert_array_equal(out[k], v)


def test_threads_share_one_model_with_run_into():
    m = ubfuse.load_onnx(seed_block_model(), options={"num_threads": 1})
    xs = [np.full((2, 4, 64), float(i), np.float32) for i in range(3)]
    r = np.random.default_rng(1).standard_normal((2, 4, 64), dtype=np.float32)
    want = [m.run({"x": x, "residual": r})["y"] for x in xs]
    outs = [np.empty((2, 4, 64), np.float32) for _ in xs]

    def work(i):
        for _ in range(20):
            m.run_into({"x": xs[i], "residual": r}, {"y": outs[i]})

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o, w)


def count_for(seconds):
    end, k = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        k += 1
    return k


def test_gil_is_released_while_running():
    # Another thread runs a model (100 Sin kernels over a small vector in eager mode, one kernel
    # thread, about 150 ms a run) while this thread counts in Python. Released, the count keeps
    # much of the pace it has alone (about half on this loaded 2-core machine); held for each run,
    # this thread gets the GIL only between runs, a few ms per run (measured: 0.05 of its pace
    # with runs of 240 ms; released, 0.5 to 0.7).
    nodes = [helper.make_node("Sin", [f"v{i}"], [f"v{i + 1}"], name=f"sin{i}") for i in range(100)]
    b = model_bytes(nodes, [("v0", "f32", ["n"])], [("v100", "f32", ["n"])])
    m = ubfuse.load_onnx(b, mode="eager", options={"num_threads": 1})
    n = 1 << 14
    while True:
        feed = {"v0": np.linspace(-3, 3, n, dtype=np.float32)}
        m.run(feed)
        t0 = time.perf_counter()
        m.run(feed)
        once = time.perf_counter() - t0
        if once >= 0.15 or n >= 1 << 22:
            break
        n = int(n * min(16, max(1.5, 0.2 / once)))
    window = 0.4
    alone = count_for(window)
    busy = threading.Event()
    done = threading.Event()

    def work():
        busy.set()
        while not done.is_set():
            m.run(feed)

    t = threading.Thread(target=work)
    t.start()
    busy.wait()
    during = count_for(window)
    done.set()
    t.join()
    assert once >= 0.1, f"one run takes {once * 1e3:.1f} ms: too short to tell"
    assert during > 0.3 * alone, f"{during} iterations while running, {alone} alone " \
        f"(one run: {once * 1e3:.1f} ms)"


def test_ctrl_c_during_a_run_is_not_lost(tmp_path):
    # SIGINT arrives while a run holds no GIL: Python raises KeyboardInterrupt once the run
    # returns, instead of the signal waiting for the whole loop (or being dropped).
    import signal
    import subprocess
    import sys
    nodes = [helper.make_node("Sin", [f"v{i}"], [f"v{i + 1}"], name=f"sin{i}") for i in range(100)]
    path = tmp_path / "sins.onnx"
    path.write_bytes(model_bytes(nodes, [("v0", "f32", ["n"])], [("v100", "f32", ["n"])]))
    script = (
        "import sys, time, numpy as np, ubfuse\n"
        "m = ubfuse.load_onnx(sys.argv[1], mode='eager', options={'num_threads': 1})\n"
        "x = np.ones(1 << 20, np.float32)\n"
        "m.run({'v0': x})\n"
        "t0 = time.perf_counter(); m.run({'v0': x}); once = time.perf_counter() - t0\n"
        "print(once, flush=True)\n"
        "for _ in range(1000):\n"
        "    m.run({'v0': x})\n"
        "print('not interrupted', flush=True)\n")
    p = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    once = float(p.stdout.readline())
    time.sleep(min(0.5, 2 * once))
    t0 = time.perf_counter()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    waited = time.perf_counter() - t0
    assert "KeyboardInterrupt" in err and "not interrupted" not in out
    assert p.returncode != 0
    assert waited < 10 * once + 1, f"the interrupt took {waited:.2f} s; one run takes {once:.2f} s"
