"""eqsat's cuDNN attention executor in a Thunder training step (marker ``gpu``: Hopper or
later, Thunder 0.2.6, nvFuser 0.2.35; skipped elsewhere with the reason).

One step of a small transformers Phi-3 (bf16, transformers' boolean causal mask), against
the same step of a float32 copy in eager PyTorch: with the executor alone, attention runs with
the mask; with eqsat's ``Optimize`` too, the region hook marks the mask Thunder's region makes
from ``iota`` and the executor runs it causal (``eqsat.thunder.causal_masks``). Both must match
eager's loss and gradients.

Not a model with grouped-query attention (Llama, Qwen2): through Dynamo, a Thunder 0.2.6 piece
hands the Inductor piece after it a contiguous [B, kv heads, S, D] tensor where Inductor compiled
for eager's transposed layout, and Inductor's stride assertion fails before attention runs
(H100, 2026-12-07; ``docs/step-profile.md``, "What eqsat cannot reach")."""

import copy

import pytest
import torch
from thunder_gpu import off_from_eager, thunder_on_gpu, training_step

try:
    import eqsat.thunder as et
except ImportError as err:  # Thunder installed but unusable here: the reason
    pytest.skip(str(err), allow_module_level=True)

BATCH, SEQ, VOCAB = 2, 64, 32064  # Phi-3's vocabulary: its pad token is 32000


def _setup():
    # cuDNN's fused attention needs compute capability 9.0 or more
    thunder = thunder_on_gpu(capability=(9, 0), nvfuser=True)
    transformers = pytest.importorskip("transformers", reason="needs transformers for its Phi-3")
    return thunder, transformers


def _model(transformers):
    torch.manual_seed(0)
    config = transformers.Phi3Config(
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=VOCAB,
        max_position_embeddings=SEQ,
    )
    config._attn_implementation = "sdpa"
    model = transformers.Phi3ForCausalLM(config).to("cuda", torch.bfloat16)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
    return model, lambda m: m(input_ids=ids, labels=ids).loss


@pytest.mark.gpu
@pytest.mark.parametrize("with_eqsat, ran", [(False, "masked"), (True, "causal")])
def test_a_training_step_runs_attention_on_cudnn_and_causal_where_eqsat_marks_the_mask(with_eqsat, ran):
    _, transformers = _setup()
    from thunder.dynamo import ThunderCompiler

    from eqsat.thunder.cudnn_attention import CALLS

    model, loss_fn = _model(transformers)
    want_loss, want_grads = training_step(copy.deepcopy(model).float(), loss_fn)
    transforms = [et.Optimize()] if with_eqsat else []
    executors = et.executors()
    torch._dynamo.reset()
    CALLS.clear()
    compiled = torch.compile(model, backend=ThunderCompiler(transforms=transforms, executors=executors))
    loss, grads = training_step(compiled, loss_fn)
    torch.cuda.synchronize()
    # both layers' attention, forward and backward (the forward's mask, saved detached)
    assert dict(CALLS) == {f"forward {ran}": 2, f"backward {ran}": 2}, dict(CALLS)
    assert off_from_eager(loss, grads, want_loss, want_grads) == {}
