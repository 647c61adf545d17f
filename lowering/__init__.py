"""Lowering: the Fusion IR back into calls on a FusionDefinition implementation.

- :func:`replay` makes a fusion's calls on any object with nvFuser's protocol: a live
  nvFuser definition, eqsat's torch executor, eqsat's recorder, or the source writer;
- :func:`fusion_source` / :func:`repro_source` print a fusion in nvFuser's repro format;
  :func:`spliced_repro` puts it in place of a repro file's own definition.
"""

from eqsat.ir.replay import replay

from .source import fusion_source, repro_source, spliced_repro

__all__ = ["replay", "fusion_source", "repro_source", "spliced_repro"]
