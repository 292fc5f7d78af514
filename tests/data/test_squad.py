"""data/squad.py: SQuAD reading, windows and maps, span decoding, EM/F1 on hand-made cases.

Every expected value here was worked out by hand from the paragraph and the
logits written in the test (the arithmetic is in the comments).
"""

import collections
import json
import re
import string

import pytest

from data import squad
from data import tokenization

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
         "where", "did", "?", ".", "(", ")", "1895", "-", "1943", "he", "was", "born", "in",
         "paris", "un", "##able", "北", "京", "是", "中", "国", "的", "首", "都", "哪", "里",
         "，", "。", "？"]


@pytest.fixture
def tokenizer(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    return tokenization.FullTokenizer(str(path), do_lower_case=True)


def _write_squad(path, paragraphs):
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "t", "paragraphs": paragraphs}]}, ensure_ascii=False), encoding="utf-8")
    return str(path)


CAT = "The cat sat on the mat."


def _cat_file(tmp_path, answer="mat", start=19, qid="q1"):
    return _write_squad(tmp_path / "cat.json", [{"context": CAT, "qas": [
        {"id": qid, "question": "Where did the cat sit?",
         "answers": [{"text": answer, "answer_start": start}]}]}])


# ------------------------------------------------------------------ reading


def test_doc_tokens_split_at_whitespace_and_every_cjk_character():
    tokens, spans, char_to_token = squad.split_doc_tokens("He  was 北京2008年 ok")
    assert tokens == ["He", "was", "北", "京", "2008", "年", "ok"]
    assert spans == [(0, 2), (4, 7), (8, 9), (9, 10), (10, 14), (14, 15), (16, 18)]
    assert char_to_token[:9] == [0, 0, 0, 0, 1, 1, 1, 1, 2]
    assert char_to_token[10:15] == [4, 4, 4, 4, 5]


def test_reads_answer_positions_in_doc_tokens(tmp_path):
    # "The cat sat on the mat.": "mat" starts at character 19, inside doc token 5 "mat.".
    [example] = squad.read_squad_examples(_cat_file(tmp_path), is_training=True)
    assert example.doc_tokens == ["The", "cat", "sat", "on", "the", "mat."]
    assert (example.start_position, example.end_position) == (5, 5)
    assert example.answers == ["mat"] and not example.is_impossible


def test_a_wrong_offset_uses_the_nearest_occurrence_of_the_answer(tmp_path):
    # "the" occurs at 0 ("The" differs in case) and 15; answer_start 12 points into "on".
    [example] = squad.read_squad_examples(_cat_file(tmp_path, answer="the", start=12),
                                          is_training=True)
    assert (example.start_position, example.end_position) == (4, 4)


def test_an_answer_not_in_the_paragraph_is_a_one_line_error_naming_the_question(tmp_path):
    path = _cat_file(tmp_path, answer="dog", start=3, qid="bad-1")
    with pytest.raises(squad.SquadDataError) as error:
        squad.read_squad_examples(path, is_training=True)
    message = str(error.value)
    assert "\n" not in message
    assert message == ("%s: data[0].paragraphs[0].qas[0] (id bad-1): answer 'dog' is not in "
                       "the context (answer_start=3 has ' ca')" % path)
    # Outside training such a question is kept (its answers still score predictions).
    [example] = squad.read_squad_examples(path, is_training=False)
    assert example.answers == ["dog"] and example.start_position is None
    bad_json = tmp_path / "broken.json"
    bad_json.write_text("{\"data\": [", encoding="utf-8")
    with pytest.raises(squad.SquadDataError, match=r"broken.json: not valid JSON"):
        squad.read_squad_examples(str(bad_json), is_training=False)
    impossible = _write_squad(tmp_path / "v2.json", [{"context": CAT, "qas": [
        {"id": "x", "question": "Who?", "answers": [], "is_impossible": True}]}])
    with pytest.raises(squad.SquadDataError, match="--version_2_with_negative is not set"):
        squad.read_squad_examples(impossible, is_training=True)


