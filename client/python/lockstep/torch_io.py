"""Loading lockstep parameters into PyTorch / Hugging Face modules by name
(torch is imported only here, and only when used)."""

from lockstep.errors import LockstepError


class WeightsMismatch(LockstepError):
    """The parameters and the module's state dict do not match:
    ``missing`` (in the module, not in the parameters), ``unexpected``
    (in the parameters, not in the module) and ``mismatched``
    (name, parameters' shape, module's shape)."""

    def __init__(self, missing, unexpected, mismatched):
        parts = []
        if missing:
            parts.append(f"missing in the checkpoint ({len(missing)}): "
                         + ", ".join(missing))
        if unexpected:
            parts.append(f"not in the module ({len(unexpected)}): "
                         + ", ".join(unexpected))
        if mismatched:
            parts.append("shapes differ (checkpoint vs module): " + ", ".join(
                f"{n} {list(a)} vs {list(b)}" for n, a, b in mismatched))
        text = "cannot load into the module: " + "; ".join(parts)
        # Keras names ("dense/kernel") where a torch module has dotted ones
        # ("dense.weight"): the job's naming mode, not the module, is wrong.
        if any("/" in n for n in unexpected) and missing and \
                not any("/" in n for n in missing):
            text += ('. The checkpoint has Keras names ("' + min(
                n for n in unexpected if "/" in n) + '") and layouts: give '
                'the job\'s model "param_names": "torch" for PyTorch\'s '
                'state-dict names and layouts (train it again, or start a '
                'new job from this checkpoint with "init")')
        super().__init__(text)
        self.missing = missing
        self.unexpected = unexpected
        self.mismatched = mismatched


def to_torch(params, module, strict=True):
    """Copies ``params`` ({name: numpy array}) into ``module``'s parameters
    and buffers of the same names and returns the module.

    ``strict`` (default): every name of the module's state dict must be
    present and every parameter used, or WeightsMismatch lists what is
    missing and unexpected. Not missing: a name tied to a loaded one (the
    same tensor, as a decoder tied to the word embedding), and BatchNorm's
    ``num_batches_tracked`` counters, which lockstep does not keep. Shapes
    must always match."""
    import torch

    state = module.state_dict()
    # Tied weights (a decoder sharing the word embedding, as Hugging Face
    # ties them) appear under several names; loading one loads them all.
    by_storage = {}
    for k, t in state.items():
        if t.numel() > 0:
            by_storage.setdefault((t.data_ptr(), tuple(t.shape)), []).append(k)
    tied = set()
    for names in by_storage.values():
        if any(k in params for k in names):
            tied.update(k for k in names if k not in params)
    missing = [k for k in state if k not in params and k not in tied
               and not k.endswith("num_batches_tracked")]
    unexpected = [k for k in params if k not in state]
    mismatched = [(k, tuple(v.shape), tuple(state[k].shape))
                  for k, v in params.items()
                  if k in state and tuple(v.shape) != tuple(state[k].shape)]
    if mismatched or (strict and (missing or unexpected)):
        raise WeightsMismatch(missing, unexpected, mismatched)
    new = {k: torch.from_numpy(v.copy()).to(state[k].dtype)
           for k, v in params.items() if k in state}
    module.load_state_dict(new, strict=False)
    return module


def export(module, example, path, input_name="input",
                output_name="output", opset=17):
    """Writes ``module`` as an ONNX graph lockstep can train
    (``"model": {"onnx": path}``) and returns ``path``.

    ``example`` is one batch of the input as the module takes it (NCHW for
    images); its first dimension becomes the graph's batch dimension. A
    module of several inputs takes a tuple of them and ``input_name`` a
    list of as many names: name them as the data's fields (a text model's
    ``["token_ids", "segment_ids", "padding_mask", "mask_positions"]``)
    and list them in the job's ``model.input``. The
    graph is exported in training mode without constant folding, so batch
    norms stay batch norms (not folded into the convolutions), dropout stays
    in the graph and every parameter keeps its state-dict name: a lockstep
    checkpoint of the job then loads back with ``to_torch(params, module)``.
    The module's train/eval mode is restored afterwards."""
    import warnings

    import torch

    names = [input_name] if isinstance(input_name, str) else list(input_name)
    if len(names) > 1 and (not isinstance(example, tuple)
                           or len(example) != len(names)):
        raise ValueError(f"export: {len(names)} input names need a tuple of "
                         f"as many example inputs")
    was_training = module.training
    module.train()
    try:
        with warnings.catch_warnings():
            # What the trace says of every batch norm in training mode: its
            # num_batches_tracked counter (lockstep keeps none) and its
            # one-sample check are left out of the graph.
            warnings.filterwarnings(
                "ignore", message="ONNX Preprocess - Removing mutation")
            warnings.filterwarnings(
                "ignore", message="Converting a tensor to a Python boolean")
            # A clamp with one bound (positions.clamp(min=0)): torch's own
            # shape inference of the absent bound.
            warnings.filterwarnings(
                "ignore", message="The shape inference of prim::Constant")
            torch.onnx.export(
                module, example, path, input_names=names,
                output_names=[output_name],
                dynamic_axes={n: {0: "batch"} for n in names + [output_name]},
                opset_version=opset,
                training=torch.onnx.TrainingMode.TRAINING,
                do_constant_folding=False)
    finally:
        module.train(was_training)
    return path
