"""The fleet workflows' one error type."""


class FleetError(ValueError):
    """A rule broken by otherwise well-formed input; `field` names what to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
