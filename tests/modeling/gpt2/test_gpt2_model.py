"""GPT-2: config, HF parity, a NumPy float64 reference, causal masking, the causal-LM
objective, the packing pipeline, cached generation and run/generate.py.

The references are written here, independently of the library: HF's
`GPT2LMHeadModel` (random tiny weights, in torch, saved as safetensors) and a
NumPy float64 forward pass over HF's state dict.
"""

import json
import math
import os
import sys

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
import torch
import transformers

import script_runner
from data.pretraining import causal_packing
from data.tokenizers import byte_bpe
from modeling import checkpoints
from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling import recipes
from modeling import registry
from modeling.gpt2 import GPT2Config
from modeling.gpt2 import checkpoint_names
from modeling.gpt2 import GPT2ConfigError
from modeling.gpt2 import GPT2Network
from modeling.gpt2 import load_gpt2_config
from modeling.objectives.causal_lm import CausalLMObjective
from modeling.objectives.base import Pretrainer
from modeling.serving import generation

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "vocab.json")
MERGES = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "merges.txt")

V, E, L, HEADS, INNER, POS = 97, 32, 3, 4, 48, 40


def _hf_model(vocab_size=V, seed=0, **overrides):
    """A random tiny HF GPT-2 with every weight perturbed (LayerNorms too)."""
    torch.manual_seed(seed)
    values = dict(vocab_size=vocab_size, n_positions=POS, n_embd=E, n_layer=L, n_head=HEADS,
                  n_inner=INNER, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    values.update(overrides)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**values)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or "ln_f.weight" in name:
                p.add_(0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf_gpt2")
    model = _hf_model()
    model.save_pretrained(str(directory))
    return str(directory), model


def _load(directory):
    network = GPT2Network.from_config_object(load_gpt2_config(directory))
    report = checkpoints.init_from_checkpoint(network, directory)
    return network, report


def _ours(network, ids, mask=None, positions=None):
    features = {"input_ids": tf.constant(ids)}
    if mask is not None:
        features["input_mask"] = tf.constant(mask)
    if positions is not None:
        features["position_ids"] = tf.constant(positions)
    outputs = network(features, training=False)
    return network.logits(outputs["sequence_output"]).numpy()


# ------------------------------------------------------------------- config


def test_config_reads_hf_config_json_and_round_trips(tmp_path, hf_dir):
    directory, _ = hf_dir
    config = load_gpt2_config(directory)
    assert (config.vocab_size, config.n_embd, config.n_layer, config.n_head, config.n_inner) \
        == (V, E, L, HEADS, INNER)
    assert config.activation_function == "gelu_new" and config.layer_norm_epsilon == 1e-5
    assert config.max_position_embeddings == POS and config.hidden_size == E
    # Unknown keys (architectures, summary_*, ...) are kept and written back.
    assert config.extra["architectures"] == ["GPT2LMHeadModel"]
    out = tmp_path / "out" / "config.json"
    config.to_json_file(out)
    assert os.listdir(tmp_path / "out") == ["config.json"]  # nothing half-written left
    assert load_gpt2_config(out) == config
    with open(os.path.join(directory, "config.json")) as f:
        original = json.load(f)
    with open(out) as f:
        written = json.load(f)
    assert {k: v for k, v in original.items() if k != "transformers_version"} == \
        {k: v for k, v in written.items() if k != "transformers_version"}
    tiny = GPT2Config.from_preset("gpt2_tiny", vocab_size=3000)
    assert tiny.eos_token_id == tiny.bos_token_id == 2999 and tiny.n_embd == 128


@pytest.mark.parametrize("change, message", [
    ({"n_embd": "wide"}, "`n_embd` must be an integer"),
    ({"n_head": 5}, "`n_embd` (32) must be a multiple of `n_head` (5)"),
    ({"resid_pdrop": 1.5}, "`resid_pdrop` must be in [0, 1)"),
    ({"activation_function": "mish"}, "`activation_function` 'mish' is not supported"),
    ({"model_type": "bert"}, "`model_type` is 'bert'"),
    ({"scale_attn_by_inverse_layer_idx": True}, "not supported"),
    ({"add_cross_attention": True}, "not supported"),
])
def test_config_errors_are_one_line_naming_file_and_field(tmp_path, change, message):
    values = dict(vocab_size=V, n_embd=E, n_head=HEADS)
    values.update(change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(GPT2ConfigError) as info:
        load_gpt2_config(path)
    assert str(path) in str(info.value) and message in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- HF parity


def test_hf_parity_unpadded_and_padded(hf_dir):
    directory, model = hf_dir
    network, report = _load(directory)
    assert report.format == "hf_safetensors" and len(report.loaded) == 4 + 12 * L
    rng = np.random.RandomState(0)
    ids = rng.randint(0, V, size=(3, 17)).astype(np.int32)
    with torch.no_grad():
        reference = model(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    unpadded = np.abs(_ours(network, ids) - reference).max()
    # Right padding: real positions must not see the padding.
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    with torch.no_grad():
        reference = model(torch.tensor(ids, dtype=torch.long),
                          attention_mask=torch.tensor(mask)).logits.numpy()
    padded = (np.abs(_ours(network, ids, mask) - reference) * mask[..., None]).max()
    # Left padding with explicit positions (as generation batches prompts).
    left = np.zeros_like(ids)
    left[:, 5:] = 1
    positions = np.maximum(np.cumsum(left, 1) - 1, 0).astype(np.int32)
    with torch.no_grad():
        reference = model(torch.tensor(ids, dtype=torch.long), attention_mask=torch.tensor(left),
                          position_ids=torch.tensor(positions, dtype=torch.long)).logits.numpy()
    left_padded = (np.abs(_ours(network, ids, left, positions) - reference)
                   * left[..., None]).max()
    print("HF parity max |diff|: unpadded %.2e, right-padded %.2e, left-padded %.2e"
          % (unpadded, padded, left_padded))
    assert max(unpadded, padded, left_padded) < 1e-4


def _state_dict(model):
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}


def test_hf_names_without_prefix_buffers_and_tied_head(tmp_path, hf_dir):
    directory, model = hf_dir
    state = _state_dict(model)
    # GPT2Model-style names (no "transformer."), with old causal-mask buffers.
    plain = {k[len("transformer."):]: v for k, v in state.items() if k.startswith("transformer.")}
    for i in range(L):
        plain["h.%d.attn.bias" % i] = np.tril(np.ones((1, 1, POS, POS), np.float32))
        plain["h.%d.attn.masked_bias" % i] = np.array(-1e4, np.float32)
    plain["lm_head.weight"] = plain["wte.weight"].copy()
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(plain, str(path))
    network = GPT2Network.from_config_object(load_gpt2_config(directory))
    report = checkpoints.init_from_checkpoint(network, str(path))
    reasons = dict(report.skipped)
    assert reasons["h.0.attn.bias"] == reasons["h.2.attn.masked_bias"] == "buffer, not a weight"
    assert reasons["lm_head.weight"] == "tied to wte.weight"
    ids = np.arange(10, dtype=np.int32)[None] % V
    with torch.no_grad():
        reference = model(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    assert np.abs(_ours(network, ids) - reference).max() < 1e-4
    # The table also writes: our variables under HF's names give the file back.
    written = name_tables.table_arrays(targets.find_target(network), checkpoint_names.HF)
    buffers = {"h.%d.attn.%s" % (i, b) for i in range(L) for b in ("bias", "masked_bias")}
    assert set(written) == set(plain) - buffers - {"lm_head.weight"}
    for name, array in written.items():
        np.testing.assert_array_equal(array, plain[name], err_msg=name)
    # A pretrainer around the network loads the same file.
    recipe = recipes.load_recipe("gpt2")
    pretrainer = recipe.build_model(load_gpt2_config(directory))
    checkpoints.init_from_checkpoint(pretrainer, str(path))
    np.testing.assert_array_equal(pretrainer.encoder.embedding_table.numpy(),
                                  plain["wte.weight"])


def test_hf_mismatches_are_one_error_listing_every_name(tmp_path, hf_dir):
    directory, model = hf_dir
    state = _state_dict(model)
    state["lm_head.weight"] = state["transformer.wte.weight"] + 1.0  # untied
    state["transformer.h.9.ln_1.weight"] = np.ones([E], np.float32)  # deeper checkpoint
    del state["transformer.h.1.mlp.c_fc.bias"]
    state["transformer.h.0.attn.c_attn.weight"] = np.zeros([E, 2 * E], np.float32)
    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(state, str(path))
    network = GPT2Network.from_config_object(load_gpt2_config(directory))
    before = [w.numpy().copy() for w in network.weights]
    with pytest.raises(checkpoints.CheckpointMismatchError) as info:
        checkpoints.init_from_checkpoint(network, str(path))
    message = str(info.value)
    for name in ("h.1.mlp.c_fc.bias", "h.9.ln_1.weight", "h.0.attn.c_attn.weight",
                 "lm_head.weight"):
        assert name in message, message
    assert "[%d, %d]" % (E, 3 * E) in message  # the fused shape expected
    for old, weight in zip(before, network.weights):
        np.testing.assert_array_equal(old, weight.numpy())  # nothing was touched


# ------------------------------------------------- NumPy float64 reference


def _layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu_new(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def numpy_gpt2_logits(state, ids, mask):
    """GPT-2's forward pass in float64 over HF's state dict (Conv1D weights [in, out])."""
    w = {k[len("transformer."):] if k.startswith("transformer.") else k: v.astype(np.float64)
         for k, v in state.items()}
    batch, seq = ids.shape
    head = E // HEADS
    h = w["wte.weight"][ids] + w["wpe.weight"][np.arange(seq)]
    allowed = np.tril(np.ones((seq, seq), bool))[None, None] & (mask[:, None, None, :] > 0)
    for i in range(L):
        p = "h.%d." % i
        x = _layer_norm(h, w[p + "ln_1.weight"], w[p + "ln_1.bias"])
        qkv = x @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(batch, seq, HEADS, head).transpose(0, 2, 1, 3)
                   for t in np.split(qkv, 3, axis=-1))
        scores = np.where(allowed, q @ k.transpose(0, 1, 3, 2) / math.sqrt(head), -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, E)
        h = h + context @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        x = _layer_norm(h, w[p + "ln_2.weight"], w[p + "ln_2.bias"])
        x = _gelu_new(x @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        h = h + x @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    h = _layer_norm(h, w["ln_f.weight"], w["ln_f.bias"])
    return h @ w["wte.weight"].T


def test_numpy_float64_reference(hf_dir):
    directory, model = hf_dir
    network, _ = _load(directory)
    ids = np.random.RandomState(1).randint(0, V, size=(2, 13)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    reference = numpy_gpt2_logits(_state_dict(model), ids, mask)
    diff = (np.abs(_ours(network, ids, mask) - reference) * mask[..., None]).max()
    print("NumPy float64 reference max |diff|: %.2e" % diff)
    assert diff < 1e-4


# ---------------------------------------------------------------- behaviour


def test_causal_masking_and_padding(hf_dir):
    network, _ = _load(hf_dir[0])
    ids = np.random.RandomState(2).randint(0, V, size=(1, 12)).astype(np.int32)
    changed = ids.copy()
    changed[0, 8:] = (changed[0, 8:] + 5) % V
    a, b = _ours(network, ids), _ours(network, changed)
    np.testing.assert_allclose(a[:, :8], b[:, :8], atol=1e-6)
    assert np.abs(a[:, 8:] - b[:, 8:]).max() > 1e-3
    # What sits in padded positions does not matter to the real ones.
    mask = np.ones_like(ids)
    mask[0, 6:] = 0
    np.testing.assert_allclose(_ours(network, ids, mask)[:, :6],
                               _ours(network, changed, mask)[:, :6], atol=1e-6)
    outputs = network({"input_ids": ids}, output_attention_probs=True)
    assert len(outputs["encoder_outputs"]) == L and len(outputs["attention_probs"]) == L
    probs = outputs["attention_probs"][0].numpy()
    assert np.abs(np.triu(probs[0, 0], 1)).max() == 0.0  # nothing from the future


def test_keras_save_and_load(tmp_path):
    keras.utils.set_random_seed(3)
    network = GPT2Network.from_config_object(GPT2Config(vocab_size=V, n_positions=POS,
                                                        n_embd=E, n_layer=2, n_head=HEADS))
    path = str(tmp_path / "gpt2.keras")
    network.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, GPT2Network) and restored.get_config() == network.get_config()
    ids = np.arange(9, dtype=np.int32)[None]
    np.testing.assert_allclose(_ours(restored, ids), _ours(network, ids), atol=1e-6)


def test_initialisation_scales_residual_projections():
    config = GPT2Config(vocab_size=V, n_embd=E, n_layer=8, n_head=HEADS, n_positions=POS)
    network = GPT2Network.from_config_object(config)
    block = network.transformer_layers[0]
    expected = 0.02 / math.sqrt(2 * 8)
    for dense in (block.attention_sublayer.attention.output_dense,
                  block.ffn_sublayer.output_dense):
        assert dense.kernel_initializer.stddev == pytest.approx(expected)
        assert np.std(dense.kernel.numpy()) < 0.6 * 0.02
    assert np.std(block.ffn_sublayer.intermediate.kernel.numpy()) > 0.7 * 0.02 * 0.88
    assert block.norm_first and network.ln_f.epsilon == 1e-5
    assert registry.families.get("gpt2").is_encoder(network)


# ------------------------------------------------------------ generation


def test_cached_generation_equals_uncached_recomputation(hf_dir):
    network, _ = _load(hf_dir[0])
    prompts = [[1, 2, 3], [4], [5, 6, 7, 8, 9, 10, 11], []]
    for options in (generation.DecodingOptions(max_new_tokens=10),
                    generation.DecodingOptions(max_new_tokens=10, decoding="sample",
                                               temperature=0.8, top_k=20, top_p=0.9, seed=7)):
        cached = generation.generate(network, prompts, options, bos_id=0, batch_size=3,
                                     return_logits=True)
        full = generation.generate(network, prompts, options, bos_id=0, use_cache=False,
                                   batch_size=3, return_logits=True)
        alone = [generation.generate(network, [p], options, bos_id=0, return_logits=True,
                                     first_index=i)[0] for i, p in enumerate(prompts)]
        worst = 0.0
        for a, b, c in zip(cached, full, alone):
            assert a.generated_ids == b.generated_ids == c.generated_ids
            assert len(a.generated_ids) == 10
            worst = max(worst, max(np.abs(x - y).max() for x, y in zip(a.logits, b.logits)),
                        max(np.abs(x - y).max() for x, y in zip(a.logits, c.logits)))
        print("%s: cached vs recomputed logits max |diff| %.2e" % (options.decoding, worst))
        assert worst < 1e-5
    # eos stops a row (and is part of its generated ids).
    greedy = generation.generate(network, [[1, 2, 3]], generation.DecodingOptions(5))
    first = greedy[0].generated_ids[0]
    stopped = generation.generate(network, [[1, 2, 3]], generation.DecodingOptions(5),
                                  eos_id=first)
    assert stopped[0].generated_ids == [first]
    with pytest.raises(generation.GenerationError, match="max_new_tokens"):
        generation.generate(network, [[1] * 30], generation.DecodingOptions(20))


def test_filter_logits():
    logits = np.log(np.array([0.5, 0.2, 0.15, 0.1, 0.05]))
    np.testing.assert_allclose(generation.filter_logits(logits), [0.5, 0.2, 0.15, 0.1, 0.05])
    np.testing.assert_allclose(generation.filter_logits(logits, top_k=2), [5 / 7, 2 / 7, 0, 0, 0])
    # top_p=0.6: 0.5 alone is not enough, 0.5 + 0.2 reaches it.
    np.testing.assert_allclose(generation.filter_logits(logits, top_p=0.6),
                               [5 / 7, 2 / 7, 0, 0, 0])
    np.testing.assert_allclose(generation.filter_logits(logits, top_p=0.4), [1, 0, 0, 0, 0])
    hot = generation.filter_logits(logits, temperature=100.0)
    assert hot.max() - hot.min() < 0.01


def _run_generate(*args):
    return script_runner.run(
        [sys.executable, os.path.join(REPO_ROOT, "run", "generate.py")] + list(args),
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))


def test_generate_script_on_an_hf_model(tmp_path):
    """run/generate.py on an HF GPT-2 folder gives HF's own greedy continuation."""
    tokenizer = byte_bpe.ByteBPETokenizer(VOCAB, MERGES)
    model = _hf_model(vocab_size=tokenizer.vocab_size, seed=5, bos_token_id=tokenizer.eos_id,
                      eos_token_id=tokenizer.eos_id)
    model.save_pretrained(str(tmp_path / "hf"))
    prompts = ["The baker opens the shop", "面包师每天", "don't stop"]
    (tmp_path / "prompts.txt").write_text("\n".join(prompts) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "generated.jsonl"
    common = ["--init_checkpoint=%s" % (tmp_path / "hf" / "model.safetensors"),
              "--config_file=%s" % (tmp_path / "hf" / "config.json"),
              "--vocab_file=%s" % VOCAB, "--merges_file=%s" % MERGES]
    result = _run_generate(*common, "--input_file=%s" % (tmp_path / "prompts.txt"),
                           "--output_file=%s" % out, "--max_new_tokens=8")
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.listdir(tmp_path / "out") == ["generated.jsonl"]
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["prompt"] for r in records] == prompts
    for record in records:
        ids = record["prompt_ids"]
        assert ids == tokenizer.encode(record["prompt"])
        with torch.no_grad():
            reference = model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False,
                                       attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                       pad_token_id=tokenizer.eos_id)[0, len(ids):].tolist()
        if tokenizer.eos_id in reference:
            reference = reference[:reference.index(tokenizer.eos_id) + 1]
        assert record["generated_ids"] == reference
        assert record["text"] == tokenizer.decode(record["generated_ids"],
                                                  skip_special_tokens=True)
    # Bad flags: one line naming the flag, nothing written.
    for flag, expected in (("--top_p=1.5", "--top_p"), ("--decoding=beam", "--decoding"),
                           ("--max_new_tokens=x", "--max_new_tokens")):
        bad = _run_generate(*common, "--prompt=hi", "--output_file=%s" % (tmp_path / "bad.jsonl"),
                            flag)
        lines = [l for l in bad.stderr.splitlines() if l.startswith("generate: error")]
        assert bad.returncode != 0 and len(lines) == 1 and expected in lines[0], bad.stderr
        assert not (tmp_path / "bad.jsonl").exists()


# ------------------------------------------------------- objective, pipeline


def test_causal_lm_objective_loss_metrics_and_baseline():
    keras.utils.set_random_seed(4)
    config = GPT2Config(vocab_size=V, n_positions=POS, n_embd=E, n_layer=2, n_head=HEADS)
    recipe = recipes.load_recipe("gpt2")
    model = recipe.build_model(config)
    assert isinstance(model, Pretrainer) and isinstance(model.objectives[0], CausalLMObjective)
    ids = np.random.RandomState(5).randint(0, V, size=(2, 9)).astype(np.int32)
    mask = np.ones_like(ids)
    mask[1, 5:] = 0
    features = {"input_ids": tf.constant(ids), "input_mask": tf.constant(mask)}
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    logits = model(features)["causal_lm_logits"].numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                keepdims=True)) - logits.max(-1, keepdims=True)
    nll, count, correct = 0.0, 0, 0
    for b in range(2):
        for t in range(8):
            if mask[b, t] and mask[b, t + 1]:
                nll -= log_probs[b, t, ids[b, t + 1]]
                correct += int(np.argmax(logits[b, t]) == ids[b, t + 1])
                count += 1
    assert count == 8 + 4
    total, n = (float(x) for x in metrics["causal_lm_loss"])
    assert n == count and total == pytest.approx(nll, rel=1e-5)
    assert float(loss) == pytest.approx(nll / (count + 1e-5), rel=1e-5)
    assert float(metrics["causal_lm_accuracy"][0]) == correct
    objective = model.get_objective("causal_lm")
    targets = objective.baseline_targets({"input_ids": ids, "input_mask": mask})
    assert targets.tolist() == ids[0, 1:].tolist() + ids[1, 1:5].tolist()
    derived = objective.derived_metrics({"causal_lm_loss": 2.0,
                                         "unigram_baseline_causal_lm_loss": 3.0})
    assert derived == pytest.approx({"causal_lm_perplexity": math.exp(2.0),
                                     "unigram_baseline_causal_lm_perplexity": math.exp(3.0)})


