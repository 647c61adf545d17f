"""eqsat's executors for Thunder, listed before Thunder's own defaults:

    thunder.jit(model, transforms=[Optimize()], executors=eqsat.thunder.executors())

- ``attention``: :mod:`eqsat.thunder.cudnn_attention` (scaled-dot-product attention on cuDNN,
  causal where eqsat proved the mask causal);
- ``linear``: :mod:`eqsat.thunder.aligned_linear` (a linear layer with unaligned output
  features, such as gpt2's vocabulary of 50,257, on padded operands);
- ``detach``: :mod:`eqsat.thunder.detach_executor` (``detach`` as a view nvFuser fuses, with
  no gradient, where Thunder runs it on torch and ends an nvFuser region at each).

Each claims only the calls it takes; every other call goes to Thunder's executors as before."""

from __future__ import annotations


def executors(*, attention: bool = True, linear: bool = True, detach: bool = True) -> list:
    """Thunder's default executors with the eqsat executors asked for first."""
    import thunder  # optional: only where Thunder is installed

    ours = []
    if attention:
        from .cudnn_attention_executor import cudnn_sdpa_executor  # imports Thunder: only when asked for

        ours.append(cudnn_sdpa_executor())
    if linear:
        from .aligned_linear_executor import aligned_linear_executor  # imports Thunder: only when asked for

        ours.append(aligned_linear_executor())
    if detach:
        from .detach_executor import detach_executor  # imports Thunder: only when asked for

        ours.append(detach_executor())
    return [*ours, *thunder.get_default_executors()]
