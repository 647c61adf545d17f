"""The host probe: one tiny fusion whose steady-state time is nvFuser's host cost alone, on the
machine at hand, against what a profile predicts for it.

nvFuser's host cost per ``execute`` is most of the time of small fusions, and it is not a
constant of the GPU: the same fusions measured on the H200 in two sessions differed by 1.7x at
the median (``bench/results/h200_corpus_run4.json`` against ``h200_pairs_host_fit_035.json``),
while their kernels' times agreed. A profile's host constants hold for the session they were
fitted in. ``host_scale`` is the ratio of the probe's measured time to the profile's
prediction of it: a run that records the probe (``bench/corpus.py`` does) can be predicted with
the host constants scaled to its own machine (``Profile.with_host_scale``), which separates the
model's error from the machine's.

The probe is an add of an 8 x 8 fp32 tensor to itself: one pointwise kernel of about a
microsecond, so that its time at steady state is the host's (base, one segment, one input, one
output, one op).
"""

from __future__ import annotations

from eqsat.cost.profile import Profile
from eqsat.frontend.ingest import from_source
from eqsat.lowering.nvfuser import as_given
from eqsat.optimize import estimate_fusion
from eqsat.reference.devices import to_device
from eqsat.verification.timing import throughput_us

PROBE_SOURCE = """
import torch
from nvfuser_direct import FusionDefinition, DataType

def nvfuser_fusion(fd : FusionDefinition) -> None :
    tv0 = fd.define_tensor(shape=[8, 8], contiguity=[True, True], dtype=DataType.Float, is_cpu=False)
    tv1 = fd.ops.add(tv0, tv0)
    fd.add_output(tv1)

inputs = [torch.ones(8, 8)]
"""


def probe():
    """The probe as eqsat reads it (a Repro: its fusion and its CPU inputs)."""
    return from_source(PROBE_SOURCE, "<host probe>")


def predicted(profile: Profile | str | None = None):
    """The probe's Estimate under ``profile`` (its ``host_us``, ``device_us`` and ``time_us``)."""
    repro = probe()
    return estimate_fusion(repro.fusion, repro.inputs, profile=profile)


def measure_us(runs: int = 200) -> float:
    """The probe's median time at steady state on this machine's GPU, in µs (nvFuser needed)."""
    return measurer()(runs)


def measurer():
    """A function of ``runs`` (default 200) that measures the probe again each time it is
    called (µs, as :func:`measure_us`), the fusion defined and its inputs moved once: a run
    can measure the host's speed beside each of its measurements, since it drifts within a
    run too."""
    repro = probe()
    fd = as_given(repro, "nvfuser_direct")
    inputs = to_device(repro.inputs, "cuda", repro.fusion)
    return lambda runs=200: throughput_us(lambda: fd.execute(inputs), runs, warmup=20)


def host_scale(measured_us: float, profile: Profile | str | None = None) -> float:
    """How much slower (> 1) or faster this machine's host is than ``profile``'s: the probe's
    measured time less its predicted kernel time, over its predicted host time."""
    est = predicted(profile)
    if not measured_us > est.device_us:
        raise ValueError(
            f"the probe's measured time must exceed its kernel's {est.device_us:.2f} us, not {measured_us!r}"
        )
    return (measured_us - est.device_us) / est.host_us
