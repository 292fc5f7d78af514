"""UNILM: the four attention masks, its pipelines, learning on held-out text, decoding.

The learning runs use budgets fixed before they were first run: pre-training
600 steps of 32 sequences of 32 tokens (learning rate 1e-3), then seq2seq
fine-tuning from that checkpoint for 300 steps; each must beat its unigram
baseline on held-out documents (pre-training by 0.2 nats, the fine-tune by
0.3: the recipe test's margin).
"""

import json
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import script_runner
from data import tokenization
from data.pretraining import masking
from modeling import recipes
from modeling.bert import BertConfig
from modeling.bert import BertEncoder
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.recipes.pipelines.static_masked import StaticMaskedPipeline
from modeling.unilm import decoding
from modeling.unilm import masks
from modeling.unilm import pipelines

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "vocab.txt")
PRETRAIN_STEPS = 600
FINETUNE_STEPS = 300


def _reference_mask(mode, segment_ids, input_mask, target_id=1):
    """The masks as the paper describes them, one (query, key) pair at a time."""
    seq = len(segment_ids)
    out = np.zeros([seq, seq], np.int32)
    for i in range(seq):
        for j in range(seq):
            if not input_mask[j]:
                continue
            if mode == masks.BIDIRECTIONAL:
                out[i, j] = 1
            elif mode == masks.LEFT_TO_RIGHT:
                out[i, j] = j <= i
            elif mode == masks.RIGHT_TO_LEFT:
                out[i, j] = j >= i
            else:  # source sees source; target sees source and its own prefix
                out[i, j] = segment_ids[j] != target_id or (segment_ids[i] == target_id and j <= i)
    return out


def test_masks_match_the_papers_definitions():
    rng = np.random.default_rng(3)
    for _ in range(20):
        seq = int(rng.integers(4, 12))
        source = int(rng.integers(2, seq - 1))
        real = int(rng.integers(source + 1, seq + 1))
        segment_ids = np.array([0] * source + [1] * (seq - source))
        input_mask = np.array([1] * real + [0] * (seq - real))
        modes = np.arange(4)
        got = masks.attention_mask(modes, np.tile(segment_ids, [4, 1]),
                                   np.tile(input_mask, [4, 1])).numpy()
        for mode in modes:
            np.testing.assert_array_equal(got[mode],
                                          _reference_mask(mode, segment_ids, input_mask))


def test_modes_are_drawn_with_the_papers_mix():
    draws = masks.sample_modes(60000, tf.constant([7, 1], tf.int64)).numpy()
    shares = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(shares, masks.PAPER_MIX, atol=0.01)
    again = masks.sample_modes(60000, tf.constant([7, 1], tf.int64)).numpy()
    np.testing.assert_array_equal(draws, again)  # stateless: same seed, same modes


@pytest.fixture(scope="module")
def encoder():
    config = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=32,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertEncoder.from_config_object(config)


def _outputs(encoder, ids, segment_ids, mode):
    mask = masks.attention_mask(mode, segment_ids[None], np.ones_like(segment_ids)[None])
    return encoder({"input_ids": ids[None], "segment_ids": segment_ids[None],
                    "attention_mask": mask}, training=False)["sequence_output"][0].numpy()


def test_what_each_mode_lets_a_token_see_through_the_encoder(encoder):
    rng = np.random.default_rng(0)
    seq, source = 10, 4
    segment_ids = np.array([0] * source + [1] * (seq - source), np.int32)
    ids = rng.integers(5, 60, seq).astype(np.int32)
    base = {mode: _outputs(encoder, ids, segment_ids, mode) for mode in range(4)}
    for t in range(seq):
        changed = ids.copy()
        changed[t] = (changed[t] + 7) % 55 + 5
        for mode in range(4):
            out = _outputs(encoder, changed, segment_ids, mode)
            moved = np.abs(out - base[mode]).max(axis=-1) > 1e-5
            if mode == masks.BIDIRECTIONAL:
                expected = np.ones(seq, bool)
            elif mode == masks.LEFT_TO_RIGHT:  # tokens after t never change outputs at t
                expected = np.arange(seq) >= t
            elif mode == masks.RIGHT_TO_LEFT:
                expected = np.arange(seq) <= t
            elif t < source:  # a source token: every position reads the source
                expected = np.ones(seq, bool)
            else:  # a target token: only itself and the target after it
                expected = np.arange(seq) >= t
            np.testing.assert_array_equal(moved, expected, err_msg="mode %d, t %d" % (mode, t))


