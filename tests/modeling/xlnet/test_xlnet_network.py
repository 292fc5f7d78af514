"""XLNet's network: two-stream attention, factorisation orders, recurrence memory.

References written here: Hugging Face's `XLNetModel` (random tiny weights,
in torch) for the relative attention with u/v biases, relative segments and
the memory; a long single pass whose mask reproduces the memory semantics
for the recurrence; perturbation tests for what each stream may see.
"""

import json

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers

from modeling.xlnet import XLNetConfig
from modeling.xlnet import XLNetConfigError
from modeling.xlnet import XLNetNetwork
from modeling.xlnet import load_xlnet_config
from modeling.xlnet import permutation

V, D, L, H, INNER, SEQ = 61, 32, 2, 4, 48, 10


def _network(seed=0, **overrides):
    values = dict(vocab_size=V, d_model=D, n_layer=L, n_head=H, d_inner=INNER, dropout=0.0)
    values.update(overrides)
    network = XLNetNetwork.from_config_object(XLNetConfig(**values))
    rng = np.random.default_rng(seed)
    # Large random weights, so that every input visibly moves every output it reaches.
    for variable in network.trainable_variables:
        if "layer_norm" in variable.path:
            continue
        variable.assign(rng.normal(0.0, 0.3, variable.shape).astype(np.float32))
    return network


def _ids(seed, batch=2, seq=SEQ):
    return np.random.default_rng(seed).integers(0, V, size=(batch, seq)).astype(np.int32)


def _changed(a, b, tol=1e-4):
    """Per position: whether the output vector moved."""
    return np.max(np.abs(np.asarray(a) - np.asarray(b)), axis=-1) > tol


# ------------------------------------------------------------------ config


def test_config_reads_hf_and_original_names(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "xlnet", "d_model": 64, "n_layer": 2,
                                "n_head": 4, "d_inner": 128, "vocab_size": 100,
                                "mem_len": None, "d_head": 16, "summary_type": "last"}))
    config = load_xlnet_config(str(path))
    assert (config.d_model, config.d_head, config.mem_len) == (64, 16, 0)
    assert config.to_dict()["summary_type"] == "last"
    original = tmp_path / "xlnet_config.json"
    original.write_text(json.dumps({"d_model": 64, "n_layer": 2, "n_head": 4, "d_inner": 128,
                                    "n_token": 100, "untie_r": True, "ff_activation": "gelu",
                                    "d_head": 16}))
    assert load_xlnet_config(str(original)).vocab_size == 100
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"d_model": 64, "n_layer": 2, "n_head": 4, "vocab_size": 10,
                               "n_layers": 3}))
    with pytest.raises(XLNetConfigError, match="bad.json.*n_layers"):
        load_xlnet_config(str(bad))
    with pytest.raises(XLNetConfigError, match="attn_type"):
        XLNetConfig(vocab_size=10, d_model=8, n_layer=1, n_head=2, attn_type="uni")


# ------------------------------------------------------------- HF parity


def _hf_pair(untie_r=True, mem_len=0, **overrides):
    torch.manual_seed(0)
    values = dict(vocab_size=V, d_model=D, n_layer=L, n_head=H, d_inner=INNER, dropout=0.0,
                  untie_r=untie_r, mem_len=mem_len or None, ff_activation="gelu")
    values.update(overrides)
    hf = transformers.XLNetModel(transformers.XLNetConfig(**values)).eval()
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(0.3 * torch.randn_like(p) + (1.0 if "layer_norm.weight" in name else 0.0))
        if not untie_r:
            # HF keeps one set of u/v/segment biases per layer whatever `untie_r`
            # says: make them one shared set, as XLNet's untie_r=False has.
            for layer in hf.layer[1:]:
                for name in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
                    getattr(layer.rel_attn, name).copy_(getattr(hf.layer[0].rel_attn, name))
    state = {k: v.detach().numpy() for k, v in hf.state_dict().items()}
    ours = XLNetNetwork.from_config_object(XLNetConfig(
        vocab_size=V, d_model=D, n_layer=L, n_head=H, d_inner=INNER, dropout=0.0,
        untie_r=untie_r, mem_len=mem_len, **overrides))
    ours.word_embedding.assign(state["word_embedding.weight"])
    ours.mask_emb.assign(state["mask_emb"])
    for i, layer in enumerate(ours.layers_):
        prefix = "layer.%d." % i
        attn = layer.rel_attn
        for name in ("q", "k", "v", "o", "r"):
            getattr(attn, name).assign(state[prefix + "rel_attn." + name])
        for name in ("r_w_bias", "r_r_bias", "r_s_bias", "seg_embed"):
            # With untie_r=False the network holds one shared set.
            target = attn if untie_r else ours
            if untie_r or i == 0:
                getattr(target, name).assign(state[prefix + "rel_attn." + name])
        attn.layer_norm.gamma.assign(state[prefix + "rel_attn.layer_norm.weight"])
        attn.layer_norm.beta.assign(state[prefix + "rel_attn.layer_norm.bias"])
        ff = layer.ff
        ff.layer_1.kernel.assign(state[prefix + "ff.layer_1.weight"].T)
        ff.layer_1.bias.assign(state[prefix + "ff.layer_1.bias"])
        ff.layer_2.kernel.assign(state[prefix + "ff.layer_2.weight"].T)
        ff.layer_2.bias.assign(state[prefix + "ff.layer_2.bias"])
        ff.layer_norm.gamma.assign(state[prefix + "ff.layer_norm.weight"])
        ff.layer_norm.beta.assign(state[prefix + "ff.layer_norm.bias"])
    return hf, ours


