"""A tiny GPT-like model and its training step, used to record sample traces.

The model exists to produce realistic operator mixes (embedding, attention,
MLP, LayerNorm, cross-entropy, per-parameter AdamW) at a size chosen by the
caller; it is not meant to learn anything. torch is imported lazily so that
the rest of pt2chakra imports without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

VOCAB_SIZE = 512
MLP_EXPANSION = 4
LEARNING_RATE = 1e-3
MAX_GRAD_NORM = 1.0
NORM_EPS = 1e-6
SEED = 0
DEFAULT_LAYERS = 2
DEFAULT_D_MODEL = 64
DEFAULT_HEADS = 4
DEFAULT_SEQ_LEN = 32
DEFAULT_BATCH = 2


@dataclass(frozen=True)
class GPTConfig:
    """Size of the tiny GPT; every field changes the number of recorded ops."""

    layers: int = DEFAULT_LAYERS
    d_model: int = DEFAULT_D_MODEL
    heads: int = DEFAULT_HEADS
    seq_len: int = DEFAULT_SEQ_LEN
    batch: int = DEFAULT_BATCH
    vocab: int = VOCAB_SIZE

    def __post_init__(self) -> None:
        if self.layers < 1 or self.heads < 1 or self.seq_len < 2 or self.batch < 1:
            raise ValueError(f"invalid model size: {self}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")


def build_model(cfg: GPTConfig) -> Any:
    """Return an ``nn.Module`` mapping token ids ``[B, T]`` to logits ``[B, T, V]``."""
    import torch
    from torch import nn
    from torch.nn import functional as F  # noqa: N812

    class CausalSelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
            self.proj = nn.Linear(cfg.d_model, cfg.d_model)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.qkv(x).split(c, dim=2)
            shape = (b, t, cfg.heads, c // cfg.heads)
            q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.d_model)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(cfg.d_model)
            self.mlp = nn.Sequential(
                nn.Linear(cfg.d_model, MLP_EXPANSION * cfg.d_model),
                nn.GELU(),
                nn.Linear(MLP_EXPANSION * cfg.d_model, cfg.d_model),
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class TinyGPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tok = nn.Embedding(cfg.vocab, cfg.d_model)
            self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.ln_f = nn.LayerNorm(cfg.d_model)
            self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.tok(idx) + self.pos(pos)
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln_f(x))

    return TinyGPT()


def make_training_step(cfg: GPTConfig, device: str = "cpu") -> Callable[[], None]:
    """Build model, optimizer and data on ``device``; return a zero-argument step.

    On CUDA the step uses a side stream twice, with explicit cross-stream
    dependencies, so recorded traces contain multi-stream work and
    ``Stream Wait Event`` syncs: the next batch is copied host-to-device on the
    side stream (main waits on it), and the gradient norm is computed on the
    side stream after backward (side waits on main, main waits on side before
    the optimizer step).
    """
    import torch

    torch.manual_seed(SEED)
    model = build_model(cfg).to(device)
    # foreach=False: one set of ops per parameter, as the traces should show.
    optim = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, foreach=False)
    if device.startswith("cuda"):
        return _cuda_step(cfg, model, optim, torch.device(device))
    return _cpu_step(cfg, model, optim)


def _random_batch(cfg: GPTConfig, pin: bool = False) -> Any:
    """Tokens ``[B, T+1]``: inputs are ``[:, :-1]``, targets ``[:, 1:]``."""
    import torch

    batch = torch.randint(0, cfg.vocab, (cfg.batch, cfg.seq_len + 1))
    return batch.pin_memory() if pin else batch


def _loss(model: Any, tokens: Any, vocab: int) -> Any:
    """Next-token cross-entropy over the batch."""
    from torch.nn import functional as F  # noqa: N812

    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))


def _cpu_step(cfg: GPTConfig, model: Any, optim: Any) -> Callable[[], None]:
    """Plain single-threaded training step."""
    tokens = _random_batch(cfg)

    def step() -> None:
        optim.zero_grad(set_to_none=True)
        _loss(model, tokens, cfg.vocab).backward()
        optim.step()

    return step


def _cuda_step(cfg: GPTConfig, model: Any, optim: Any, device: Any) -> Callable[[], None]:
    """Training step that overlaps work on a side CUDA stream (see ``make_training_step``)."""
    import torch

    host_batch = _random_batch(cfg, pin=True)
    side = torch.cuda.Stream(device=device)
    state: dict[str, Any] = {"tokens": host_batch.to(device)}

    def prefetch() -> Any:
        """Copy the next batch on the side stream; return the event marking its arrival."""
        with torch.cuda.stream(side):
            nxt = host_batch.to(device, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(side)
        return nxt, ready

    def grad_norm_on_side() -> Any:
        """Global gradient L2 norm, computed on the side stream after backward."""
        main = torch.cuda.current_stream(device)
        side.wait_stream(main)  # grads are produced on the main stream
        with torch.cuda.stream(side):
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))
            done = torch.cuda.Event()
            done.record(side)
        norm.record_stream(main)
        for g in grads:
            g.record_stream(side)
        return norm, done

    def step() -> None:
        main = torch.cuda.current_stream(device)
        nxt, ready = prefetch()
        optim.zero_grad(set_to_none=True)
        _loss(model, state["tokens"], cfg.vocab).backward()
        norm, done = grad_norm_on_side()
        main.wait_event(done)  # the optimizer must see the clipped grads
        scale = torch.clamp(MAX_GRAD_NORM / (norm + NORM_EPS), max=1.0)
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(scale)
        optim.step()
        main.wait_event(ready)  # next step's forward reads the prefetched batch
        nxt.record_stream(main)
        state["tokens"] = nxt

    return step
