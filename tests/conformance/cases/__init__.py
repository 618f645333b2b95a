"""One module per system; each exposes ``CASES: list[SystemCase]``."""

# Importing a case module first (e.g. from an e2e test) must not see ``systems`` half-initialised:
# load ``systems`` here, which defines ``SystemCase`` and then collects every case module.
import tests.conformance.systems  # noqa: F401
