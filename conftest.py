"""pytest, for the whole repository: how `make test` shares its work between xdist workers.

With `--dist loadfile`, xdist gives each file to one worker. Here a chapter's notebooks count as
one unit instead: one worker runs them in order, 01 first, as `reprobook run` does. A later
notebook then loads the models the earlier ones trained, instead of a second worker training
the same model at the same moment, and it sees what they recorded. Every other test file stays
a unit of its own. xdist hands out the units with the most items first, so the chapters start
early and short test files fill the end.
"""

from __future__ import annotations


def unit_of(nodeid: str) -> str:
    """A chapter's folder for the cells of its notebooks; the file for anything else."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) == 3 and parts[0] == "notebooks" and parts[2].endswith(".ipynb"):
        return f"notebooks/{parts[1]}"
    return path


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ChapterScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return ChapterScheduling(config, log)