def test_unilm_cloze_masks_whole_words_and_some_two_or_three_word_spans():
    strategy = masking.create_masking_strategy("unilm")
    assert strategy.lengths == (1, 2, 3)
    np.testing.assert_allclose(strategy.length_probabilities, (0.8, 0.1, 0.1))
    import random  # pylint: disable=g-import-not-at-top
    rng = random.Random(5)
    counts = np.zeros(4)
    for _ in range(20000):
        counts[strategy.sample_length(rng)] += 1
    np.testing.assert_allclose(counts[1:] / counts.sum(), (0.8, 0.1, 0.1), atol=0.01)


# ------------------------------------------------------------ pre-training run


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    output_dir = str(tmp_path_factory.mktemp("unilm") / "pretrain")
    job = pretraining.PretrainingJob.for_demo(
        recipe="unilm", output_dir=output_dir, max_seq_length=32, max_predictions_per_seq=5,
        num_train_steps=PRETRAIN_STEPS, num_warmup_steps=50, learning_rate=1e-3,
        train_batch_size=32, eval_batch_size=32, max_eval_steps=10,
        save_checkpoints_steps=PRETRAIN_STEPS, log_steps=PRETRAIN_STEPS, steps_per_loop=100)
    return output_dir, pretraining.run(job)


def test_unilm_beats_its_unigram_baseline_on_held_out_documents(pretrained):
    _, results = pretrained
    assert results["global_step"] == PRETRAIN_STEPS
    assert results["masked_lm_loss"] < results["unigram_baseline_masked_lm_loss"] - 0.2, results


def test_the_pipeline_gives_each_example_the_layout_ids_and_mask_of_its_mode(pretrained):
    output_dir, _ = pretrained
    recipe = recipes.load_recipe("unilm")
    options = PipelineOptions(vocab_file=VOCAB, max_seq_length=32, max_predictions_per_seq=5,
                              seed=11)
    pipeline = recipe.build_pipeline(options)
    eval_file = [os.path.join(output_dir, "data", f)
                 for f in os.listdir(os.path.join(output_dir, "data")) if "eval" in f][0]
    first = list(pipeline.baseline_batches(eval_file, 256, 64))
    again = list(pipeline.baseline_batches(eval_file, 256, 64))
    raw = list(StaticMaskedPipeline({}, options).baseline_batches(eval_file, 256, 64))
    sep = tokenization.load_vocab(VOCAB)[tokenization.SEP_TOKEN]
    modes = np.concatenate([b["unilm_mode"] for b in first])
    assert set(modes) == {0, 1, 2, 3}
    # The authors' `--new_segment_ids`: pairs 0/1, left-to-right 2, right-to-left 3,
    # seq2seq 4/5.
    expected_ids = {masks.BIDIRECTIONAL: {0, 1}, masks.LEFT_TO_RIGHT: {2},
                    masks.RIGHT_TO_LEFT: {3}, masks.SEQ2SEQ: {4, 5}}
    for batch, repeat, old in zip(first, again, raw):  # the same masks on every read
        np.testing.assert_array_equal(batch["attention_mask"], repeat["attention_mask"])
        for r, mode in enumerate(batch["unilm_mode"]):
            ids, segments, mask = (batch[k][r] for k in ("input_ids", "segment_ids",
                                                          "input_mask"))
            real = mask > 0
            assert set(segments[real]) == expected_ids[mode]
            assert not segments[~real].any()
            old_ids, old_real = old["input_ids"][r], old["input_mask"][r] > 0
            old_seps = np.flatnonzero(old_ids[old_real] == sep)
            assert len(old_seps) == 2  # every record is a pair [CLS] A [SEP] B [SEP]
            if mode in (masks.LEFT_TO_RIGHT, masks.RIGHT_TO_LEFT):
                # One text stream: the pair without the [SEP] between A and B.
                assert list(np.flatnonzero(ids[real] == sep)) == [real.sum() - 1]
                np.testing.assert_array_equal(ids[real],
                                              np.delete(old_ids[old_real], old_seps[0]))
            else:
                np.testing.assert_array_equal(ids, old_ids)
            # The masked positions still point at the tokens they predict.
            weights = batch["masked_lm_weights"][r] > 0
            np.testing.assert_array_equal(weights, old["masked_lm_weights"][r] > 0)
            np.testing.assert_array_equal(
                ids[batch["masked_lm_positions"][r][weights]],
                old_ids[old["masked_lm_positions"][r][weights]])
            np.testing.assert_array_equal(batch["masked_lm_ids"][r], old["masked_lm_ids"][r])
            np.testing.assert_array_equal(batch["attention_mask"][r].astype(np.int32),
                                          _reference_mask(mode, segments, mask, target_id=5))


