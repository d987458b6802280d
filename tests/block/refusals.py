"""The check the language-feature tests share: building or compiling raises the expected TC
code, located at the test's own line marked `# ERR`."""

import pytest

from tilecraft.diagnostics import TilecraftError


def refused(factory, code: str) -> TilecraftError:
    with pytest.raises(TilecraftError) as info:
        factory()
    err = info.value
    assert err.code == code, err
    assert "# ERR" in err.span.source_line(), err.span.source_line()
    return err
