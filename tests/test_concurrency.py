"""optimize_fusion and an OptimizedFusion's per-shape cache used from several threads at once
give what they give one call at a time (egglog's e-graph is per thread; the cache is locked)."""
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import eqsat
from eqsat.testing.seeds import SEEDS

# an e-graph dropped on another thread than its own is reported as an unraisable exception
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

SHAPES = {"reduction_broadcast": [(8, 8, 8), (256, 512, 128), (512, 512, 512)],
          "layernorm_amax": [(16, 32), (1024, 4096), (4096, 1024)]}


def _cases():
    return [(name, shape) for name, shapes in SHAPES.items() for shape in shapes]


def _optimize(name, shape):
    """No deadline: with one, a run slowed by the others (six threads on two cores in CI) may be
    cut and keep its input, by design; the subject here is that threads do not interfere."""
    seed = SEEDS[name]
    return eqsat.optimize_fusion(seed.model_ref, seed.make_inputs(*shape, device="meta"), deadline_s=None)


def test_optimize_fusion_from_several_threads_matches_serial_runs():
    cases = _cases() * 2
    serial = {case: _optimize(*case).source for case in _cases()}
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda case: (case, _optimize(*case)), cases))
    for case, opt in results:
        assert opt.source == serial[case], f"{case} optimized differently in a thread"


def test_the_per_shape_cache_gives_one_result_per_shape_across_threads():
    seed = SEEDS["layernorm_amax"]
    opt = eqsat.optimize_fusion(seed.model_ref)
    shapes = SHAPES["layernorm_amax"] * 4
    with ThreadPoolExecutor(max_workers=6) as pool:
        found = list(pool.map(lambda s: (s, opt.for_inputs(seed.make_inputs(*s, device="meta"))), shapes))
    by_shape = {}
    for shape, result in found:
        assert by_shape.setdefault(shape, result) is result, "two results cached for one shape"
    assert len(by_shape) == len(SHAPES["layernorm_amax"])
    small = seed.make_inputs(16, 32)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(lambda _: opt.run_reference(small, strict=True), range(8)))
    want = eqsat.run_fusion(eqsat.ingest(seed.model_ref), small, strict=True)
    for got in outs:
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, rtol=2e-2, atol=2e-2)


def test_an_e_graph_released_on_another_thread_is_left_quietly():
    """Thunder's backward runs on autograd's threads, whose thread-local e-graphs Python may free
    from the main thread at exit: egglog cannot free them there, and that must not print errors."""
    import threading

    from eqsat.egraph.saturate import _SessionHolder
    holders = []
    t = threading.Thread(target=lambda: holders.append(_SessionHolder()))
    t.start()
    t.join()
    holders.clear()          # dropped here, on the main thread: an unraisable error if not handled


def test_a_session_in_a_reference_cycle_is_freed_on_its_own_thread(monkeypatch):
    """A session left in a reference cycle when its thread ends is garbage that any thread's
    collection may free (six pool threads ending at once in CI): its e-graph must already be
    gone, freed on its own thread, by then. The holder's own collection is switched off here so
    that the main thread's collection is the one that finds the cycle."""
    import gc
    import threading
    import types

    from eqsat.egraph import saturate
    monkeypatch.setattr(saturate, "gc", types.SimpleNamespace(collect=lambda: 0))

    def make_and_drop():
        holder = saturate._SessionHolder()
        holder.session.cycle = holder.session
        del holder                 # released on this thread, its session now cyclic garbage

    t = threading.Thread(target=make_and_drop)
    t.start()
    t.join()
    gc.collect()                   # on the main thread: an unraisable error if the e-graph is still there
