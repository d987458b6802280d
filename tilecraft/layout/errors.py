"""`LayoutError`: raised by the layout algebra when an operation has no answer.

The layout library sits below the IR and knows nothing about user source spans; passes that call it
catch `LayoutError` and re-raise a catalogued `TilecraftError` at the user's line.
"""

from __future__ import annotations


class LayoutError(ValueError):
    """A layout operation is undefined for its operands (e.g. `a / b` when `b` does not divide `a`)."""
