import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True, scope="session")
def _work_dir(tmp_path_factory):
    """Kernels compile into ./build/ of the current directory: keep that out of the checkout."""
    old = os.getcwd()
    os.environ.pop("ASCEND_WORK_PATH", None)
    os.chdir(tmp_path_factory.mktemp("work"))
    yield
    os.chdir(old)