def test_layout_of_a_hand_made_batch_per_mode_and_segment_scheme():
    # [CLS]=1 a b [SEP]=9 c [SEP]=9 pad pad, position 2 (b) and 4 (c) masked.
    features = {"input_ids": tf.constant([[1, 3, 4, 9, 5, 9, 0, 0]] * 4),
                "input_mask": tf.constant([[1, 1, 1, 1, 1, 1, 0, 0]] * 4),
                "segment_ids": tf.constant([[0, 0, 0, 0, 1, 1, 0, 0]] * 4),
                "masked_lm_positions": tf.constant([[2, 4, 0]] * 4),
                "masked_lm_ids": tf.constant([[4, 5, 0]] * 4),
                "masked_lm_weights": tf.constant([[1.0, 1.0, 0.0]] * 4)}
    modes = tf.constant([0, 1, 2, 3])
    out = {k: v.numpy() for k, v in pipelines.layout_for_modes(features, modes,
                                                               "paper").items()}
    pair, stream = [1, 3, 4, 9, 5, 9, 0, 0], [1, 3, 4, 5, 9, 0, 0, 0]
    np.testing.assert_array_equal(out["input_ids"], [pair, stream, stream, pair])
    np.testing.assert_array_equal(out["segment_ids"], [[0, 0, 0, 0, 1, 1, 0, 0],
                                                       [2, 2, 2, 2, 2, 0, 0, 0],
                                                       [3, 3, 3, 3, 3, 0, 0, 0],
                                                       [4, 4, 4, 4, 5, 5, 0, 0]])
    np.testing.assert_array_equal(out["input_mask"].sum(axis=1), [6, 5, 5, 6])
    np.testing.assert_array_equal(out["masked_lm_positions"],
                                  [[2, 4, 0], [2, 3, 0], [2, 3, 0], [2, 4, 0]])
    two = pipelines.layout_for_modes(features, modes, "two")["segment_ids"].numpy()
    np.testing.assert_array_equal(two[:, :6], [[0, 0, 0, 0, 1, 1], [0] * 6, [0] * 6,
                                               [0, 0, 0, 0, 1, 1]])


def test_type_vocab_size_covers_the_segment_ids():
    demo = BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, type_vocab_size=2)
    options = PipelineOptions(vocab_file=VOCAB, max_seq_length=32, max_predictions_per_seq=5)
    for name in ("unilm", "unilm_seq2seq"):
        pipeline = recipes.load_recipe(name).build_pipeline(options)
        assert pipeline.fit_config(demo, demo=True).type_vocab_size == 6  # the demo's
        with pytest.raises(ValueError, match=r"^type_vocab_size=2: unilm_segment_ids='paper' "
                                             r"needs at least 6 token types") as error:
            pipeline.fit_config(demo, demo=False)  # a user's config is never widened
        assert "\n" not in str(error.value)
        assert pipeline.fit_config(demo.replace(type_vocab_size=6), demo=False) is not None
    two = pipelines.UnilmPipeline({"unilm_segment_ids": "two"}, options)
    assert two.fit_config(demo, demo=False).type_vocab_size == 2  # BERT's 2 types load
    with pytest.raises(ValueError, match="unilm_segment_ids: expected one of 'paper', 'two'"):
        pipelines.Seq2SeqPipeline({"unilm_segment_ids": "three"}, options)