@pytest.mark.parametrize("version_2", [False, True])
def test_is_impossible_must_be_a_json_boolean(tmp_path, version_2):
    """"false" (a string) is refused, never read as true."""
    path = _write_squad(tmp_path / "v2.json", [{"context": CAT, "qas": [
        {"id": "x", "question": "Where?", "answers": [{"text": "mat", "answer_start": 19}],
         "is_impossible": "false"}]}])
    with pytest.raises(squad.SquadDataError) as error:
        squad.read_squad_examples(path, is_training=True, version_2_with_negative=version_2)
    assert str(error.value) == ("%s: data[0].paragraphs[0].qas[0] (id x): field "
                                "'is_impossible' is \"false\"; expected a JSON true or false"
                                % path)
    # A JSON false is an answerable question.
    path = _write_squad(tmp_path / "v2.json", [{"context": CAT, "qas": [
        {"id": "x", "question": "Where?", "answers": [{"text": "mat", "answer_start": 19}],
         "is_impossible": False}]}])
    [example] = squad.read_squad_examples(path, is_training=True,
                                          version_2_with_negative=version_2)
    assert not example.is_impossible and example.start_position == 5


def test_question_ids_1_and_quoted_1_are_the_same_id(tmp_path):
    question = {"question": "Where?", "answers": [{"text": "mat", "answer_start": 19}]}
    path = _write_squad(tmp_path / "ids.json", [{"context": CAT, "qas": [
        dict(question, id=1), dict(question, id="1")]}])
    with pytest.raises(squad.SquadDataError) as error:
        squad.read_squad_examples(path, is_training=False)
    message = str(error.value)
    assert message.startswith("%s: data[0].paragraphs[0].qas[1] (id 1): the id \"1\" is "
                              "already the id of data[0].paragraphs[0].qas[0]" % path), message
    # A boolean is no id (True would pass as the integer 1).
    path = _write_squad(tmp_path / "ids.json", [{"context": CAT, "qas": [
        dict(question, id=True)]}])
    with pytest.raises(squad.SquadDataError, match="'id' should be a str/int, not a JSON"):
        squad.read_squad_examples(path, is_training=False)


# ----------------------------------------------------------------- features


def _cat_features(tmp_path, tokenizer, is_training):
    examples = squad.read_squad_examples(_cat_file(tmp_path), is_training=is_training)
    # Question pieces: where did the cat [UNK] ?, cut to 4. Windows of
    # 12 - 4 - 3 = 5 document pieces (the cat sat on the mat .) with stride 2:
    # pieces 0-4 and 2-6.
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=12, doc_stride=2, max_query_length=4,
        is_training=is_training)
    return examples, features


def test_windows_maps_and_max_context_on_a_hand_made_paragraph(tmp_path, tokenizer):
    _, features = _cat_features(tmp_path, tokenizer, is_training=False)
    assert len(features) == 2
    first, second = features
    assert first.tokens == ["[CLS]", "where", "did", "the", "cat", "[SEP]",
                            "the", "cat", "sat", "on", "the", "[SEP]"]
    assert second.tokens == ["[CLS]", "where", "did", "the", "cat", "[SEP]",
                             "sat", "on", "the", "mat", ".", "[SEP]"]
    assert first.token_to_orig_map == {6: 0, 7: 1, 8: 2, 9: 3, 10: 4}
    assert second.token_to_orig_map == {6: 2, 7: 3, 8: 4, 9: 5, 10: 5}
    # Piece 2 ("sat"): min(2, 2) in the first window beats min(0, 4) in the second;
    # piece 3 ("on"): min(3, 1) = min(1, 3), the first window wins the tie;
    # piece 4 ("the"): min(4, 0) loses to min(2, 2).
    assert first.token_is_max_context == {6: True, 7: True, 8: True, 9: True, 10: False}
    assert second.token_is_max_context == {6: False, 7: False, 8: True, 9: True, 10: True}
    assert first.segment_ids == [0] * 6 + [1] * 6
    assert first.input_ids == [VOCAB.index(t) for t in first.tokens]
    assert first.input_mask == [1] * 12
    assert (first.unique_id, second.unique_id) == (squad.FIRST_UNIQUE_ID,
                                                   squad.FIRST_UNIQUE_ID + 1)


def test_training_labels_point_at_the_answer_only_where_it_is_whole(tmp_path, tokenizer):
    _, features = _cat_features(tmp_path, tokenizer, is_training=True)
    first, second = features
    # "mat" (piece 5; the doc token "mat." is pieces 5-6, narrowed to "mat")
    # is outside the first window: [CLS] there.
    assert (first.start_position, first.end_position, first.is_impossible) == (0, 0, True)
    assert (second.start_position, second.end_position) == (9, 9)
    assert second.tokens[9] == "mat"


