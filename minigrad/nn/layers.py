"""Module, Parameter and the layers a transformer is built of: Linear, Embedding, LayerNorm, RMSNorm, Dropout, GELU,
ReLU, Tanh, Sigmoid, LogSoftmax, Flatten, ModuleList, ModuleDict, Sequential, and the loss layers. A Module registers
the Parameters, buffers and Modules assigned to it, so named_parameters() gives dotted names
(blocks.0.attn.q_proj.weight) that state_dict() follows, and prints as PyTorch's module tree. Each layer's init is
PyTorch's (nn.init). The other layers of a course (conv.py, rnn.py, ...) build on this file; nn/__init__.py gathers
them all as nn.X.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from minigrad.array import backend
from minigrad.array.arrays import as_array, padding_index
from minigrad.array.dtypes import DType
from minigrad.nn import functional as F
from minigrad.nn import init
from minigrad.ops.losses import REDUCTIONS, reduction_error
from minigrad.optim import zero_grads
from minigrad.tensor import RemovableHandle, Tensor, no_grad


class Parameter(Tensor):
    """A tensor that a Module owns and an optimizer updates. As torch.nn.Parameter, it shares the memory of the array
    or tensor it is made from (Parameter(W.T) is a view of W), and requires grad unless told not to."""

    def __init__(self, data: Any, requires_grad: bool = True) -> None:
        self.init_leaf(data, requires_grad, copy=False)


def empty(shape: tuple[int, ...], dtype: DType = np.float32, device: str = "cpu") -> Parameter:
    """A Parameter whose values an nn.init function fills next, as torch.empty before reset_parameters."""
    return Parameter(backend.module_for(device).empty(shape, dtype=dtype))


def constant(shape: tuple[int, ...], value: float, dtype: DType = np.float32, device: str = "cpu") -> Parameter:
    return Parameter(backend.module_for(device).full(shape, value, dtype=dtype))


class Module:
    """Base class of layers and models. Subclasses call super().__init__() first, then assign."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_modules", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_forward_pre_hooks", ())  # (hook, with_kwargs) pairs, in calling order
        object.__setattr__(self, "_forward_hooks", ())

    def __setattr__(self, name: str, value: Any) -> None:
        """Register a Parameter or a Module under its name, as PyTorch does: a Parameter takes any name; a registered
        parameter is replaced only by a Parameter or None (None keeps the name a parameter's), a child module only by
        a Module or None (None unregisters it), a registered buffer by a Tensor or None."""
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        if isinstance(value, Parameter):
            self._modules.pop(name, None)
            self._buffers.pop(name, None)
            self._parameters[name] = value
        elif name in self._parameters:
            self._refuse_assignment(name, value, Parameter)
            self._parameters[name] = None
        elif isinstance(value, Module):
            self._modules[name] = value
        elif name in self._modules:
            self._refuse_assignment(name, value, Module)
            del self._modules[name]
        elif name in self._buffers:
            self._refuse_assignment(name, value, Tensor)
            self._buffers[name] = value
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Module:
        """A child module added by key rather than by assignment (a ModuleDict's entry: transformer.wte), as in
        PyTorch; called only when the ordinary lookup fails."""
        modules = self.__dict__.get("_modules", {})  # absent while a copy or an unpickled module is being built
        if name in modules:
            return modules[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _refuse_assignment(self, name: str, value: Any, kind: type) -> None:
        """Anything but None in the place of a registered parameter or child module (`kind`) is refused."""
        if value is not None and not (kind is Tensor and isinstance(value, Tensor)):
            what = {Parameter: "parameter", Module: "child module", Tensor: "buffer"}[kind]
            raise TypeError(f"{type(self).__name__}: cannot assign {type(value).__name__} as {what} {name!r} "
                            f"({'nn.' if kind is not Tensor else ''}{kind.__name__} or None expected)"
                            + ("; a tensor computed from parameters is not one: nn.Parameter(t.detach()) makes a new "
                               "parameter of its values" if isinstance(value, Tensor) else ""))

    def __delattr__(self, name: str) -> None:
        """del module.name unregisters a parameter, child module or buffer too, as in PyTorch."""
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers.pop(name, None)
        self._non_persistent_buffers.discard(name)
        object.__delattr__(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._forward_pre_hooks or self._forward_hooks:  # checked inline: a call without hooks costs nothing more
            return self._call_with_hooks(args, kwargs)
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    # -- forward hooks, as PyTorch's --
    def register_forward_pre_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call hook(module, args) before each forward (hook(module, args, kwargs) with_kwargs=True); what it
        returns, if not None, replaces the arguments: a tuple of them (or a single one), or (args, kwargs)."""
        return self._add_hook("_forward_pre_hooks", hook, prepend, with_kwargs)

    def register_forward_hook(self, hook: Callable[..., Any], *, prepend: bool = False,
                              with_kwargs: bool = False) -> RemovableHandle:
        """Call hook(module, args, output) after each forward (hook(module, args, kwargs, output) with_kwargs=True);
        what it returns, if not None, replaces the output. The models' inspection is model(idx, trace=[]) instead."""
        return self._add_hook("_forward_hooks", hook, prepend, with_kwargs)

    def _add_hook(self, attribute: str, hook: Callable[..., Any], prepend: bool, with_kwargs: bool) -> RemovableHandle:
        if not callable(hook):
            raise TypeError(f"{type(self).__name__}: a hook must be callable, got {type(hook).__name__}")
        entry = (hook, bool(with_kwargs))  # its own object: a handle removes this registration only
        hooks = getattr(self, attribute)
        object.__setattr__(self, attribute, (entry, *hooks) if prepend else (*hooks, entry))
        return RemovableHandle(self, attribute, entry)

    def _call_with_hooks(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """forward, with the pre-hooks before it and the hooks after it, each in order."""
        for hook, with_kwargs in self._forward_pre_hooks:
            result = hook(self, args, kwargs) if with_kwargs else hook(self, args)
            if result is None:
                continue
            if with_kwargs:
                if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
                    raise RuntimeError(f"{type(self).__name__}: a forward pre-hook with_kwargs must return None or "
                                       f"(args, kwargs), got {type(result).__name__}")
                args, kwargs = tuple(result[0]), result[1]
            else:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook, with_kwargs in self._forward_hooks:
            result = hook(self, args, kwargs, output) if with_kwargs else hook(self, args, output)
            output = output if result is None else result
        return output

    # -- parameters --
    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs, each parameter once even if shared."""
        return self._walk(prefix, lambda m: m._parameters.items())

    def _walk(self, prefix: str, own: Callable[[Module], Iterable[tuple[str, Any]]],
              remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        """(dotted name, tensor) for the tensors own(module) gives of this module, then of each child's, depth
        first, each tensor once even if shared (remove_duplicate=False: under each of its names, as state_dict()
        lists a tied weight). One set to None (model.bias = None) is left out: not trained, saved or moved."""
        seen: set[int] = set()
        todo = [(prefix, self)]
        while todo:
            name, m = todo.pop()
            for key, t in own(m):
                if t is not None and (id(t) not in seen or not remove_duplicate):
                    seen.add(id(t))
                    yield name + key, t
            todo.extend(reversed([(f"{name}{k}.", child) for k, child in m._modules.items()]))

    # -- buffers: tensors a module keeps that are not trained (a running mean, a causal mask), as PyTorch's --
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Keep `tensor` as module.name: in named_buffers(), moved by to(), in state_dict() if persistent, not a
        parameter. Assigning a Tensor (or None) to the name later replaces the buffer."""
        if not isinstance(name, str) or not name or "." in name:
            raise KeyError(f"{type(self).__name__}.register_buffer: a name must be a non-empty string without '.', "
                           f"got {name!r}")
        if name not in self._buffers and hasattr(self, name):
            raise KeyError(f"{type(self).__name__}.register_buffer: attribute {name!r} already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"{type(self).__name__}.register_buffer: cannot assign {type(tensor).__name__} to buffer "
                            f"{name!r} (Tensor or None required)")
        self._buffers[name] = tensor
        (self._non_persistent_buffers.discard if persistent else self._non_persistent_buffers.add)(name)
        object.__setattr__(self, name, tensor)

    def named_buffers(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs of this module and those inside it, each buffer once even if shared."""
        return self._walk(prefix, lambda m: m._buffers.items())

    def buffers(self) -> Iterator[Tensor]:
        return (b for _, b in self.named_buffers())

    def parameters(self) -> Iterator[Parameter]:
        """Each parameter once, in order, as a generator (as PyTorch's: next(model.parameters()) is the first; wrap it
        in list() to index it or take its len)."""
        return (p for _, p in self.named_parameters())

    def named_modules(self, prefix: str = "") -> Iterator[tuple[str, Module]]:
        """(dotted name, module) for this module ("") and every module inside it, depth first, each once."""
        seen: set[int] = set()
        todo = [(prefix, self)]
        while todo:
            name, m = todo.pop()
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m
                todo.extend(reversed([(f"{name}.{k}" if name else k, child) for k, child in m._modules.items()]))

    def modules(self) -> Iterator[Module]:
        """This module, then every module inside it, depth first, each once (as torch's Module.modules)."""
        return (m for _, m in self.named_modules())

    def children(self) -> Iterator[Module]:
        """The modules assigned to this one (not theirs), each once."""
        return (m for _, m in self.named_children())

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) for each module assigned to this one (not theirs); one assigned under two names is listed
        once, under the first, as in PyTorch."""
        seen: set[int] = set()
        for name, m in self._modules.items():
            if id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call fn on every child's submodules and the child, then on this module (as torch's Module.apply; for an
        init of your own). Through children(): a child under two names is visited once."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (set_to_none=False: detach it and set it to zeros in place, zero_grads)."""
        zero_grads(self.parameters(), set_to_none)

    # -- printing: PyTorch's module tree --
    def extra_repr(self) -> str:
        """The layer's settings, shown in its repr's parentheses; a layer of your own overrides it."""
        return ""

    def __repr__(self) -> str:
        """The module tree as PyTorch prints it: Name(settings), or each child as (name): repr, indented."""
        extra = self.extra_repr()
        lines = (extra.split("\n") if extra else []) + \
                [f"({key}): {_indent(repr(m))}" for key, m in self._modules.items()]
        if len(lines) == 1 and not self._modules:
            return f"{type(self).__name__}({lines[0]})"
        return f"{type(self).__name__}(" + "".join(f"\n  {line}" for line in lines) + ("\n)" if lines else ")")

    # -- modes and placement --
    def train(self, mode: bool = True) -> Module:
        """Training mode (dropout active); train(False) is eval()."""
        object.__setattr__(self, "training", mode)
        for m in self._modules.values():
            m.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def to(self, target: str | DType) -> Module:
        """Move every parameter and buffer to a device ("cpu", "cuda") or convert it to a dtype, in place; each
        gradient goes with its parameter, as in PyTorch. A dtype converts float buffers only (an integer buffer, a
        count or indices, keeps its own). A tensor already there is left as it is."""
        with no_grad():
            for p in self.parameters():
                moved = p.to(target)
                if moved is not p:
                    grad = None if p.grad is None else p.grad.to(target)
                    p.grad = None  # the old one no longer fits p: its dtype or device changes below
                    p.data, p.grad = moved, grad
            to_device = isinstance(target, str) and target in backend.DEVICES
            for m in self.modules():
                for name, b in m._buffers.items():
                    if b is not None and (to_device or b.dtype.kind == "f"):
                        m.register_buffer(name, b.to(target), name not in m._non_persistent_buffers)
        return self

    def double(self) -> Module:
        """Every floating-point parameter and buffer as float64, in place (to(mg.float64)), as PyTorch's."""
        return self.to(np.float64)

    def float(self) -> Module:
        """Every floating-point parameter and buffer as float32, in place."""
        return self.to(np.float32)

    def half(self) -> Module:
        """Every floating-point parameter and buffer as float16, in place."""
        return self.to(np.float16)

    # -- saving and loading --
    def state_dict(self) -> dict[str, Any]:
        """Parameter and persistent buffer arrays by dotted name (the arrays themselves, not copies), each module's
        parameters then its buffers, as PyTorch orders them; a tensor shared by two modules (a head tied to the token
        embedding) is listed under each of its names, as there."""
        return {name: t.array for name, t in self._saved_tensors()}

    def _saved_tensors(self) -> Iterator[tuple[str, Tensor]]:
        return self._walk("", lambda m: [*m._parameters.items(), *((k, b) for k, b in m._buffers.items()
                                                                     if k not in m._non_persistent_buffers)],
                          remove_duplicate=False)

    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Copy `state` into the parameters and persistent buffers (converted to their dtype), after checking every
        key, shape and dtype: on any mismatch a ValueError names the keys at fault and the model is left untouched.
        strict=False loads the keys both have and lets the others be (a wrong shape or dtype is still refused).
        Returns (missing_keys, unexpected_keys), as PyTorch's, in the model's and in `state`'s order."""
        own = dict(self._saved_tensors())
        if strict:
            state = _with_tied_keys(type(self).__name__, own, state)
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        wrong_values, wrong_shapes = [], []
        for k in sorted(own.keys() & state.keys()):
            value = state[k]
            if not hasattr(value, "shape") or not hasattr(value, "dtype"):
                wrong_values.append(f"{k}: a {type(value).__name__}, not an array")
            elif value.dtype.kind not in "biuf":
                wrong_values.append(f"{k}: dtype {value.dtype} is not a number type")
            elif tuple(value.shape) != own[k].shape:
                wrong_shapes.append(f"{k}: saved {tuple(value.shape)}, model {own[k].shape}")
        problems = ([f"missing keys {sorted(missing)}"] if missing and strict else []) + \
                   ([f"unexpected keys {sorted(unexpected)}"] if unexpected and strict else []) + \
                   ([f"wrong shapes ({'; '.join(wrong_shapes)})"] if wrong_shapes else []) + \
                   ([f"wrong values ({'; '.join(wrong_values)})"] if wrong_values else [])
        if problems:
            raise ValueError(f"load_state_dict({type(self).__name__}): " + ", ".join(problems))
        with no_grad():  # into the parameters' own memory, as PyTorch's copy_: their views and versions see it
            for name, p in own.items():
                if name in state:
                    p.copy_(Tensor.wrap(as_array(state[name], p.dtype, p.device, "load_state_dict")))
        return IncompatibleKeys(missing, unexpected)


class IncompatibleKeys(NamedTuple):
    """What load_state_dict returns, as PyTorch's: the model's keys `state` lacked, and the keys it had besides."""

    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if self == ([], []):
            return "<All keys matched successfully>"
        return f"IncompatibleKeys(missing_keys={self.missing_keys}, unexpected_keys={self.unexpected_keys})"


def _with_tied_keys(where: str, own: dict[str, Tensor], state: dict[str, Any]) -> dict[str, Any]:
    """`state` with the keys it lacks of a tied tensor (one tensor under several names) filled in from a key of the
    same tensor that it has: a state_dict saved by an earlier minigrad listed a tied weight once (nanoGPT's
    lm_head.weight was left out), and loads with a DeprecationWarning."""
    names: dict[int, list[str]] = {}
    for name, t in own.items():
        names.setdefault(id(t), []).append(name)
    filled = {}
    for group in names.values():
        present = [n for n in group if n in state]
        for name in group:
            if present and name not in state:
                filled[name] = state[present[0]]
    if not filled:
        return state
    warnings.warn(f"load_state_dict({where}): {sorted(filled)} missing, filled from the tied key of the same tensor "
                  "(an earlier minigrad's state_dict listed a tied weight once); save it again to write every "
                  "key, as PyTorch's state_dict does", DeprecationWarning, stacklevel=3)
    return {**state, **filled}


def _indent(text: str) -> str:
    """Every line of a child's repr but the first moved two spaces right, under its parent's."""
    return text.replace("\n", "\n  ")


# ---- layers ----

def _check_sizes(layer: str, **sizes: Any) -> None:
    """A layer's sizes are ints >= 0 (0 is an empty layer, as PyTorch allows)."""
    for name, n in sizes.items():
        if not hasattr(n, "__index__") or isinstance(n, bool) or n < 0:
            raise ValueError(f"{layer}: {name} must be an int >= 0, got {n!r}")


class Linear(Module):
    """y = x @ weight.T + bias, weight of shape (out_features, in_features). Init as PyTorch's: weight and bias
    from U(-1/sqrt(in_features), 1/sqrt(in_features)), the weight's bound from kaiming_uniform_(a=sqrt(5))."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        _check_sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = in_features, out_features
        self.weight = empty((out_features, in_features), dtype, device)
        self.bias = empty((out_features,), dtype, device) if bias else None
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_features) if in_features > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table: row i of `weight` is the vector of token (or position) i; init N(0, 1), as PyTorch's. Row
    `padding_idx` (if given; negative counts from the end) starts at zero and gets no gradient, so it stays there."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, *,
                 dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        _check_sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        if padding_idx is not None:
            padding_idx = padding_index("Embedding", padding_idx, num_embeddings)
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        self.weight = init.normal_(empty((num_embeddings, embedding_dim), dtype, device))
        if padding_idx is not None:
            with no_grad():
                self.weight[padding_idx] = 0

    def forward(self, indices: Any) -> Tensor:
        return F.embedding(indices, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}" + \
            ("" if self.padding_idx is None else f", padding_idx={self.padding_idx}")


class LayerNorm(Module):
    """Normalise the last axes (those of `normalized_shape`, an int or a tuple) to mean 0, variance 1, then scale and
    shift (learned, init 1 and 0), as torch.nn.LayerNorm and with its arguments."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, *, dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        self.normalized_shape = _shape("LayerNorm", normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = constant(self.normalized_shape, 1.0, dtype, device) if elementwise_affine else None
        self.bias = constant(self.normalized_shape, 0.0, dtype, device) if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return RMSNorm.extra_repr(self) + f", bias={self.bias is not None}"


def _shape(layer: str, normalized_shape: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = (normalized_shape,) if hasattr(normalized_shape, "__index__") else tuple(normalized_shape)
    if not shape or not all(hasattr(n, "__index__") and n > 0 for n in shape):
        raise ValueError(f"{layer}: normalized_shape must be a positive int or a tuple of them, got "
                         f"{normalized_shape!r}")
    return shape


class RMSNorm(Module):
    """Divide the last axes (those of `normalized_shape`) by their root mean square, then scale
    (learned, init 1), as torch.nn.RMSNorm; eps=None means the dtype's machine epsilon."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float | None = None,
                 elementwise_affine: bool = True, *, dtype: DType = np.float32, device: str = "cpu") -> None:
        super().__init__()
        self.normalized_shape = _shape("RMSNorm", normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = constant(self.normalized_shape, 1.0, dtype, device) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class Dropout(Module):
    """F.dropout as a layer, active in training; inplace=True is taken and computed out of place, as ReLU's."""

    def __init__(self, p: float = 0.1, inplace: bool = False) -> None:
        super().__init__()
        if not 0 <= p <= 1:
            raise ValueError(f"Dropout: probability must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class GELU(Module):
    """F.gelu as a layer, so that Sequential can hold it: exact (approximate="none", as PyTorch's
    default) or GPT-2's tanh form (approximate="tanh")."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class ReLU(Module):
    """F.relu as a layer: max(x, 0). inplace=True (PyTorch's, to save memory) is taken and computed out of place:
    the same values, in a new tensor."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class LogSoftmax(Module):
    """F.log_softmax along `dim` as a layer (dim is required: PyTorch's dim=None guesses one, with a warning)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Flatten(Module):
    """x.flatten(start_dim, end_dim) as a layer; its default keeps the batch axis: (B, ...) -> (B, rest)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class ModuleList(Module):
    """A list of modules, registered as "0", "1", ..."""

    def __init__(self, modules: list[Module] | None = None) -> None:
        super().__init__()
        for m in modules or []:
            self.append(m)

    def append(self, module: Module) -> ModuleList:
        """Add module at the end; returns the list, as PyTorch's, so that calls chain."""
        setattr(self, str(len(self._modules)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Put module before index, as list.insert; the modules after it move one key up."""
        modules = list(self)
        modules.insert(index, module)
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def __getitem__(self, i: int | slice) -> Any:
        """The module at i; a slice is a ModuleList of those modules, numbered from 0, as PyTorch's."""
        if isinstance(i, slice):
            return type(self)(list(self)[i])
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __repr__(self) -> str:
        """As PyTorch's: a run of children that print the same is one line, (0-11): 12 x Block(...)."""
        runs: list[list[Any]] = []  # [first index, last index, repr]
        for i, m in enumerate(self):
            text = repr(m)
            if runs and runs[-1][2] == text:
                runs[-1][1] = i
            else:
                runs.append([i, i, text])
        lines = [f"({first}): {_indent(text)}" if first == last else
                 f"({first}-{last}): {last - first + 1} x {_indent(text)}" for first, last, text in runs]
        return f"{type(self).__name__}(" + "".join(f"\n  {line}" for line in lines) + ("\n)" if lines else ")")


class Sequential(ModuleList):
    """Modules applied one after another: Sequential(Linear(4, 16), GELU(), Linear(16, 2)) is an MLP."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(list(modules))

    __repr__ = Module.__repr__  # each child on its own line, as PyTorch's Sequential

    def __getitem__(self, i: int | slice) -> Any:
        """The module at i; a slice is a Sequential of those modules under their own keys, as PyTorch's
        (seq[1:].state_dict() has 1.weight, ...)."""
        if not isinstance(i, slice):
            return super().__getitem__(i)
        part = type(self)()
        for key, m in list(self._modules.items())[i]:
            setattr(part, key, m)
        return part

    def insert(self, index: int, module: Module) -> Sequential:  # PyTorch's Sequential.insert returns it
        super().insert(index, module)
        return self

    def forward(self, x: Any) -> Any:
        for m in self:
            x = m(x)
        return x


class ModuleDict(Module):
    """Modules by name, registered under their keys (model.heads["a"].weight is "heads.a.weight"), in the order
    inserted, as torch.nn.ModuleDict. An entry is an item and an attribute (model.transformer.wte, as nanoGPT uses
    it); a key that names an attribute ("keys", "training") is refused, as in PyTorch."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key: str, module: Module) -> None:
        if not isinstance(key, str) or not key or "." in key:
            raise KeyError(f"ModuleDict: a key must be a non-empty string without '.', got {key!r}")
        if key not in self._modules and hasattr(self, key):
            raise KeyError(f"ModuleDict: the key {key!r} is the name of an attribute (as PyTorch, refused)")
        if not isinstance(module, Module):
            raise TypeError(f"ModuleDict[{key!r}]: expected a Module, got {type(module).__name__}")
        self._modules[key] = module

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        return self._modules.keys()

    def values(self) -> Iterable[Module]:
        return self._modules.values()

    def items(self) -> Iterable[tuple[str, Module]]:
        return self._modules.items()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add or replace modules from a mapping or from (key, module) pairs."""
        for key, module in (modules.items() if isinstance(modules, Mapping) else modules):
            self[key] = module

    def pop(self, key: str) -> Module:
        return self._modules.pop(key)

    def clear(self) -> None:
        self._modules.clear()


# ---- losses as layers: each holds its options and calls its F function ----

class MSELoss(Module):
    """F.mse_loss as a layer: loss_fn = nn.MSELoss(); loss_fn(input, target)."""

    def __init__(self, *, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise reduction_error("MSELoss", reduction)
        self.reduction = reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(Module):
    """F.cross_entropy as a layer, with its options (classes on axis 1, as PyTorch's; no per-class weight)."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise reduction_error("CrossEntropyLoss", reduction)
        if isinstance(label_smoothing, bool) or not isinstance(label_smoothing, (int, float)) or \
                not 0 <= label_smoothing <= 1:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be a number in [0, 1], got {label_smoothing!r}")
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.cross_entropy(input, target, ignore_index=self.ignore_index, reduction=self.reduction,
                               label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    """F.nll_loss as a layer, after nn.LogSoftmax(dim=1): classes on axis 1, as PyTorch's; no per-class weight."""

    def __init__(self, *, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise reduction_error("NLLLoss", reduction)
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.nll_loss(input, target, ignore_index=self.ignore_index, reduction=self.reduction)


class BCEWithLogitsLoss(Module):
    """F.binary_cross_entropy_with_logits as a layer, holding its weight and pos_weight (constants, not Parameters)."""

    def __init__(self, weight: Any = None, *, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__()
        if reduction not in REDUCTIONS:
            raise reduction_error("BCEWithLogitsLoss", reduction)
        self.weight, self.reduction, self.pos_weight = weight, reduction, pos_weight

    def forward(self, input: Tensor, target: Any) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)