# ------------------------------------------------------------ seq2seq fine-tuning


def test_seq2seq_pipeline_masks_only_target_tokens(tmp_path):
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("the baker opens the shop .\tshe lights the oven .\n\n"
                     "the farmer opens the gate .\this cows walk to the field .\n",
                     encoding="utf-8")
    pipeline = pipelines.Seq2SeqPipeline({"target_mask_prob": 0.5}, PipelineOptions(
        vocab_file=VOCAB, max_seq_length=24, max_predictions_per_seq=6, seed=3))
    original = pipeline.encode_files(str(pairs))
    vocab = tokenization.load_vocab(VOCAB)
    dataset = pipeline.input_fn(str(pairs), False, 2)(None)
    masked_total = sep_masked = 0
    for step, batch in enumerate(dataset.take(200)):
        batch = {k: v.numpy() for k, v in batch.items()}
        for row in range(2):
            ids, orig = batch["input_ids"][row], original["input_ids"][row]
            changed = np.flatnonzero(ids != orig)
            weights = batch["masked_lm_weights"][row]
            positions = batch["masked_lm_positions"][row][weights > 0]
            np.testing.assert_array_equal(np.sort(changed), positions)
            assert np.all(ids[positions] == vocab[tokenization.MASK_TOKEN])
            assert np.all(original["segment_ids"][row][positions] == 5)  # the target's id
            np.testing.assert_array_equal(batch["masked_lm_ids"][row][weights > 0],
                                          orig[positions])
            masked_total += len(positions)
            last = int(original["input_mask"][row].sum()) - 1
            sep_masked += last in positions
            np.testing.assert_array_equal(
                batch["attention_mask"][row].astype(np.int32),
                _reference_mask(masks.SEQ2SEQ, original["segment_ids"][row],
                                original["input_mask"][row], target_id=5))
        real = original["input_mask"][row] > 0
        assert set(original["segment_ids"][row][real]) == {4, 5}
    targets = sum(int(((original["segment_ids"][r] == 5)).sum()) for r in range(2))
    share = masked_total / (200 * targets)
    assert 0.4 < share < 0.6, share  # target_mask_prob, under the cap of 6
    assert sep_masked > 100  # the end of the target is learned too
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\ttwo\nno tab here\n", encoding="utf-8")
    with pytest.raises(pipelines.PairFileError, match=r"bad.tsv:2: expected `source<TAB>"):
        pipelines.read_pairs(str(bad))


@pytest.fixture(scope="module")
def finetuned(pretrained):
    pretrain_dir, _ = pretrained
    output_dir = os.path.join(os.path.dirname(pretrain_dir), "seq2seq")
    job = pretraining.PretrainingJob.for_demo(
        recipe="unilm_seq2seq", output_dir=output_dir, init_checkpoint=pretrain_dir,
        max_seq_length=32, max_predictions_per_seq=12, num_train_steps=FINETUNE_STEPS,
        num_warmup_steps=30, learning_rate=1e-3, train_batch_size=32, eval_batch_size=32,
        max_eval_steps=10, save_checkpoints_steps=FINETUNE_STEPS, log_steps=FINETUNE_STEPS,
        steps_per_loop=100)
    return output_dir, pretraining.run(job)


def test_seq2seq_fine_tuning_beats_its_unigram_baseline_on_held_out_pairs(finetuned):
    output_dir, results = finetuned
    assert results["masked_lm_loss"] < results["unigram_baseline_masked_lm_loss"] - 0.3, results
    # Held out: no evaluation pair's source is a training pair's source.
    data_dir = os.path.join(output_dir, "data")
    train = {p[0] for p in pipelines.read_pairs(os.path.join(data_dir, "pairs_train.tsv"))}
    held_out = pipelines.read_pairs(os.path.join(data_dir, "pairs_eval.tsv"))
    assert len(held_out) > 40 and not any(source in train for source, _ in held_out)