@pytest.mark.parametrize("untie_r,extra", [(True, {}), (False, {"clamp_len": 3}),
                                           (True, {"bi_data": True})])
def test_content_stream_matches_hugging_face(untie_r, extra):
    hf, ours = _hf_pair(untie_r=untie_r, **extra)
    ids = _ids(1, batch=2)
    segments = np.array([[0] * 4 + [1] * 5 + [2]] * 2, np.int32)
    mask = np.ones([2, SEQ], np.float32)
    mask[1, :3] = 0  # left padding
    expected = hf(input_ids=torch.tensor(ids, dtype=torch.long),
                  token_type_ids=torch.tensor(segments, dtype=torch.long),
                  input_mask=torch.tensor(1.0 - mask)).last_hidden_state.detach().numpy()
    got = ours({"input_ids": ids, "segment_ids": segments, "input_mask": mask})
    real = mask > 0
    np.testing.assert_allclose(got["sequence_output"].numpy()[real], expected[real],
                               atol=2e-4, rtol=1e-4)


def test_two_streams_and_memory_match_hugging_face():
    """Both streams under a factorisation order, after a memory: HF's numbers."""
    hf, ours = _hf_pair(mem_len=6)
    rng = np.random.default_rng(3)
    first, second = _ids(2), _ids(3)
    _, hf_mems = None, hf(input_ids=torch.tensor(first, dtype=torch.long), use_mems=True).mems
    ours_first = ours({"input_ids": first})
    for hf_mem, our_mem in zip(hf_mems, ours_first["memory"]["states"]):
        np.testing.assert_allclose(our_mem.numpy(), hf_mem.detach().numpy().transpose(1, 0, 2),
                                   atol=2e-4, rtol=1e-4)
    perm = np.stack([permutation.perm_mask_from_order(rng.permutation(SEQ), SEQ)[0]
                     for _ in range(2)])
    targets = np.zeros([2, 3, SEQ], np.float32)
    targets[:, [0, 1, 2], [1, 4, 9]] = 1.0
    out = hf(input_ids=torch.tensor(second, dtype=torch.long), mems=hf_mems,
             perm_mask=torch.tensor(perm), target_mapping=torch.tensor(targets),
             output_hidden_states=True, use_mems=True)
    hf_h, hf_g = out.hidden_states[-2:]  # (h_0, g_0, ..., h_L, g_L)
    got = ours({"input_ids": second, "perm_mask": perm, "target_mapping": targets},
               memory=ours_first["memory"])
    np.testing.assert_allclose(got["sequence_output"].numpy(), hf_h.detach().numpy(),
                               atol=2e-4, rtol=1e-4)
    np.testing.assert_allclose(got["query_output"].numpy(), hf_g.detach().numpy(),
                               atol=2e-4, rtol=1e-4)


# --------------------------------------------------------- what each sees


