"""resolve_device: the one place a device argument becomes a torch.device."""

from __future__ import annotations

import importlib

import pytest
import torch

import spector_gpu.device as device_mod
from spector_gpu.device import resolve_device
from spector_gpu.errors import DeviceUnavailableError, ValidationError


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)


@pytest.mark.parametrize("arg", [None, "auto", "AUTO", " auto "])
def test_auto_without_cuda_is_cpu(no_cuda: None, arg: str | None) -> None:
    assert resolve_device(arg) == torch.device("cpu")


@pytest.mark.parametrize("arg", [None, "auto"])
def test_auto_with_cuda_is_cuda(two_gpus: None, arg: str | None) -> None:
    assert resolve_device(arg) == torch.device("cuda", 0)


@pytest.mark.parametrize("arg", ["cpu", torch.device("cpu"), "CPU"])
def test_cpu(arg: str | torch.device) -> None:
    assert resolve_device(arg) == torch.device("cpu")


@pytest.mark.parametrize("arg", ["cuda", "cuda:0", torch.device("cuda")])
def test_explicit_cuda_without_cuda_raises_with_fix(no_cuda: None, arg: str | torch.device) -> None:
    with pytest.raises(DeviceUnavailableError, match='device="cpu"'):
        resolve_device(arg)


def test_cuda_index_resolution(two_gpus: None) -> None:
    assert resolve_device("cuda") == torch.device("cuda", 0)
    assert resolve_device("cuda:1") == torch.device("cuda", 1)
    with pytest.raises(DeviceUnavailableError, match="only 2 are visible"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("arg", ["tpu", "mps", "", "cuda:x", "gpu", 0, 1.5, ["cpu"]])
def test_anything_else_is_a_validation_error(arg: object) -> None:
    with pytest.raises(ValidationError):
        resolve_device(arg)  # type: ignore[arg-type]


def test_import_does_not_probe_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> bool:
        raise AssertionError("CUDA probed at import time")

    monkeypatch.setattr(torch.cuda, "is_available", boom)
    importlib.reload(device_mod)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_cuda() -> None:
    assert resolve_device("cuda").type == "cuda"
    assert resolve_device(None).type == "cuda"
