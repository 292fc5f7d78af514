"""Models whose constructor arguments are attributes of the same names.

A network built from a family's config object keeps every constructor
argument as an attribute, so that its Keras config (`get_config`), its
construction from a config object (`from_config_object`) and the config
object it gives back (`config_object`) are the same loop over one tuple of
names. `ConfigFields` is that loop, for a `keras.Model` (or layer) that
sets `_CONFIG_FIELDS` (the config object's fields, in its order) and
optionally `_EXTRA_CONFIG_FIELDS` (other arguments saved in the Keras
config, before the fields: `output_attention_probs`, ...).

A network built by `from_config_object` also keeps that config object, and
`config_object` gives it back while its fields still agree: what a config
holds beside the network's arguments (GPT-2's eos/bos ids, HF's
`architectures` and other extras) must survive a model loaded from a
folder and written back out.
"""

import keras

__all__ = ["ConfigFields", "LayerFields"]


class ConfigFields:
    """Mixin of a Keras model built from a config object (see the module docstring)."""

    _CONFIG_FIELDS = ()
    _EXTRA_CONFIG_FIELDS = ()

    def _set_fields(self, arguments, fields=None, **changed):
        """Keeps the constructor's arguments as attributes of the same names.

        `arguments`: the constructor's `locals()`; `fields`: the names to
        keep (default: `_CONFIG_FIELDS` and `_EXTRA_CONFIG_FIELDS`);
        `changed`: the values kept instead of the arguments' (normalised).
        """
        if fields is None:
            fields = self._CONFIG_FIELDS + self._EXTRA_CONFIG_FIELDS
        for field in fields:
            setattr(self, field, changed[field] if field in changed else arguments[field])

    @classmethod
    def from_config_object(cls, config, **kwargs):
        """A network for the family's config; `kwargs` go to the constructor (`name`, `dtype`)."""
        args = {field: getattr(config, field) for field in cls._CONFIG_FIELDS}
        args.update(kwargs)
        network = cls(**args)
        network._source_config = config  # pylint: disable=protected-access
        return network

    def config_object(self, config_class):
        """`config_class` (the family's config) of this network's fields: the config it
        was built from, while the fields agree (see the module docstring)."""
        values = {field: getattr(self, field) for field in self._CONFIG_FIELDS}
        source = getattr(self, "_source_config", None)
        if isinstance(source, config_class) and all(
                getattr(source, field) == value for field, value in values.items()):
            return source
        return config_class(**values)

    def get_config(self):
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
        }
        for field in self._saved_fields():
            config[field] = getattr(self, field)
        return config

    def _saved_fields(self):
        """The fields of `get_config`, in its order."""
        return self._EXTRA_CONFIG_FIELDS + self._CONFIG_FIELDS

    @classmethod
    def from_config(cls, config):
        return cls(**config)


class LayerFields:
    """Mixin of a Keras layer that keeps its arguments as attributes of the same names.

    `_FIELDS` are the arguments, in the order of `get_config`, which adds
    them to `keras.layers.Layer.get_config`'s; `_OPTIONAL_FIELDS` follow,
    saved only when not None (a pruned layer's `head_size`).
    """

    _FIELDS = ()
    _OPTIONAL_FIELDS = ()

    def _set_fields(self, arguments):
        """Keeps the constructor's `locals()` named by the two tuples as attributes."""
        for field in self._FIELDS + self._OPTIONAL_FIELDS:
            setattr(self, field, arguments[field])

    def get_config(self):
        config = super().get_config()
        config.update({field: getattr(self, field) for field in self._FIELDS})
        config.update({field: getattr(self, field) for field in self._OPTIONAL_FIELDS
                       if getattr(self, field) is not None})
        return config