def test_query_stream_never_sees_its_own_token():
    """Every position predicted under a random order: changing token p never moves the
    query stream at p and always moves the content stream at p. (With no order at
    all the other positions' content would carry token p into p's query stream in
    the next layer: the order is what keeps it out, as in XLNet.)"""
    network = _network()
    rng = np.random.default_rng(4)
    ids = _ids(4)
    perm = np.stack([permutation.perm_mask_from_order(rng.permutation(SEQ), SEQ)[0]
                     for _ in range(2)])
    features = {"input_ids": ids, "perm_mask": perm,
                "target_mapping": np.tile(np.eye(SEQ, dtype=np.float32)[np.newaxis], [2, 1, 1])}
    base = network(features)
    for position in range(SEQ):
        changed = ids.copy()
        changed[:, position] = (changed[:, position] + 1) % V
        out = network(dict(features, input_ids=changed))
        assert not _changed(base["query_output"], out["query_output"])[:, position].any()
        assert _changed(base["sequence_output"], out["sequence_output"])[:, position].all()
    # One layer, no order: the query stream at p sees every token but p.
    shallow = _network(n_layer=1)
    features = dict(features, perm_mask=np.zeros([2, SEQ, SEQ], np.float32))
    base = shallow(features)["query_output"]
    for position in range(SEQ):
        changed = ids.copy()
        changed[:, position] = (changed[:, position] + 1) % V
        moved = _changed(base, shallow(dict(features, input_ids=changed))["query_output"])
        np.testing.assert_array_equal(moved, np.tile(np.arange(SEQ) != position, [2, 1]))


def test_outputs_change_only_with_tokens_earlier_in_the_order():
    """Over random factorisation orders (every token predicted): changing the token
    at position p moves the content output of exactly the positions at or after p
    in the order, and the query output of exactly those strictly after it."""
    network = _network(seed=1)
    rng = np.random.default_rng(5)
    ids = _ids(6, batch=1)
    for trial in range(4):
        order = rng.permutation(SEQ)
        perm_mask, _ = permutation.perm_mask_from_order(order, SEQ)
        rank = np.empty(SEQ, np.int64)
        rank[order] = np.arange(SEQ)
        features = {"input_ids": ids, "perm_mask": perm_mask[np.newaxis],
                    "target_mapping": np.eye(SEQ, dtype=np.float32)[np.newaxis]}
        base = network(features)
        for position in rng.choice(SEQ, 3, replace=False):
            changed = ids.copy()
            changed[0, position] = (changed[0, position] + 7) % V
            out = network(dict(features, input_ids=changed))
            moved_h = _changed(base["sequence_output"], out["sequence_output"])[0]
            moved_g = _changed(base["query_output"], out["query_output"])[0]
            np.testing.assert_array_equal(moved_h, rank >= rank[position],
                                          err_msg="trial %d position %d" % (trial, position))
            np.testing.assert_array_equal(moved_g, rank > rank[position],
                                          err_msg="trial %d position %d" % (trial, position))


def test_partial_prediction_context_is_visible_to_all():
    """The non-predicted 5/6 see each other (not the predicted), every predicted token sees them."""
    order = np.array([3, 0, 5, 1, 4, 2])
    perm_mask, targets = permutation.perm_mask_from_order(order, 2)
    np.testing.assert_array_equal(targets, [2, 4])
    expected = np.zeros([6, 6], np.float32)
    expected[:, 4] = 1.0          # 4 is predicted first: only 2 may see it
    expected[:, 2] = 1.0          # 2 is predicted last: nobody else sees it
    expected[2, 4] = 0.0
    np.testing.assert_array_equal(perm_mask, expected)
    assert permutation.num_predict_for(32) == 5 and permutation.num_predict_for(512) == 85


def test_without_a_permutation_every_token_sees_the_whole_input():
    network = _network(seed=2)
    ids = _ids(7)
    base = network({"input_ids": ids})["sequence_output"]
    assert "query_output" not in network({"input_ids": ids})
    for position in range(SEQ):
        changed = ids.copy()
        changed[:, position] = (changed[:, position] + 1) % V
        out = network({"input_ids": changed})["sequence_output"]
        assert _changed(base, out).all(), position


def test_first_token_of_an_order_attends_to_nothing_in_the_query_stream():
    network = _network(seed=3)
    ids = _ids(8, batch=1)
    order = np.arange(SEQ)
    perm_mask, _ = permutation.perm_mask_from_order(order, SEQ)
    features = {"input_ids": ids, "perm_mask": perm_mask[np.newaxis],
                "target_mapping": np.eye(SEQ, dtype=np.float32)[np.newaxis]}
    base = network(features)["query_output"].numpy()
    changed = (ids + 1) % V
    changed[0, 0] = ids[0, 0]  # all but position 0 change... and position 0 sees none of them
    out = network(dict(features, input_ids=changed))["query_output"].numpy()
    np.testing.assert_allclose(out[0, 0], base[0, 0], atol=1e-6)
    # ...nor its own token.
    changed = ids.copy()
    changed[0, 0] = (ids[0, 0] + 1) % V
    np.testing.assert_allclose(network(dict(features, input_ids=changed))["query_output"]
                               .numpy()[0, 0], base[0, 0], atol=1e-6)


