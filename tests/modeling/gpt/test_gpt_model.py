"""GPT (2018): config, parity with HF's `OpenAIGPTModel` / `OpenAIGPTLMHeadModel`, causality.

The reference is HF's PyTorch implementation with random tiny weights (every
weight perturbed, LayerNorms and biases too), written by this test as
safetensors and read through `modeling.checkpoints.init_from_checkpoint`.
"""

import json
import os

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf
import torch
import transformers

from modeling import checkpoints
from modeling import registry
from modeling.checkpoints import targets
from modeling.gpt import GPTConfig
from modeling.gpt import GPTConfigError
from modeling.gpt import GPTNetwork
from modeling.gpt import load_gpt_config
from modeling.gpt2 import GPT2Config
from modeling.gpt2 import GPT2Network

V, E, L, HEADS, POS = 89, 32, 2, 4, 40


def _hf_model(cls=transformers.OpenAIGPTLMHeadModel, seed=0, **overrides):
    """A random tiny HF GPT with every weight perturbed (LayerNorms and biases too)."""
    torch.manual_seed(seed)
    values = dict(vocab_size=V, n_positions=POS, n_embd=E, n_layer=L, n_head=HEADS,
                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    values.update(overrides)
    model = cls(transformers.OpenAIGPTConfig(**values)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name and name.endswith("weight"):
                p.add_(0.2 * torch.randn_like(p))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif "embed" in name:
                p.copy_(0.3 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf_gpt")
    model = _hf_model()
    model.save_pretrained(str(directory))  # config.json + model.safetensors
    assert os.path.isfile(os.path.join(str(directory), "model.safetensors"))
    return str(directory), model


def _load(directory):
    network = GPTNetwork.from_config_object(load_gpt_config(directory))
    report = checkpoints.init_from_checkpoint(network, directory)
    return network, report


def _ours(network, ids, mask=None):
    features = {"input_ids": tf.constant(ids)}
    if mask is not None:
        features["input_mask"] = tf.constant(mask)
    outputs = network(features, training=False)
    return outputs["sequence_output"].numpy(), network.logits(outputs["sequence_output"]).numpy()


def test_config_reads_hf_config_json_and_round_trips(tmp_path, hf_dir):
    directory, _ = hf_dir
    config = load_gpt_config(directory)
    assert (config.vocab_size, config.n_positions, config.n_embd, config.n_layer,
            config.n_head, config.afn) == (V, POS, E, L, HEADS, "gelu")
    assert config.hidden_act == "gelu_new" and config.max_position_embeddings == POS
    assert config.extra["model_type"] == "openai-gpt"
    path = str(tmp_path / "config.json")
    config.to_json_file(path)
    assert load_gpt_config(path) == config
    assert GPTConfig.from_preset("openai_gpt").to_dict()["vocab_size"] == 40478


@pytest.mark.parametrize("change,message", [
    ({"n_embd": 30}, "`n_embd` (30) must be a multiple of `n_head` (4)"),
    ({"afn": "tanh"}, "`afn` 'tanh' is not supported"),
    ({"model_type": "gpt2"}, "model_type"),
    ({"n_embed": 32}, "n_embed"),
    ({"attn_pdrop": 1.5}, "`attn_pdrop` must be in [0, 1)"),
])
def test_config_errors_are_one_line_naming_file_and_field(tmp_path, hf_dir, change, message):
    with open(os.path.join(hf_dir[0], "config.json")) as f:
        values = json.load(f)
    values.update(change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(values))
    with pytest.raises(GPTConfigError) as error:
        load_gpt_config(str(path))
    text = str(error.value)
    assert "\n" not in text and str(path) in text and message in text, text


def test_hf_parity_lm_head_model_and_base_model(tmp_path, hf_dir):
    directory, model = hf_dir
    network, report = _load(directory)
    assert report.format == "hf_safetensors" and len(report.loaded) == 2 + 12 * L
    rng = np.random.RandomState(0)
    ids = rng.randint(0, V, size=(3, 17)).astype(np.int32)
    with torch.no_grad():
        out = model(torch.tensor(ids, dtype=torch.long), output_hidden_states=True)
    hidden, logits = _ours(network, ids)
    np.testing.assert_allclose(hidden, out.hidden_states[-1].numpy(), atol=2e-5)
    np.testing.assert_allclose(logits, out.logits.numpy(), atol=5e-5)
    # Right padding: the real positions match HF given the same attention mask.
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    mask[2, 4:] = 0
    with torch.no_grad():
        reference = model(torch.tensor(ids, dtype=torch.long),
                          attention_mask=torch.tensor(mask)).logits.numpy()
    padded = (np.abs(_ours(network, ids, mask)[1] - reference) * mask[..., None]).max()
    assert padded < 5e-5
    # OpenAIGPTModel's own file: no `transformer.` prefix, no LM head.
    base = _hf_model(transformers.OpenAIGPTModel, seed=1)
    state = {k: v.detach().numpy().copy() for k, v in base.state_dict().items()}
    assert "tokens_embed.weight" in state and not any(k.startswith("transformer.") for k in state)
    path = str(tmp_path / "model.safetensors")
    safetensors.numpy.save_file(state, path)
    network = GPTNetwork.from_config_object(load_gpt_config(directory))
    checkpoints.init_from_checkpoint(network, path)
    with torch.no_grad():
        reference = base(torch.tensor(ids, dtype=torch.long)).last_hidden_state.numpy()
    np.testing.assert_allclose(_ours(network, ids)[0], reference, atol=2e-5)


def test_checkpoint_of_another_shape_is_one_error_listing_names(tmp_path, hf_dir):
    directory, model = hf_dir
    state = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    state.pop("transformer.h.1.mlp.c_fc.bias")
    path = str(tmp_path / "model.safetensors")
    safetensors.numpy.save_file(state, path)
    network = GPTNetwork.from_config_object(load_gpt_config(directory))
    before = network.embedding_table.numpy().copy()
    with pytest.raises(checkpoints.CheckpointMismatchError) as error:
        checkpoints.init_from_checkpoint(network, path)
    assert "h.1.mlp.c_fc.bias" in str(error.value)
    np.testing.assert_array_equal(network.embedding_table.numpy(), before)


def test_changing_tokens_after_t_never_changes_outputs_at_t(hf_dir):
    network, _ = _load(hf_dir[0])
    rng = np.random.RandomState(2)
    ids = rng.randint(0, V, size=(2, 14)).astype(np.int32)
    for t in (0, 5, 12):
        changed = ids.copy()
        changed[:, t + 1:] = rng.randint(0, V, size=changed[:, t + 1:].shape)
        changed[:, t + 1] = (ids[:, t + 1] + 1) % V  # certainly different
        a, b = _ours(network, ids)[0], _ours(network, changed)[0]
        np.testing.assert_allclose(a[:, :t + 1], b[:, :t + 1], atol=1e-6)
        assert np.abs(a[:, t + 1:] - b[:, t + 1:]).max() > 1e-3
    outputs = network({"input_ids": ids}, output_attention_probs=True)
    probs = outputs["attention_probs"][0].numpy()
    assert np.abs(np.triu(probs[0, 0], 1)).max() == 0.0


def test_post_ln_blocks_no_final_norm_unscaled_init_and_own_family():
    config = GPTConfig(vocab_size=V, n_positions=POS, n_embd=E, n_layer=8, n_head=HEADS)
    network = GPTNetwork.from_config_object(config)
    assert network.ln_f is None
    for block in network.transformer_layers:
        assert not block.norm_first
        assert block.attention_sublayer.attention.output_dense.kernel_initializer.stddev == \
            pytest.approx(0.02)
    # The last block's output is the sequence output (no final LayerNorm).
    outputs = network({"input_ids": np.arange(6, dtype=np.int32)[None]})
    np.testing.assert_array_equal(outputs["sequence_output"].numpy(),
                                  outputs["encoder_outputs"][-1].numpy())
    assert targets.family_of(network).name == "gpt"
    gpt2 = GPT2Network.from_config_object(GPT2Config(vocab_size=V, n_positions=POS, n_embd=E,
                                                     n_layer=1, n_head=HEADS))
    assert targets.family_of(gpt2).name == "gpt2"
    assert not registry.families.get("gpt2").is_encoder(network)


def test_keras_save_and_load(tmp_path):
    keras.utils.set_random_seed(3)
    network = GPTNetwork.from_config_object(GPTConfig(vocab_size=V, n_positions=POS, n_embd=E,
                                                      n_layer=1, n_head=HEADS, afn="relu"))
    path = str(tmp_path / "gpt.keras")
    network.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, GPTNetwork) and restored.get_config() == network.get_config()
    ids = np.arange(9, dtype=np.int32)[None]
    np.testing.assert_allclose(_ours(restored, ids)[1], _ours(network, ids)[1], atol=1e-6)


def test_copy_weights_appends_rows_to_the_token_table(hf_dir):
    source, _ = _load(hf_dir[0])
    config = load_gpt_config(hf_dir[0])
    target = GPTNetwork.from_config_object(config.replace(vocab_size=V + 3))
    fresh_rows = target.embedding_table.numpy()[V:].copy()
    assert target.copy_weights_from(source) == 3
    table = target.embedding_table.numpy()
    np.testing.assert_array_equal(table[:V], source.embedding_table.numpy())
    np.testing.assert_array_equal(table[V:], fresh_rows)
    ids = np.random.RandomState(4).randint(0, V, size=(2, 7)).astype(np.int32)
    np.testing.assert_allclose(_ours(target, ids)[0], _ours(source, ids)[0], atol=1e-6)
    with pytest.raises(ValueError, match="more than"):
        source.copy_weights_from(target)
