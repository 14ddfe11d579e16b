"""A coordinator and workers with TLS and a bearer token."""

import pytest

import cluster as cluster_mod
import jobs
import lockstep


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("secure"))
    certs = cluster_mod.make_certs(folder)
    c = cluster_mod.Cluster(folder, workers=2, certs=certs,
                            token="s3cret-token")
    yield c
    c.stop()


def test_tls_and_token_train_and_read_back(secure, tmp_path):
    jobs.write_csv(str(tmp_path), 8)
    client = secure.client()  # tls_ca and token_file from the cluster
    job = client.submit(jobs.mlp_job("py-tls", str(tmp_path), epochs=1),
                        data_dir=str(tmp_path))
    result = job.wait(progress=False, timeout=120)
    assert result["steps"] == 8
    assert sorted(job.checkpoint()) == ["dense.bias", "dense.weight",
                                        "dense_1.bias", "dense_1.weight"]


def test_a_wrong_or_missing_token_is_unauthenticated(secure, monkeypatch):
    monkeypatch.delenv("LOCKSTEP_TOKEN", raising=False)
    wrong = lockstep.Client(secure.address, tls_ca=secure.certs["ca.pem"],
                            token="nope", lockstep_binary=False)
    with pytest.raises(lockstep.Unauthenticated) as e:
        wrong.jobs()
    assert e.value.code == "UNAUTHENTICATED"
    none = lockstep.Client(secure.address, tls_ca=secure.certs["ca.pem"],
                           lockstep_binary=False)
    with pytest.raises(lockstep.Unauthenticated):
        none.jobs()
    monkeypatch.setenv("LOCKSTEP_TOKEN", "s3cret-token")
    from_env = lockstep.Client(secure.address, tls_ca=secure.certs["ca.pem"],
                               lockstep_binary=False)
    # $LOCKSTEP_TOKEN is the default, as for the CLI.
    assert [j.name for j in from_env.jobs()] == [
        j.name for j in secure.client().jobs()]


def test_plaintext_to_a_tls_coordinator_is_unavailable(secure):
    client = lockstep.Client(secure.address, token="s3cret-token", timeout=3,
                             lockstep_binary=False)
    with pytest.raises(lockstep.Unavailable) as e:
        client.jobs()
    assert secure.address in str(e.value)
