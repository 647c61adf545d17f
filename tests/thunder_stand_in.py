"""A stand-in for Thunder's ``FusionDefinitionWrapper``, shared by the tests that drive
eqsat's ``RegionHook`` without Thunder (tests/test_thunder.py, tests/test_causal_masks.py)."""

import torch


class FakeThunderRegion:
    """Stands for Thunder's ``FusionDefinitionWrapper`` (thunder/executors/nvfuserex_impl.py):
    ``get_fd(to_descriptors(args))`` gives the region's definition (a function of fd here, a
    live nvfuser_direct definition in Thunder; the descriptors are the inputs' stride orders,
    not their shapes, as Thunder's are), and calling it runs the region as Thunder would."""

    def __init__(self, definition, run, name="nvFusion0: (broadcast_in_dim, mul, sum)"):
        self.name, self.definition, self.run = name, definition, run
        self.calls, self.descriptors = 0, []
        self.enable_options, self.disable_options = ["fake_enable"], []
        self.store_inputs, self.last_inputs, self.last_used = True, None, None

    def to_descriptors(self, args):
        return tuple(
            tuple(sorted(range(a.dim()), key=lambda d: -a.stride(d))) if isinstance(a, torch.Tensor) else None
            for a in args
        )

    def get_fd(self, descriptors):
        self.descriptors.append(descriptors)
        return self.definition

    def __call__(self, *args):
        self.calls += 1
        self.last_used = self.definition
        return self.run(*args)
