"""Layouts holding the same elements per thread in another order: `local_permutation` finds the
reordering (None when elements change threads or the order differs between threads), and
`interleave_words` puts element j of each 32-bit word of b-bit codes at position
(j % 2) * 16/b + j // 2."""

import pytest

from tilecraft.layout import Fragment, LayoutError, local, spatial
from tilecraft.layout.atoms import MMA_M16N8K16_F16
from tilecraft.layout.permute import interleave_permutation, interleave_words, local_permutation


def test_a_layout_is_its_own_identity_permutation():
    f = spatial(8, 4).local(2, 2)
    assert local_permutation(f, f) == (0, 1, 2, 3)


def test_a_transposed_local_order_is_found():
    natural = spatial(4).local(6)
    moved = Fragment.create((24,), (4, 2, 3), (0,), (2, 1))  # element b*3 + c at local c*2 + b
    assert local_permutation(moved, natural) == (0, 2, 4, 1, 3, 5)


def test_elements_that_change_threads_have_no_permutation():
    assert local_permutation(spatial(8, 4).local(4, 2), spatial(32).local(8)) is None
    assert local_permutation(spatial(32).local(8), local(8).spatial(32)) is None


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_interleaved_words_of_the_mma_operand_pair_codes_k_and_k_plus_half(bits):
    natural = spatial(4, 1) * local(2, 1) * local(1, 4) * MMA_M16N8K16_F16.a
    inter = interleave_words(natural, bits)
    perm = local_permutation(inter, natural)
    assert perm == interleave_permutation(natural.local_size, bits)
    per, half = 32 // bits, 16 // bits
    for j in range(per):  # in each word, elements 2k and 2k + 1 sit at positions k and k + half
        assert perm[j] == (j % 2) * half + j // 2
    assert perm[per] == per  # the next word starts where it did


def test_only_whole_words_of_narrow_codes_interleave():
    with pytest.raises(LayoutError):
        interleave_words(spatial(32).local(8), 3)
    with pytest.raises(LayoutError):
        interleave_words(spatial(32).local(4), 4)  # half a word a thread