def test_pipeline_windows_match_python_packing(tmp_path, sample_corpus_files):
    odd = tmp_path / "odd.txt"
    odd.write_text("\n\nfirst line\nsecond \n\n\n\nthird doc\r\nend", encoding="utf-8")
    files = list(sample_corpus_files) + [str(odd)]
    tokenizer = byte_bpe.ByteBPETokenizer(VOCAB, MERGES)
    expected = []
    for path in files:
        expected += causal_packing.file_windows(path, tokenizer, 32)
    dataset = causal_packing.causal_lm_dataset(files, VOCAB, MERGES, 32, batch_size=16,
                                               is_training=False, lines_per_block=7)
    got = []
    for batch in dataset:
        for ids, mask in zip(batch["input_ids"].numpy(), batch["input_mask"].numpy()):
            got.append((ids.tolist(), int(mask.sum())))
            assert mask.tolist() == [1] * int(mask.sum()) + [0] * (32 - int(mask.sum()))
    assert got == expected
    eot = tokenizer.eos_id
    last_ids, last_length = expected[-1]
    assert tokenizer.decode(last_ids[:last_length]) == \
        "first line\nsecond \n<|endoftext|>third doc\nend\n<|endoftext|>"
    # Sharded between two input pipelines: by file when there are enough
    # files, by window otherwise; together they read every window once.
    for shard_files in (files[:2], files[:1]):
        shards = []
        for pipeline_id in range(2):
            context = tf.distribute.InputContext(num_input_pipelines=2,
                                                 input_pipeline_id=pipeline_id,
                                                 num_replicas_in_sync=2)
            dataset = causal_packing.causal_lm_dataset(shard_files, VOCAB, MERGES, 32,
                                                       batch_size=8, is_training=False,
                                                       input_context=context)
            shards.append([tuple(r) for b in dataset for r in b["input_ids"].numpy().tolist()])
        whole = [tuple(ids) for path in shard_files
                 for ids, _ in causal_packing.file_windows(path, tokenizer, 32)]
        assert shards[0] and shards[1]
        assert sorted(shards[0] + shards[1]) == sorted(whole)
    assert eot == 2999
    # Training batches: full, shuffled, repeated.
    train = causal_packing.causal_lm_dataset(files, VOCAB, MERGES, 32, batch_size=8, seed=1)
    batch = next(iter(train))
    assert batch["input_ids"].shape == (8, 32) and batch["input_ids"].dtype == tf.int32


