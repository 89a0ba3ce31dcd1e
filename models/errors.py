"""The one exception type for bad input anywhere in the workbench.

Raised with a one-line message that says what was wrong and what is accepted; the CLI turns it into exit code 2.
"""


class InputError(ValueError):
    """Bad user input (unknown name, malformed shape, impossible parameter)."""


def unknown(kind: str, value: object, valid: list[str] | tuple[str, ...]) -> InputError:
    """An InputError for an unknown name, listing the valid ones."""
    return InputError(f"unknown {kind} {value!r}; valid: {', '.join(sorted(valid))}")
