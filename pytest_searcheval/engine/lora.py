"""Low-rank adapters over the packaged MiniLM weights, merged into them at load.

An adapter file (safetensors) holds, for each adapted linear layer ``NAME`` of the BERT encoder,
``NAME.lora_a`` (r x in) and ``NAME.lora_b`` (out x r); its metadata holds ``scale`` (alpha / r).
Loading adds ``scale * lora_b @ lora_a`` to ``NAME.weight``: the adapted model is an ordinary
BERT model afterwards, so encoding costs what the packaged model costs. Other tensors in the
file (``NAME.full``) replace a parameter outright (a classification head, say).

Written here rather than taken from ``peft``: merging is ten lines, and ``peft`` would bring
``accelerate`` into the engine extra for a model that, once merged, needs neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SUFFIX_A = ".lora_a"
SUFFIX_B = ".lora_b"
SUFFIX_FULL = ".full"


class AdapterError(ValueError):
    """An adapter file that does not fit the model it is applied to."""


def merge(module: Any, path: Path) -> dict[str, str]:
    """Apply the adapter at ``path`` to the torch ``module`` in place; returns its metadata."""
    import torch
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata() or {})
        keys = list(f.keys())
        tensors = {k: f.get_tensor(k) for k in keys}
    try:
        scale = float(meta["scale"])
    except (KeyError, ValueError) as exc:
        raise AdapterError(f"{path}: metadata 'scale' missing or not a number") from exc
    params = dict(module.named_parameters())
    bases = sorted({k[: -len(SUFFIX_A)] for k in keys if k.endswith(SUFFIX_A)})
    with torch.no_grad():
        for name in bases:
            weight = params.get(f"{name}.weight")
            b = tensors.get(name + SUFFIX_B)
            if weight is None or b is None:
                raise AdapterError(
                    f"{path}: {name} is not a linear layer of the model, or has no B"
                )
            delta = scale * (b.float() @ tensors[name + SUFFIX_A].float())
            if delta.shape != weight.shape:
                raise AdapterError(
                    f"{path}: {name} delta is {tuple(delta.shape)}, weight {tuple(weight.shape)}"
                )
            weight.add_(delta.to(weight.dtype))
        for key in keys:
            if key.endswith(SUFFIX_FULL):
                name = key[: -len(SUFFIX_FULL)]
                if name not in params or params[name].shape != tensors[key].shape:
                    raise AdapterError(f"{path}: {name} is not a parameter of that shape")
                params[name].copy_(tensors[key].to(params[name].dtype))
    return meta