# ------------------------------------------------------- schema of the files


def _gpt2_load_error(tmp_path, values):
    path = tmp_path / "bad" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(values if isinstance(values, str) else json.dumps(values))
    with pytest.raises(GPT2ConfigError) as info:
        load_gpt2_config(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    return message


@pytest.mark.parametrize("field", ["vocab_size", "n_positions", "n_embd", "n_layer", "n_head"])
def test_config_file_without_a_structural_field_is_refused(tmp_path, hf_dir, field):
    with open(os.path.join(hf_dir[0], "config.json")) as f:
        hf = json.load(f)
    hf.pop(field)
    assert "missing required GPT-2 field `%s`" % field in _gpt2_load_error(tmp_path, hf)


def test_config_file_unknown_keys_are_refused_and_openai_hparams_load(tmp_path, hf_dir):
    with open(os.path.join(hf_dir[0], "config.json")) as f:
        hf = json.load(f)
    message = _gpt2_load_error(tmp_path, dict(hf, n_layers=6))
    assert "unknown GPT-2 config key `n_layers` (did you mean `n_layer`?)" in message
    message = _gpt2_load_error(tmp_path, "[" * 200000 + "]" * 200000)
    assert "not valid JSON: nested too deeply" in message
    # OpenAI's hparams.json names: n_vocab and n_ctx stand for vocab_size and n_positions.
    path = tmp_path / "hparams.json"
    path.write_text(json.dumps({"n_vocab": V, "n_ctx": POS, "n_embd": E, "n_head": HEADS,
                                "n_layer": L}))
    config = load_gpt2_config(path)
    assert (config.vocab_size, config.n_positions, config.n_layer) == (V, POS, L)
