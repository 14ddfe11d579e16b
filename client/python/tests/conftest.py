import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
# The package from this checkout.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cluster as cluster_mod  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = cluster_mod.Cluster(str(tmp_path_factory.mktemp("cluster")))
    yield c
    c.stop()
