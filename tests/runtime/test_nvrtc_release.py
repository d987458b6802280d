"""The jit key's NVRTC release comes from the installed wheel's dist-info folder, with no library
load, and follows a change of that wheel."""

import importlib.metadata
import sys

import pytest

from tilecraft.runtime import nvrtc


def test_the_release_is_the_installed_wheels_version():
    try:
        want = importlib.metadata.version("nvidia-cuda-nvrtc")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no nvidia-cuda-nvrtc wheel here")
    assert f"nvidia-cuda-nvrtc {want}" in nvrtc._nvrtc_dist_infos()


def test_another_wheel_beside_the_nvidia_package_changes_the_release(tmp_path, monkeypatch):
    (tmp_path / "nvidia").mkdir()
    (tmp_path / "nvidia_cuda_nvrtc_cu12-12.9.86.dist-info").mkdir()
    before = nvrtc._nvrtc_dist_infos()
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.delitem(sys.modules, "nvidia", raising=False)
    after = nvrtc._nvrtc_dist_infos()
    assert "nvidia-cuda-nvrtc-cu12 12.9.86" in after and after != before
