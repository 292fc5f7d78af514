"""Students: their configs, their initialisation from a teacher, the layer mapping.

    >>> config = half_depth_config(teacher_config)          # DistilBERT's student
    >>> copy_every_other_layer(teacher.encoder, student.encoder)   # layers 0, 2, 4, ...
    >>> layer_map = parse_layer_map("0:2,1:5", 2, 6)        # TinyBERT, student:teacher

DistilBERT (Sanh et al. 2019) builds its student with the teacher's width and
half its layers and starts it from the teacher: the embeddings, and the
teacher's layers 0, 2, 4, ... as the student's layers 0, 1, 2, .... TinyBERT
(Jiao et al. 2020) maps student layer m to teacher layer g(m); its uniform
strategy is g(m) = m N / M for layers counted from 1 (M student, N teacher
layers). Here layers are counted from 0 as everywhere in the project, so the
uniform map is student s -> teacher (s + 1) N / M - 1 (rounded down), and the
embedding outputs are always matched to each other.

Only encoders with one weight set per layer (`transformer_layers`, BERT's)
can be initialised layer by layer; ALBERT's one shared layer cannot.
"""

import tensorflow as tf

__all__ = [
    "DistillationError",
    "copy_every_other_layer",
    "copy_layers",
    "every_other_layer",
    "half_depth_config",
    "parse_layer_map",
    "uniform_layer_map",
]


class DistillationError(ValueError):
    """Bad distillation settings or inputs, reported as one line."""


def every_other_layer(num_teacher_layers):
    """The teacher layers DistilBERT keeps: 0, 2, 4, ... (ceil(N / 2) of them)."""
    return list(range(0, int(num_teacher_layers), 2))


def half_depth_config(teacher_config):
    """The teacher's config with every other layer: its width, ceil(N / 2) layers."""
    return teacher_config.replace(
        num_hidden_layers=len(every_other_layer(teacher_config.num_hidden_layers)))


def _layers_of(encoder, what):
    layers = getattr(encoder, "transformer_layers", None)
    if layers is None or len(layers) != encoder.num_hidden_layers:
        raise DistillationError(
            "%s: %s %r has no per-layer weights (transformer_layers); layer-wise "
            "initialisation needs a BERT-shaped encoder" % (what, type(encoder).__name__,
                                                           encoder.name))
    return layers


def _copy(source, target, what):
    source_weights, target_weights = source.weights, target.weights
    if len(source_weights) != len(target_weights):
        raise DistillationError("%s: %d weights in the teacher, %d in the student"
                                % (what, len(source_weights), len(target_weights)))
    for s, t in zip(source_weights, target_weights):
        if tuple(s.shape) != tuple(t.shape):
            raise DistillationError(
                "%s: teacher weight %s has shape %s but the student's %s has %s (the "
                "student must have the teacher's width to be initialised from it)"
                % (what, s.path, tuple(s.shape), t.path, tuple(t.shape)))
    for s, t in zip(source_weights, target_weights):
        t.assign(tf.cast(s, t.dtype))


def copy_layers(teacher_encoder, student_encoder, teacher_layers, pooler=True):
    """Copies the embeddings, `teacher_layers[i]` into student layer i, and the pooler.

    Args:
        teacher_encoder, student_encoder: BERT-shaped encoders of one width.
        teacher_layers: one teacher layer index per student layer.
        pooler: copy the pooler too (when both have one).

    Raises:
        DistillationError: a count or a shape does not match (nothing is
            half-copied: shapes are checked per part before assigning it).
    """
    t_layers = _layers_of(teacher_encoder, "teacher")
    s_layers = _layers_of(student_encoder, "student")
    teacher_layers = [int(i) for i in teacher_layers]
    if len(teacher_layers) != len(s_layers):
        raise DistillationError(
            "the student has %d layers but %d teacher layers were given to copy (%s)"
            % (len(s_layers), len(teacher_layers), teacher_layers))
    bad = [i for i in teacher_layers if not 0 <= i < len(t_layers)]
    if bad:
        raise DistillationError("teacher layer(s) %s out of range: the teacher has %d layers"
                                % (bad, len(t_layers)))
    _copy(teacher_encoder.embeddings, student_encoder.embeddings, "embeddings")
    for s, t in enumerate(teacher_layers):
        _copy(t_layers[t], s_layers[s], "student layer %d <- teacher layer %d" % (s, t))
    t_pool = getattr(teacher_encoder, "pooler", None)
    s_pool = getattr(student_encoder, "pooler", None)
    if pooler and t_pool is not None and s_pool is not None:
        _copy(t_pool, s_pool, "pooler")


def copy_every_other_layer(teacher_encoder, student_encoder):
    """DistilBERT's initialisation: embeddings, teacher layers 0, 2, 4, ..., pooler.

    Returns:
        The teacher layer indices copied, in student order.
    """
    layers = every_other_layer(teacher_encoder.num_hidden_layers)
    copy_layers(teacher_encoder, student_encoder, layers)
    return layers


def uniform_layer_map(num_student_layers, num_teacher_layers):
    """TinyBERT's uniform map, 0-based: student s -> teacher (s + 1) N / M - 1."""
    m, n = int(num_student_layers), int(num_teacher_layers)
    if m < 1 or n < 1:
        raise DistillationError("layer mapping needs layers on both sides (student %d, "
                                "teacher %d)" % (m, n))
    if m > n:
        raise DistillationError("the student has more layers (%d) than the teacher (%d); "
                                "give --layer_map explicitly" % (m, n))
    return [(s, (s + 1) * n // m - 1) for s in range(m)]


def parse_layer_map(spec, num_student_layers, num_teacher_layers):
    """`[(student_layer, teacher_layer), ...]` from "s:t,s:t,..." (0-based), or uniform.

    An empty spec gives `uniform_layer_map`. A student layer may appear once;
    student layers left out are not matched (their weights still train
    through the layers above them).

    Raises:
        DistillationError: one line naming --layer_map and the bad entry.
    """
    if spec is None or not str(spec).strip():
        return uniform_layer_map(num_student_layers, num_teacher_layers)
    pairs, seen = [], set()
    for entry in str(spec).split(","):
        entry = entry.strip()
        if not entry:
            continue
        parts = entry.split(":")
        try:
            if len(parts) != 2:
                raise ValueError
            s, t = int(parts[0]), int(parts[1])
        except ValueError:
            raise DistillationError(
                "--layer_map=%s: entry %r is not student:teacher (two layer numbers, "
                "0-based)" % (spec, entry)) from None
        if not 0 <= s < num_student_layers:
            raise DistillationError("--layer_map=%s: student layer %d out of range 0..%d"
                                    % (spec, s, num_student_layers - 1))
        if not 0 <= t < num_teacher_layers:
            raise DistillationError("--layer_map=%s: teacher layer %d out of range 0..%d"
                                    % (spec, t, num_teacher_layers - 1))
        if s in seen:
            raise DistillationError("--layer_map=%s: student layer %d is mapped twice"
                                    % (spec, s))
        seen.add(s)
        pairs.append((s, t))
    if not pairs:
        raise DistillationError("--layer_map=%s: no student:teacher pairs" % spec)
    return sorted(pairs)