def test_padding_and_a_window_per_feature_in_the_tfrecords(tmp_path, tokenizer):
    examples = squad.read_squad_examples(_cat_file(tmp_path), is_training=True)
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=16, doc_stride=4, max_query_length=4,
        is_training=True)
    assert len(features) == 1 and features[0].input_mask == [1] * 14 + [0] * 2
    path = str(tmp_path / "train.tf_record")
    squad.write_features(features, path, is_training=True)
    batch = next(iter(squad.input_fn_builder(path, 16, False, 4)()))
    assert batch["unique_ids"].numpy().tolist() == [squad.FIRST_UNIQUE_ID]
    assert batch["input_ids"].numpy()[0].tolist() == features[0].input_ids
    assert "start_positions" not in batch  # prediction records carry no labels
    train_batch = next(iter(squad.input_fn_builder(path, 16, True, 1, seed=0)()))
    assert train_batch["start_positions"].numpy().tolist() == [features[0].start_position]


# ------------------------------------------------------------ span decoding


def _logits(length, **points):
    start, end = [0.0] * length, [0.0] * length
    for name, value in points.items():
        kind, position = name.split("_")
        (start if kind == "s" else end)[int(position)] = value
    return start, end


def test_the_window_where_the_answer_is_whole_and_most_central_wins(tmp_path, tokenizer):
    examples, features = _cat_features(tmp_path, tokenizer, is_training=False)
    first, second = features
    # First window: "the" (position 10, piece 4) scores 9 + 9, but piece 4 has its
    # maximum context in the second window, and "the mat" does not fit in the first.
    # Second window: "the mat" (positions 8-9) scores 4 + 4.
    results = {first.unique_id: _logits(12, s_10=9.0, e_10=9.0, s_6=1.0, e_6=1.0),
               second.unique_id: _logits(12, s_8=4.0, e_9=4.0)}
    # Left in the first window: "The" (6..6), 1 + 1.
    predictions, nbest, null_odds = squad.postprocess(examples, features, results,
                                                      n_best_size=3, max_answer_length=3)
    assert predictions == {"q1": "the mat"}
    assert null_odds == {}
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest["q1"]] == [
        ("the mat", 4.0, 4.0), ("The", 1.0, 1.0)]
    assert abs(sum(entry["probability"] for entry in nbest["q1"]) - 1.0) < 1e-9
    # The answer's original text comes back with its casing and without the period.
    results = {first.unique_id: _logits(12, s_6=5.0, e_7=5.0),
               second.unique_id: _logits(12, s_9=1.0, e_9=1.0)}
    predictions, _, _ = squad.postprocess(examples, features, results, n_best_size=3)
    assert predictions == {"q1": "The cat"}
    predictions, _, _ = squad.postprocess(
        examples, features, {first.unique_id: _logits(12),
                             second.unique_id: _logits(12, s_9=5.0, e_9=5.0)})
    assert predictions == {"q1": "mat"}  # piece "mat" of the doc token "mat."


def test_illegal_spans_are_skipped(tmp_path, tokenizer):
    examples, features = _cat_features(tmp_path, tokenizer, is_training=False)
    first, second = features
    # First window. Start logits: question position 2 = 20, "on" (9) = 8, "the" (6) = 7.5;
    # end logits: position 2 = 20, "sat" (8) = 9, "the" (10) = 2. Illegal: anything at
    # position 2 (the question), 9..8 (end before start), 6..8 (3 pieces > 2). Legal
    # and best: 9..10, "on the", 8 + 2 = 10. The second window's logits are all zero
    # and its top-4 starts (positions 0-3) are not in the document.
    results = {first.unique_id: _logits(12, s_2=20.0, e_2=20.0, s_9=8.0, s_6=7.5, e_8=9.0,
                                        e_10=2.0),
               second.unique_id: _logits(12)}
    predictions, nbest, _ = squad.postprocess(examples, features, results, n_best_size=4,
                                              max_answer_length=2)
    assert predictions == {"q1": "on the"}
    assert [(e["text"], e["start_logit"], e["end_logit"]) for e in nbest["q1"]] == [
        ("on the", 8.0, 2.0)]
    assert nbest["q1"][0]["probability"] == pytest.approx(1.0)


