"""engine/lora.py: an adapter merged into a model equals the model with the adapter beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")

from pytest_searcheval.engine import lora  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(6, 4)
        self.head = torch.nn.Linear(4, 1)


def test_merge_adds_the_low_rank_delta_and_replaces_full_tensors(tmp_path: Path) -> None:
    model = Tiny()
    a, b = torch.randn(2, 6), torch.randn(4, 2)
    head = torch.randn(1, 4)
    path = tmp_path / "adapter.safetensors"
    safetensors_torch.save_file(
        {"proj.lora_a": a, "proj.lora_b": b, "head.weight.full": head},
        str(path),
        metadata={"scale": "0.5", "null": "0.4"},
    )
    x = torch.randn(3, 6)
    expected = model.proj(x) + 0.5 * (x @ a.T @ b.T)
    meta = lora.merge(model, path)
    assert meta["null"] == "0.4"
    assert torch.allclose(model.proj(x), expected, atol=1e-6)
    assert torch.equal(model.head.weight.data, head)


@pytest.mark.parametrize(
    ("tensors", "meta", "message"),
    [
        ({"proj.lora_a": torch.zeros(2, 6), "proj.lora_b": torch.zeros(4, 2)}, {}, "scale"),
        (
            {"nope.lora_a": torch.zeros(2, 6), "nope.lora_b": torch.zeros(4, 2)},
            {"scale": "1"},
            "nope is not a linear layer",
        ),
        (
            {"proj.lora_a": torch.zeros(2, 5), "proj.lora_b": torch.zeros(4, 2)},
            {"scale": "1"},
            "delta is (4, 5), weight (4, 6)",
        ),
        ({"head.weight.full": torch.zeros(2, 2)}, {"scale": "1"}, "head.weight is not"),
    ],
)
def test_an_adapter_that_does_not_fit_is_refused_by_name(
    tmp_path: Path, tensors: dict[str, object], meta: dict[str, str], message: str
) -> None:
    path = tmp_path / "bad.safetensors"
    safetensors_torch.save_file(tensors, str(path), metadata=meta)
    with pytest.raises(lora.AdapterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        lora.merge(Tiny(), path)