# ------------------------------------------------------------ recurrence


def test_recurrence_over_two_segments_equals_one_masked_pass():
    """Segment 2 after segment 1's memory == one pass over both in which segment 1
    sees only itself and segment 2 sees both (the memory's semantics: same
    relative distances, segment 1 computed without segment 2)."""
    network = _network(seed=4, mem_len=SEQ)
    first, second = _ids(9), _ids(10)
    out1 = network({"input_ids": first})
    out2 = network({"input_ids": second}, memory=out1["memory"])
    both = np.concatenate([first, second], 1)
    perm = np.zeros([2, 2 * SEQ, 2 * SEQ], np.float32)
    perm[:, :SEQ, SEQ:] = 1.0  # segment 1 may not see segment 2
    no_memory = XLNetNetwork.from_config_object(network.xlnet_config().replace(mem_len=0))
    no_memory.set_weights(network.get_weights())
    reference = no_memory({"input_ids": both, "perm_mask": perm})
    np.testing.assert_allclose(out2["sequence_output"].numpy(),
                               reference["sequence_output"].numpy()[:, SEQ:], atol=1e-4)
    np.testing.assert_allclose(out1["sequence_output"].numpy(),
                               reference["sequence_output"].numpy()[:, :SEQ], atol=1e-4)
    # The memory is each layer's input over segment 1 (the last mem_len).
    np.testing.assert_allclose(out1["memory"]["states"][1].numpy(),
                               reference["encoder_outputs"][0].numpy()[:, :SEQ], atol=1e-4)


def test_memory_is_a_constant_for_the_gradient():
    network = _network(seed=5, mem_len=SEQ)
    memory = network({"input_ids": _ids(11)})["memory"]
    states = [tf.Variable(s) for s in memory["states"]]
    with tf.GradientTape() as tape:
        out = network({"input_ids": _ids(12)}, memory={"states": [tf.identity(s) for s in states],
                                                        "mask": memory["mask"]})
        new = out["memory"]["states"][1]
        loss = tf.reduce_sum(new) + tf.reduce_sum(out["sequence_output"])
    grads = tape.gradient(tf.reduce_sum(new), network.word_embedding)
    assert grads is None or not np.any(tf.convert_to_tensor(grads).numpy())
    assert loss is not None


def test_memory_kept_across_calls_with_mem_reset():
    """The memory kept in the network between calls (what training uses) equals the
    explicit memory; `mem_reset` empties a row's memory; under tf.function too."""
    network = _network(seed=6, mem_len=SEQ)
    first, second, third = _ids(13), _ids(14), _ids(15)
    explicit1 = network({"input_ids": first})
    explicit2 = network({"input_ids": second}, memory=explicit1["memory"])
    fresh2 = network({"input_ids": second})

    step = tf.function(lambda features: network(features)["sequence_output"])
    step({"input_ids": third, "mem_reset": np.ones([2], np.int32)})  # some earlier stream
    step({"input_ids": first, "mem_reset": np.ones([2], np.int32)})
    got = step({"input_ids": second, "mem_reset": np.array([0, 1], np.int32)}).numpy()
    np.testing.assert_allclose(got[0], explicit2["sequence_output"].numpy()[0], atol=1e-5)
    np.testing.assert_allclose(got[1], fresh2["sequence_output"].numpy()[1], atol=1e-5)
    # A batch of another size starts empty.
    got = step({"input_ids": second[:1], "mem_reset": np.zeros([1], np.int32)}).numpy()
    np.testing.assert_allclose(got[0], fresh2["sequence_output"].numpy()[0], atol=1e-5)
    # The kept memory is not a model variable (not trained, not checkpointed).
    assert len(network.variables) == len(network.trainable_variables)


def test_padding_is_never_remembered():
    network = _network(seed=7, mem_len=SEQ)
    first = _ids(16)
    mask = np.ones([2, SEQ], np.float32)
    mask[:, -4:] = 0
    memory = network({"input_ids": first, "input_mask": mask})["memory"]
    np.testing.assert_array_equal(memory["mask"].numpy(), mask)
    other = first.copy()
    other[:, -4:] = (other[:, -4:] + 3) % V  # the padded tokens change
    memory2 = network({"input_ids": other, "input_mask": mask})["memory"]
    second = _ids(17)
    a = network({"input_ids": second}, memory=memory)["sequence_output"].numpy()
    b = network({"input_ids": second}, memory=memory2)["sequence_output"].numpy()
    np.testing.assert_allclose(a, b, atol=1e-5)