def test_no_answer_under_version_2_with_the_threshold(tmp_path, tokenizer):
    examples = squad.read_squad_examples(_cat_file(tmp_path), is_training=False)
    [feature] = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=16, doc_stride=4, max_query_length=4,
        is_training=False)
    assert feature.tokens[11] == "mat"
    # Null score 2 + 2 = 4; best non-null "mat" 1.5 + 1.5 = 3; difference 1.
    results = {feature.unique_id: _logits(16, s_0=2.0, e_0=2.0, s_11=1.5, e_11=1.5)}
    for threshold, expected in ((0.0, ""), (0.99, ""), (1.01, "mat"), (1.5, "mat")):
        predictions, nbest, null_odds = squad.postprocess(
            examples, [feature], results, version_2_with_negative=True,
            null_score_diff_threshold=threshold)
        assert predictions == {"q1": expected}, threshold
        assert null_odds == {"q1": pytest.approx(1.0)}
        texts = [entry["text"] for entry in nbest["q1"]]
        assert texts[:2] == ["", "mat"]
    # Without version 2 there is no null answer at all.
    predictions, nbest, null_odds = squad.postprocess(examples, [feature], results)
    assert predictions == {"q1": "mat"} and "" not in [e["text"] for e in nbest["q1"]]


def test_the_null_score_is_the_lowest_over_the_windows(tmp_path, tokenizer):
    examples, features = _cat_features(tmp_path, tokenizer, is_training=False)
    first, second = features
    # Nulls 2 + 2 = 4 and 0.5 + 0.5 = 1: the null score is 1. "mat" scores 1 + 1 = 2,
    # so the difference is 1 - 2 = -1 and the answer is "mat" at threshold 0.
    results = {first.unique_id: _logits(12, s_0=2.0, e_0=2.0),
               second.unique_id: _logits(12, s_0=0.5, e_0=0.5, s_9=1.0, e_9=1.0)}
    predictions, _, null_odds = squad.postprocess(examples, features, results,
                                                  version_2_with_negative=True)
    assert predictions == {"q1": "mat"}
    assert null_odds == {"q1": pytest.approx(-1.0)}


def test_get_final_text_maps_word_pieces_back_to_the_original_characters():
    assert squad.get_final_text("1895", "(1895-1943).", True) == "1895"
    assert squad.get_final_text("1895 - 1943", "(1895-1943).", True) == "1895-1943"
    assert squad.get_final_text("the mat", "the Mat.", True) == "the Mat"
    assert squad.get_final_text("cafe", "Café!", True) == "Café"
    assert squad.get_final_text("北 京", "北京", True) == "北京"
    # Not found: the whole original span, Google's fallback.
    assert squad.get_final_text("paris", "(1895-1943).", True) == "(1895-1943)."


def test_chinese_character_spans(tmp_path, tokenizer):
    context = "北京是中国的首都。"
    path = _write_squad(tmp_path / "cmrc.json", [{"context": context, "qas": [
        {"id": "c1", "question": "中国的首都是哪里？",
         "answers": [{"text": "北京", "answer_start": 0}]},
        {"id": "c2", "question": "北京是哪里的？",
         "answers": [{"text": "中国的首都", "answer_start": 3}]}]}])
    examples = squad.read_squad_examples(path, is_training=True)
    assert examples[0].doc_tokens == list("北京是中国的首都。")
    assert [(e.start_position, e.end_position) for e in examples] == [(0, 1), (3, 7)]
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=32, doc_stride=8, max_query_length=16,
        is_training=True)
    # c1: [CLS] + 9 question characters + [SEP]: the document starts at 11.
    assert features[0].tokens[11:20] == list("北京是中国的首都。")
    assert (features[0].start_position, features[0].end_position) == (11, 12)
    # c2: [CLS] + 7 + [SEP]: the document starts at 9; 中国的首都 is characters 3-7.
    assert (features[1].start_position, features[1].end_position) == (12, 16)
    results = {features[0].unique_id: _logits(32, s_11=5.0, e_12=5.0),
               features[1].unique_id: _logits(32, s_12=5.0, e_16=5.0)}
    predictions, _, _ = squad.postprocess(examples, features, results)
    assert predictions == {"c1": "北京", "c2": "中国的首都"}
    assert squad.evaluate(examples, {"c1": "北京", "c2": "中国"}) == pytest.approx(
        {"exact_match": 50.0, "f1": 100.0 * (1.0 + 2 * 1.0 * 0.4 / 1.4) / 2, "total": 2})


# ---------------------------------------------------------------- EM and F1


