"""keras-hub presets out for the families keras-hub has (BERT's, in and out, is in test_pretrained.py).

A random tiny HF model (written here by `transformers`) is read by this
project, written as a keras-hub preset (keras-hub's own converter of the HF
folder this project writes), and the preset's backbone, loaded by keras-hub,
must give HF's hidden states.
"""

import numpy as np
import pytest
import torch
import transformers

from modeling import pretrained

CASES = {
    "albert": (transformers.AlbertConfig(
        vocab_size=99, embedding_size=8, hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=32,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), transformers.AlbertModel,
        "AlbertBackbone"),
    "distilbert": (transformers.DistilBertConfig(
        vocab_size=99, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=32,
        dropout=0.0, attention_dropout=0.0), transformers.DistilBertModel, "DistilBertBackbone"),
    "roberta": (transformers.RobertaConfig(
        vocab_size=99, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=34, type_vocab_size=1, pad_token_id=1,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5),
        transformers.RobertaModel, "RobertaBackbone"),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_preset_out_gives_hfs_hidden_states(family, tmp_path):
    import keras_hub  # pylint: disable=import-outside-toplevel
    config, model_class, backbone_class = CASES[family]
    torch.manual_seed(3)
    hf_model = model_class(config).eval()
    hf_model.save_pretrained(tmp_path / "hf")
    model, _ = pretrained.from_pretrained(str(tmp_path / "hf"), tokenizer=False)
    pretrained.save_pretrained(model, None, str(tmp_path / "preset"), output_format="keras_hub")
    assert pretrained.inspect(str(tmp_path / "preset")).kind == "keras_hub"
    backbone = keras_hub.models.Backbone.from_preset(str(tmp_path / "preset"))
    assert type(backbone).__name__ == backbone_class
    pad = getattr(config, "pad_token_id", 0) or 0
    ids = np.array([[2, 17, 33, 45, 3, pad, pad], [2, 5, 6, 7, 8, 9, 3]], np.int32)
    mask = (ids != pad).astype(np.int32)
    inputs = {"token_ids": ids, "padding_mask": mask}
    if "segment_ids" in [i.name for i in backbone.inputs]:
        inputs["segment_ids"] = np.zeros_like(ids)
    theirs = backbone(inputs)
    theirs = theirs["sequence_output"] if isinstance(theirs, dict) else theirs
    with torch.no_grad():
        hidden = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                          attention_mask=torch.tensor(mask)).last_hidden_state.numpy()
    keep = mask.astype(bool)
    np.testing.assert_allclose(np.asarray(theirs)[keep], hidden[keep], atol=1e-4)
