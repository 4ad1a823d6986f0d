"""Adversarial try (adv23) of ``merge`` as a user running sharded evals in CI meets it (docs/ci.md "Sharding and
merging"): the real CLI, real SQLite files, real processes."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.reliability_helpers import cli_env, query, run_cli, write_project

AGENT = """
def generate(input, **options):
    if input == "bad":
        return "no"
    return "answer " + input
"""


def _two_datasets(folder: Path) -> None:
    """a.yaml: 8 items over 3 shards (each shard holds some); b.yaml: one item, b0, in shard 1 of 3 (shards 2 and 3
    of b are empty: no run of b is stored in their databases), and it fails its gate."""
    data = "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(8))
    write_project(folder, agent=AGENT, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + data,
                  dataset_name="a.yaml")
    write_project(folder, agent=AGENT, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n"
                                               "  - {id: b0, input: bad}\n", dataset_name="b.yaml")
    for shard in (1, 2, 3):
        done = run_cli(["run", "a.yaml", "b.yaml", "-q", "--shard", f"{shard}/3", "--db", f"s-{shard}.db"], folder,
                       cli_env())
        assert done.returncode in (0, 1), done.stderr


def test_a_dataset_the_first_shard_database_lacks_is_not_dropped(tmp_path: Path) -> None:
    """b's only conversation is in shard 1 and fails. Named with s-2.db first (it holds no run of b: its shard of b is
    empty), merge took the datasets from s-2.db alone: it merged a, dropped b without a word and exited 0, where the
    unsharded run fails (exit 1). Every shard database's datasets are merged."""
    _two_datasets(tmp_path)
    whole = run_cli(["run", "a.yaml", "b.yaml", "-q", "--db", "whole.db"], tmp_path, cli_env())
    assert whole.returncode == 1, whole.stderr
    merged = run_cli(["merge", "s-2.db", "s-1.db", "s-3.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 1, (merged.stdout, merged.stderr)
    assert sorted(Path(d).name for (d,) in query(tmp_path / "all.db", "SELECT dataset FROM runs")) == ["a.yaml", "b.yaml"]


def test_an_empty_shard_of_one_dataset_does_not_refuse_the_merge(tmp_path: Path) -> None:
    """Named with s-1.db first, merge refused (exit 2: 's-2.db holds no run of dataset b.yaml'), though shards 2 and 3
    of b hold no conversation ('an empty one is no loss', docs/ci.md). It merges, as the unsharded run does (exit 1)."""
    _two_datasets(tmp_path)
    merged = run_cli(["merge", "s-1.db", "s-2.db", "s-3.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 1, (merged.stdout, merged.stderr)
    assert sorted(Path(d).name for (d,) in query(tmp_path / "all.db", "SELECT dataset FROM runs")) == ["a.yaml", "b.yaml"]


SECRET_OPTION = """target: agent:generate
target_options: {api_key: "${MY_API_KEY}"}
gates: [{includes: answer}]
data:
""" + "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(6))


def test_shards_run_with_another_api_key_merge_whatever_their_digest_key(tmp_path: Path) -> None:
    """Each shard job has its own API key (spread over rate limits): the conversations are scored the same. With
    their own digest keys (EVALCLI_DIGEST_KEY per job, or two machines' key files) the shards merged; with one
    digest key (a CI secret, as docs/secrets.md advises) the same shards were refused naming target_options.api_key.
    A secret-bearing leaf is compared without its secrets either way; no secret is ever printed."""
    write_project(tmp_path, agent=AGENT, dataset=SECRET_OPTION)
    keys = {"1": "sk-first-job-0123456789", "2": "sk-second-job-9876543210"}
    for pair, digest_keys in (("same", ("K", "K")), ("own", ("K1", "K2"))):
        for shard, digest_key in zip(("1", "2"), digest_keys, strict=True):
            done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/2", "--db", f"{pair}-{shard}.db"], tmp_path,
                           cli_env(MY_API_KEY=keys[shard], EVALCLI_DIGEST_KEY=digest_key))
            assert done.returncode == 0, done.stderr
    for pair in ("own", "same"):
        merged = run_cli(["merge", f"{pair}-1.db", f"{pair}-2.db", "--out", f"{pair}.db"], tmp_path, cli_env())
        assert not any(key in merged.stdout + merged.stderr for key in keys.values())
        assert merged.returncode == 0, (pair, merged.stderr)


def test_every_shard_database_merges_when_some_shards_are_empty(tmp_path: Path) -> None:
    """3 conversations over 5 shards: 2 or more shards hold none and store no run. A CI job that downloads every
    shard's database and merges them all (``merge shard-*.db``, as docs/ci.md shows) was refused ('s-N.db holds no
    runs'), though each shard knows which of the split hold a conversation, so an empty one is no loss. It merges
    (the unsharded scores); a database without a run whose shard held conversations is still refused, naming it."""
    write_project(tmp_path, agent=AGENT, dataset="target: agent:generate\ngates: [{includes: answer}]\ndata:\n"
                  + "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(3)))
    for shard in range(1, 6):
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/5", "--db", f"s-{shard}.db"], tmp_path, cli_env())
        assert done.returncode == 0, done.stderr
    dbs = [f"s-{shard}.db" for shard in range(1, 6)]
    empty = [db for db in dbs if query(tmp_path / db, "SELECT count(*) FROM runs") == [(0,)]]
    assert len(empty) >= 2
    merged = run_cli(["merge", *dbs, "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 0, merged.stderr
    assert query(tmp_path / "all.db", "SELECT count(*) FROM items") == [(3,)]
    held = next(db for db in dbs if db not in empty)
    shutil.copy(tmp_path / empty[0], tmp_path / held)  # its job died before storing a run
    refused = run_cli(["merge", *dbs, "--out", "none.db"], tmp_path, cli_env())
    assert refused.returncode == 2 and "missing" in refused.stderr, refused.stderr


def test_shards_run_from_two_checkout_directories_merge(tmp_path: Path) -> None:
    """Two CI runners check the repository out under different directories (GitLab's /builds/<runner>/...): the shards
    ran the same dataset file (same content, same relative path, same target), yet merge refused them ('s-2.db holds
    no run of dataset /.../one/ds.yaml'), since a run's dataset is the file's absolute path."""
    dataset = "target: agent:generate\ngates: [{includes: answer}]\ndata:\n" + \
        "".join(f"  - {{id: i{n}, input: q{n}}}\n" for n in range(6))
    for shard, checkout in ((1, "one"), (2, "two")):
        write_project(tmp_path / checkout, agent=AGENT, dataset=dataset)
        done = run_cli(["run", "ds.yaml", "-q", "--shard", f"{shard}/2", "--db", f"../s-{shard}.db"], tmp_path / checkout,
                       cli_env())
        assert done.returncode == 0, done.stderr
    merged = run_cli(["merge", "s-1.db", "s-2.db", "--out", "all.db"], tmp_path, cli_env())
    assert merged.returncode == 0, merged.stderr
    assert query(tmp_path / "all.db", "SELECT count(*) FROM items") == [(6,)]
