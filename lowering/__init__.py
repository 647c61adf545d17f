"""Lowering: the Fusion IR back into calls on a FusionDefinition implementation.

- :func:`replay` makes a fusion's calls on any object with nvFuser's protocol: a live
  nvFuser definition, eqsat's torch executor, eqsat's recorder, or the source writer;
- :func:`fusion_source` / :func:`repro_source` print a fusion in nvFuser's repro format.
"""
from eqsat.ir.replay import replay

from .source import fusion_source, repro_source

__all__ = ["replay", "fusion_source", "repro_source"]