def _official_normalize(s):
    """The official SQuAD v1.1 evaluate script's normalize_answer, as published."""
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _official_f1(prediction, ground_truth):
    prediction_tokens = _official_normalize(prediction).split()
    ground_truth_tokens = _official_normalize(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


PAIRS = [("The Eiffel Tower", "eiffel tower."), ("the cat sat", "cat sat on a mat"),
         ("Denver Broncos", "Broncos"), ("an apple,  an orange", "The orange!"),
         ("1895-1943", "1895–1943"), ("Saint-Denis", "saint denis"), ("theatre", "the atre"),
         ("A", "an"), ("x y z", "z y x"), ("Paris", "London")]


def test_em_and_f1_on_known_strings():
    assert squad.normalize_answer("  The  Cat, sat!  ") == "cat sat"
    assert squad.normalize_answer("Theatre of an Anthem") == "theatre of anthem"
    assert squad.exact_match_score("The Eiffel Tower", "eiffel tower.") == 1.0
    assert squad.exact_match_score("Eiffel", "Eiffel Tower") == 0.0
    # pred {cat, sat}, gold {cat, sat, on, mat}: precision 1, recall 1/2, F1 2/3.
    assert squad.f1_score("the cat sat", "cat sat on a mat") == pytest.approx(2.0 / 3.0)
    assert squad.f1_score("Paris", "London") == 0.0
    assert squad.f1_score("", "") == 1.0 and squad.f1_score("cat", "") == 0.0
    # 北京 against 北京市: precision 1, recall 2/3, F1 0.8 (characters are tokens).
    assert squad.f1_score("北京", "北京市") == pytest.approx(0.8)


def test_english_scores_equal_the_official_script():
    for prediction, gold in PAIRS:
        assert squad.normalize_answer(prediction) == _official_normalize(prediction)
        assert squad.exact_match_score(prediction, gold) == float(
            _official_normalize(prediction) == _official_normalize(gold))
        if _official_normalize(prediction) and _official_normalize(gold):
            assert squad.f1_score(prediction, gold) == pytest.approx(
                _official_f1(prediction, gold)), (prediction, gold)


def test_evaluate_takes_the_best_gold_answer_and_scores_no_answer_questions(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"data": [{"paragraphs": [{"context": CAT, "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "the mat", "answer_start": 15},
                                                 {"text": "mat", "answer_start": 19}]},
        {"id": "b", "question": "?", "answers": [{"text": "cat sat", "answer_start": 4}]},
        {"id": "c", "question": "?", "answers": [], "is_impossible": True},
        {"id": "d", "question": "?", "answers": [], "is_impossible": True}]}]}]}))
    examples = squad.read_squad_examples(str(path), False, version_2_with_negative=True)
    # a: "Mat" matches "mat" exactly. b: "cat" vs "cat sat": F1 2/3. c: "" right. d: wrong.
    results = squad.evaluate(examples, {"a": "Mat", "b": "cat", "c": "", "d": "mat"})
    assert results == pytest.approx({
        "exact_match": 50.0, "f1": 100.0 * (1 + 2.0 / 3.0 + 1 + 0) / 4, "total": 4,
        "HasAns_exact_match": 50.0, "HasAns_f1": 100.0 * (1 + 2.0 / 3.0) / 2,
        "HasAns_total": 2, "NoAns_exact_match": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2})


def test_predictions_files_are_written(tmp_path):
    paths = squad.write_predictions(str(tmp_path), {"q": "北京"}, {"q": [{"text": "北京"}]},
                                    {"q": -1.5})
    assert json.loads((tmp_path / "predictions.json").read_text("utf-8")) == {"q": "北京"}
    assert json.loads((tmp_path / "null_odds.json").read_text("utf-8")) == {"q": -1.5}
    assert sorted(paths) == ["nbest", "null_odds", "predictions"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "nbest_predictions.json", "null_odds.json", "predictions.json"]


def test_a_version_2_impossible_training_question_points_at_cls(tmp_path, tokenizer):
    path = _write_squad(tmp_path / "train-v2.json", [{"context": CAT, "qas": [
        {"id": "n", "question": "Where did the dog sit?", "answers": [],
         "plausible_answers": [{"text": "mat", "answer_start": 19}], "is_impossible": True},
        {"id": "y", "question": "Where did the cat sit?",
         "answers": [{"text": "mat", "answer_start": 19}], "is_impossible": False}]}])
    examples = squad.read_squad_examples(path, is_training=True, version_2_with_negative=True)
    assert [(e.is_impossible, e.start_position, e.answers) for e in examples] == [
        (True, -1, []), (False, 5, ["mat"])]
    features = squad.convert_examples_to_features(
        examples, tokenizer, max_seq_length=16, doc_stride=4, max_query_length=4,
        is_training=True)
    assert [(f.start_position, f.end_position, f.is_impossible) for f in features] == [
        (0, 0, True), (11, 11, False)]
