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

    # BERT-tiny re-measured on another machine of the same kind: each size
    # names its own machine.
    for record in records[-2:]:
        record["machine"] = {"cpu_model": "Other CPU", "cores": 2,
                             "cpu_flags": {"avx512_bf16": True}}
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    table = report.training_table()
    assert "BERT-tiny: Machine: Other CPU, 2 cores, CPU flags avx512_bf16;" in table
    assert "BERT-base: Machine: Test CPU, 2 cores, CPU flags avx512_bf16;" in table

    # ... and on a machine of another kind: a table of its own, never mixed.
    for record in records[-2:]:
        record["machine"] = {"cpu_model": "Other CPU", "cores": 2, "cpu_flags": {"avx2": True}}
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    table = report.training_table()
    bf16_part, avx2_part = table.split("#### Machine kind `avx2`: avx2")
    assert bf16_part.startswith("#### Machine kind `avx512-bf16`: avx512_bf16")
    # The avx512-bf16 kind keeps its own latest BERT-tiny run (r1).
    assert "| 50.0 |" in bf16_part and "| 12.0 |" not in bf16_part
    assert "| 12.0 | 1.20x |" in avx2_part and "BERT-base" not in avx2_part.split("\n\n")[1]
    assert "No measurement yet on: `amx`, `avx512`." in table


def _peak(fp32, bf16):
    return {"fp32_gflops": fp32, "bf16_gflops": bf16, "matmul": "2048^3 test matmul"}