@pytest.fixture(scope="module")
def decoder(finetuned):
    output_dir, _ = finetuned
    return decoding.load_decoder(os.path.join(output_dir, "bert_config.json"), output_dir,
                                 VOCAB)


def _held_out_sources(finetuned, n):
    output_dir, _ = finetuned
    pairs = pipelines.read_pairs(os.path.join(output_dir, "data", "pairs_eval.tsv"))
    return [source for source, _ in pairs[:n]]


def test_greedy_decoding_picks_the_models_most_likely_token_at_each_step(decoder, finetuned):
    seq2seq, tokenizer = decoder
    source = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(
        _held_out_sources(finetuned, 1)[0]))
    ids, score = seq2seq.greedy(source, max_new_tokens=6)
    # Reference: the pretrainer's own call (encoder + masked-LM head) on the
    # same layout, one step at a time.
    model = seq2seq.model
    assert model.encoder.type_vocab_size == 6 and (seq2seq.source_id, seq2seq.target_id) == (4, 5)
    prefix, total = [], 0.0
    for _ in range(6):
        row = [seq2seq.cls_id] + source + [seq2seq.sep_id] + prefix + [seq2seq.mask_id]
        segments = [4] * (len(source) + 2) + [5] * (len(prefix) + 1)  # generated: target id
        features = {"input_ids": tf.constant([row]), "segment_ids": tf.constant([segments]),
                    "attention_mask": masks.attention_mask(masks.SEQ2SEQ, [segments],
                                                           [[1] * len(row)], target_id=5),
                    "masked_lm_positions": tf.constant([[len(row) - 1]])}
        logits = model(features, training=False)["masked_lm_logits"][0, 0].numpy()
        log_probs = logits - np.log(np.exp(logits - logits.max()).sum()) - logits.max()
        token = int(np.argmax(log_probs))
        total += log_probs[token]
        if token == seq2seq.sep_id:
            break
        prefix.append(token)
    assert ids == prefix
    assert score == pytest.approx(total, abs=1e-3)


def test_beam_search_with_beam_one_is_greedy_and_scores_are_the_models(decoder, finetuned):
    seq2seq, tokenizer = decoder
    for text in _held_out_sources(finetuned, 4):
        source = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
        greedy = seq2seq.greedy(source, max_new_tokens=8)
        beam1 = seq2seq.beam_search(source, beam_size=1, max_new_tokens=8)
        assert beam1[0] == greedy[0] and beam1[1] == pytest.approx(greedy[1], abs=1e-5)
        ids, score = seq2seq.beam_search(source, beam_size=3, max_new_tokens=8)
        # The reported score is the model's log-probability of what was returned.
        ended = len(ids) < 8
        assert score == pytest.approx(seq2seq.score(source, ids, with_end=ended), abs=1e-3)


def test_generate_script_decodes_with_unilm(finetuned, tmp_path):
    output_dir, _ = finetuned
    sources = tmp_path / "sources.txt"
    sources.write_text("\n".join(_held_out_sources(finetuned, 2)) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    base = [sys.executable, os.path.join(REPO_ROOT, "run", "generate.py"), "--recipe=unilm",
            "--init_checkpoint=" + output_dir,
            "--config_file=" + os.path.join(output_dir, "bert_config.json"),
            "--vocab_file=" + VOCAB, "--input_file=" + str(sources),
            "--output_file=" + str(out), "--max_new_tokens=5"]
    done = script_runner.run(base + ["--decoding=beam", "--beam_size=2"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["prompt"] for r in records] == _held_out_sources(finetuned, 2)
    for record in records:
        assert 0 < len(record["generated_ids"]) <= 5 and record["score"] < 0
    bad = script_runner.run(base[:-1] + ["--output_file=" + str(tmp_path / "x.jsonl"),
                                      "--decoding=sample"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0
    assert "--decoding=sample: --recipe=unilm decodes with greedy or beam" in bad.stderr
    assert not (tmp_path / "x.jsonl").exists()
