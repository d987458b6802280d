"""show() draws `thread:local` grids (Tilus figure 4); plot() writes a PNG or explains what is missing."""

from __future__ import annotations

import builtins

import pytest

from tilecraft.layout import local, replicate, spatial

LOCAL_2_3 = """\
    0   1   2
0 0:0 0:1 0:2
1 0:3 0:4 0:5"""

SPATIAL_2_3 = """\
    0   1   2
0 0:0 1:0 2:0
1 3:0 4:0 5:0"""


def test_show_draws_the_primitive_layouts_of_tilus_figure_4():
    assert local(2, 3).show() == LOCAL_2_3
    assert spatial(2, 3).show() == SPATIAL_2_3


def test_show_returns_a_string_whose_repr_is_the_grid():
    grid = local(2, 3).show()
    assert isinstance(grid, str) and repr(grid) == LOCAL_2_3


def test_show_lists_replicated_threads_as_runs():
    text = local(2, 1).spatial(8, 4).local(1, 2).reduce(1).show()
    assert text.splitlines()[1].split() == ["0", "0-3:0"]
    assert text.splitlines()[-1].split() == ["15", "28-31:1"]
    assert spatial(2).replicate(2).show().splitlines()[1].split() == ["0", "0,1:0", "2,3:0"]
    assert replicate(2).spatial(2).show().splitlines()[1].split() == ["0", "0,2:0", "1,3:0"]


def test_show_prints_one_grid_per_leading_index_for_rank_3():
    text = spatial(2, 1, 2).show()
    assert text.startswith("[0, :, :]") and "[1, :, :]" in text


def test_show_prints_rank_1_as_one_row():
    assert spatial(4).show().splitlines()[1].split() == ["0", "0:0", "1:0", "2:0", "3:0"]


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "acc.png"
    local(2, 1).spatial(8, 4).local(1, 2).plot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_says_how_to_install_it(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        spatial(2, 2).plot(str(tmp_path / "x.png"))