def test_fraction_of_peak_is_the_runs_flops_per_second_over_its_best_peak(tmp_path,
                                                                          monkeypatch):
    from benchmarks import common  # pylint: disable=import-outside-toplevel
    flops = common.bert_flops(12, 768, 3072, 128, 30522, 20) * 8
    records = []
    for precision, impl, seq, peak in (("fp32", "ours", 2.0, _peak(100.0, 200.0)),
                                       ("fp32", "hf_torch", 1.0, _peak(140.0, 250.0)),
                                       ("bf16", "ours", 3.0, _peak(120.0, 300.0))):
        record = _training_record(impl, "off", seq, run_id="r9")
        record["config"]["precision"] = precision
        record.update(flops_per_step=flops, peak=peak, load_average=[3.5, 3.0, 2.0])
        records.append(record)
    old = _training_record("ours", "off", 9.0, run_id="r0", size="bert_tiny")  # no peak
    old["machine"] = {"cpu_model": "Old CPU", "cores": 2}  # no CPU flags either
    (tmp_path / "bench_training.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in [old] + records))
    monkeypatch.setattr(report, "RESULTS", str(tmp_path))
    table = report.training_table()
    # The run's best peak: 140 GFLOP/s fp32, 300 bf16.
    fp32_fraction = 2.0 / 8 * flops / 1e9 / 140.0
    bf16_fraction = 3.0 / 8 * flops / 1e9 / 300.0
    rows = [line for line in table.splitlines() if line.startswith("| BERT-base")]
    assert "| 2.00 | 2.00x | %.0f%% |" % (100 * fp32_fraction) in rows[0]
    assert "| 3.00 |  | %.0f%% |" % (100 * bf16_fraction) in rows[2]
    assert "Matrix-product peak 140 GFLOP/s fp32, 300 bf16" in table and "load average 3.5-3.5" in table
    # The record without CPU flags: an "unknown machine" table, without a fraction.
    assert "#### Unknown machine" in table
    unknown = table.split("#### Unknown machine")[1]
    assert "| BERT-tiny, 8 | fp32 | this project | off | 1 | 9.00 |  |  |" in unknown
    assert "The matrix-product peak was not measured" in unknown
    assert common.FLOP_FORMULA in table

    # docs/speed.md's flag table reads the same rows.
    flags = report.flags_table()
    assert "| `--mixed_precision=bfloat16` |" not in flags or "not in the latest run" in flags
    assert flags.count("#### ") == 2


def test_length_batching_table_compares_the_four_cases_of_the_latest_run(tmp_path,
                                                                        monkeypatch):
    def record(seq, trim, seconds, width, run_id="r2", load=1.9):
        return {"benchmark": "bench_length_batching", "run_id": run_id,
                "timestamp": "2026-12-04T00:00:00+00:00", "size": "bert_mini", "batch": 32,
                "max_seq_length": seq, "trim_batches": trim, "step_seconds_median": seconds,
                "sequences_per_second": 32 / seconds, "mean_padded_width": width,
                "rounds": 2, "mfu_fp32": 0.25,
                "peak": dict(_peak(100.0, 200.0), load_average=[load]),
                "machine": {"cpu_model": "Test CPU", "cores": 2,
                            "cpu_flags": {"avx512_bf16": True}}}

    records = [record(48, False, 9.0, 48.0, run_id="r1"),  # an older run: ignored
               record(48, False, 0.4, 48.0), record(48, True, 0.32, 37.5),
               record(256, False, 2.0, 256.0), record(256, True, 0.4, 37.5)]
    (tmp_path / "bench_length_batching.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(report, "RESULTS", str(tmp_path))
    table = report.length_batching_table()
    rows = [line for line in table.splitlines() if line.startswith("| 48 |")
            or line.startswith("| 256 |")]
    assert rows == ["| 48 | off | 48.0 | 400 | 80.0 | 1.00x | 25% |",
                    "| 48 | on | 37.5 | 320 | 100.0 | 1.25x | 25% |",
                    "| 256 | off | 256.0 | 2000 | 16.0 | 0.20x | 25% |",
                    "| 256 | on | 37.5 | 400 | 80.0 | 1.00x | 25% |"]
    # 2.0 / 0.4 and 0.4 / 0.32.
    assert "trimming makes a step 5.00x faster; 256 trimmed costs 1.25x" in table
    assert "the machine ran the benchmark alone" in table
    records[-1]["peak"]["load_average"] = [6.0]  # another job on 2 cores
    (tmp_path / "bench_length_batching.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    assert "Other jobs ran on the machine" in report.length_batching_table()


def test_machine_kinds_come_from_the_cpu_flags():
    from benchmarks import common  # pylint: disable=import-outside-toplevel
    assert common.machine_kind({"avx2": True, "avx512f": True, "avx512_bf16": True,
                                "amx_bf16": True, "amx_tile": True}) == "amx"
    assert common.machine_kind({"avx2": True, "avx512f": True, "avx512_bf16": True}) == \
        "avx512-bf16"
    assert common.machine_kind({"avx2": True, "avx512f": True}) == "avx512"
    assert common.machine_kind({"avx2": True, "avx512f": False}) == "avx2"
    assert common.machine_kind({"avx2": False}) == "other"
    assert common.machine_kind(None) == "unknown"
    best = common.best_peak(_peak(100.0, None), _peak(90.0, None), None)
    assert (best["fp32_gflops"], best["bf16_gflops"], best["measurements"]) == (100.0, None, 2)
    assert common.mfu(50e9, 1.0, best, "fp32") == 0.5 and common.mfu(1, 1, best, "bf16") is None
    # BERT-base: 69.9 GFLOP per trained sequence, 5.13 per inferred sentence of 30 tokens.
    assert round(common.bert_flops(12, 768, 3072, 128, 30522, 20) / 1e9, 1) == 69.9
    assert round(common.bert_flops(12, 768, 3072, 30, training=False,
                                   next_sentence=False) / 1e9, 2) == 5.13


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


def test_report_pages_hold_the_tables_of_the_recorded_results():
    """The pages are generated: their tables are what `report.py --write` makes of the results."""
    for page in report.PAGES:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        assert report.replace_in_page(text, report.render(page), page) == text, (
            "%s is out of date: run python benchmarks/report.py --write" % page)
