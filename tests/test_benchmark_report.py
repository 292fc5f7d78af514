"""benchmarks/report.py: the tables of docs/benchmarks.md come from the JSON-lines results."""

import json
import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks import report  # noqa: E402  pylint: disable=wrong-import-position


def _training_record(impl, xla, seq_per_sec, run_id="r2", round_index=0, size="bert_base",
                     date="2026-11-30"):
    return {"benchmark": "bench_training", "run_id": run_id, "round": round_index,
            "timestamp": date + "T00:00:00+00:00",
            "config": {"impl": impl, "size": size, "batch_size": 8,
                       "precision": "fp32", "xla": xla, "steps_per_loop": 1},
            "resolved": {"xla": "off", "steps_per_loop": 100} if xla == "default" else None,
            "seq_per_sec": seq_per_sec, "peak_mb": 4000.0, "training_mb": 1500.0,
            "final_loss": 10.4,
            "machine": {"cpu_model": "Test CPU", "cores": 2,
                        "cpu_flags": {"avx512_bf16": True, "amx_bf16": False}},
            "versions": {"tensorflow": "2.21.0"}}


def test_training_table_uses_the_latest_run_and_ratios_to_the_best_peer(tmp_path, monkeypatch):
    records = [_training_record("ours", "off", 99.0, run_id="r1"),  # an older run: ignored
               _training_record("keras_hub", "on", 3.0), _training_record("hf_torch", "off", 2.0),
               _training_record("ours", "default", 3.3),
               _training_record("ours", "default", 3.9, round_index=1),
               _training_record("ours", "default", 3.6, round_index=2)]
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(report, "RESULTS", str(tmp_path))
    table = report.training_table()
    rows = [line for line in table.splitlines() if line.startswith("| BERT-base")]
    assert len(rows) == 3  # r1's record is not in the latest run
    ours = [r for r in rows if "this project" in r][0]
    # Median of 3.3, 3.9, 3.6 is 3.6; best peer 3.0: 1.20x.
    assert "| 3.60 | 1.20x |" in ours and "default (off)" in ours and "default (100)" in ours
    assert "Test CPU, 2 cores, CPU flags avx512_bf16;" in table
    assert report.inference_table() is None  # no results: no table

    # The CPU-settings rows: keras-hub with our settings is shown but is not
    # the baseline; ours with malloc gets its ratio to the idiomatic peers.
    with_allocators = records + [_training_record("keras_hub_cpu_runtime", "on", 5.0),
                                 _training_record("ours_malloc", "default", 2.4)]
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in with_allocators))
    rows = [line for line in report.training_table().splitlines()
            if line.startswith("| BERT-base")]
    assert len(rows) == 5
    assert "| 3.60 | 1.20x |" in [r for r in rows if "| this project |" in r][0]
    assert "| 2.40 | 0.80x |" in [r for r in rows if "(malloc)" in r][0]
    keras_bfc = [r for r in rows if "keras-hub" in r and "CPU settings" in r][0]
    assert "| 5.00 |  |" in keras_bfc

    # A later run of one size only (--only=bert_tiny): that size's rows come
    # from it, the other size's from the run before; never a mix in one size.
    records = [_training_record("ours", "off", 50.0, run_id="r1", size="bert_tiny")] + records
    records += [_training_record("ours", "default", 12.0, run_id="r3", size="bert_tiny",
                                 date="2026-12-01"),
                _training_record("keras_hub", "on", 10.0, run_id="r3", size="bert_tiny",
                                 date="2026-12-01")]
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    table = report.training_table()
    tiny = [line for line in table.splitlines() if line.startswith("| BERT-tiny")]
    base = [line for line in table.splitlines() if line.startswith("| BERT-base")]
    assert len(tiny) == 2 and len(base) == 3
    assert "| 12.0 | 1.20x |" in [r for r in tiny if "this project" in r][0]
    assert "| 3.60 | 1.20x |" in [r for r in base if "this project" in r][0]
    assert "(BERT-tiny: 1 rounds, 2026-12-01; BERT-base: 3 rounds, 2026-11-30)" in table
    assert table.index("| BERT-tiny") < table.index("| BERT-base")
    assert table.count("Machine:") == 1  # the same machine for both sizes

    # BERT-tiny re-measured on another machine: each size names its own.
    for record in records[-2:]:
        record["machine"] = {"cpu_model": "Other CPU", "cores": 2, "cpu_flags": {"avx2": True}}
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    table = report.training_table()
    assert "BERT-tiny: Machine: Other CPU, 2 cores, CPU flags avx2;" in table
    assert "BERT-base: Machine: Test CPU, 2 cores, CPU flags avx512_bf16;" in table


def _page():
    with open(os.path.join(REPO_ROOT, "docs", "benchmarks.md"), encoding="utf-8") as f:
        return f.read()


def test_report_writes_the_generated_benchmarks_page_not_the_readme():
    assert report.PAGE == os.path.join(REPO_ROOT, "docs", "benchmarks.md")
    # The page says at its top that its tables are generated, and by what.
    top = _page()[:600]
    assert "generated" in top and "benchmarks/report.py --write" in top
    with open(os.path.join(REPO_ROOT, "README.md"), encoding="utf-8") as f:
        assert "<!-- report:" not in f.read()


def test_report_page_has_every_table_marker_and_replacement_keeps_the_rest():
    text = _page()
    tables = {name: "TABLE %s" % name for name in report.TABLES}
    updated = report.replace_in_page(text, tables)
    for name in report.TABLES:
        assert "<!-- report:%s -->\nTABLE %s\n<!-- /report:%s -->" % (name, name, name) in updated
    # Only the text between the markers changed.
    again = report.replace_in_page(updated, {n: "" for n in report.TABLES})
    assert again == report.replace_in_page(text, {n: "" for n in report.TABLES})
    with pytest.raises(ValueError, match="docs/benchmarks.md has no .*report:missing"):
        report.replace_in_page(text, {"missing": "x"})


def test_report_page_holds_the_tables_of_the_recorded_results():
    """The page is generated: its tables are what `report.py --write` makes of the results."""
    text = _page()
    assert report.replace_in_page(text, report.render()) == text, (
        "docs/benchmarks.md is out of date: run python benchmarks/report.py --write")
