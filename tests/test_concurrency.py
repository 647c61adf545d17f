"""optimize_fusion and an OptimizedFusion's per-shape cache used from several threads at once
give what they give one call at a time (egglog's e-graph lives on a thread of its own; the cache
is locked)."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import eqsat
from eqsat.testing.seeds import SEEDS

# an e-graph dropped on another thread than its own is reported as an unraisable exception
pytestmark = pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")

SHAPES = {
    "reduction_broadcast": [(8, 8, 8), (256, 512, 128), (512, 512, 512)],
    "layernorm_amax": [(16, 32), (1024, 4096), (4096, 1024)],
}


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


def test_every_threads_e_graph_work_runs_on_the_one_e_graph_thread():
    import threading

    from eqsat.egraph.saturate import in_session

    def where():
        return in_session(lambda s: (threading.current_thread().name, id(s)))

    with ThreadPoolExecutor(max_workers=4) as pool:
        seen = set(pool.map(lambda _: where(), range(8)))
    seen.add(where())
    assert len(seen) == 1 and next(iter(seen))[0] == "eqsat-egraph"


def test_a_jobs_exception_is_raised_in_the_asking_thread_and_later_jobs_run():
    from eqsat.egraph.saturate import in_session

    def fails(s):
        raise ValueError("from the job")

    with pytest.raises(ValueError, match="from the job"):
        in_session(fails)
    assert in_session(lambda s: s.size()) > 0


def test_an_e_graph_state_left_in_a_reference_cycle_is_freed_quietly_on_any_thread():
    """push/pop discard copies of the e-graph's state that point at its Rust e-graph; one left
    in a reference cycle is freed by whichever thread's collection finds it (six pool threads
    ending at once in CI, or the main thread here), after the thread that asked for the work has
    ended: egglog cannot free the e-graph there, so such a copy must never hold the last
    reference to it."""
    import gc
    import threading

    from eqsat.egraph.saturate import in_session

    def leave_a_cycle(s):
        copy = s.eg._state.copy()
        copy.cycle = copy

    t = threading.Thread(target=lambda: in_session(leave_a_cycle))
    t.start()
    t.join()
    gc.collect()  # on the main thread: an unraisable error if the e-graph went with it
