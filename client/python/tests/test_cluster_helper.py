"""The test cluster's own guarantee: a sanitizer report in a daemon's log
fails the tests that used it (under --config=tsan a report ends the process,
which a test expecting a lost worker would take for its own fault)."""

import pytest

import cluster as cluster_mod


def bare_cluster(folder):
    c = cluster_mod.Cluster.__new__(cluster_mod.Cluster)
    c.folder, c.coordinator, c.workers, c.logs = str(folder), None, [], []
    return c


def test_a_sanitizer_report_in_a_log_fails_the_cluster(tmp_path):
    (tmp_path / "coordinator.log").write_text("listening on 127.0.0.1:1\n")
    (tmp_path / "worker1.log").write_text(
        "registered with 127.0.0.1:1\n==================\n"
        "WARNING: ThreadSanitizer: data race (pid=7)\n  Write of size 8\n")
    with pytest.raises(AssertionError) as e:
        bare_cluster(tmp_path).stop()
    assert "worker1.log:\nWARNING: ThreadSanitizer: data race (pid=7)\n" \
        "  Write of size 8" in str(e.value)
    assert "coordinator.log" not in str(e.value)


def test_quiet_logs_pass(tmp_path):
    (tmp_path / "worker0.log").write_text("registered with 127.0.0.1:1\n")
    bare_cluster(tmp_path).stop()

