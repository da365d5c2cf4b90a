import pytest
from hypothesis import settings

pytest_plugins = ["tests.support.s3", "tests.support.emulators", "tests.support.spark35", "tests.spark.plugin"]

# property tests assert results, never speed: no per-example deadline (a loaded CI machine is not a failure)
settings.register_profile("ckptfix", deadline=None)
settings.load_profile("ckptfix")


def pytest_sessionstart(session: pytest.Session) -> None:
    """The CLI's fork server (tests/support/cli.py), forked before any test has run in this process; not in
    pytest-xdist's controller, which runs no test."""
    config = session.config
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        return
    from tests.support import cli

    cli.start_server()
