"""The full profile's language model of chapter 13 (notebooks/13_aeo_injection): the paper's
instruction-tuned backbone (``Qwen/Qwen2.5-14B-Instruct``) loaded through ``transformers``,
batched greedy decoding of chat prompts that keeps the hidden states of every layer over the
response's first tokens, steering of one layer through a forward hook, and a checksum of every
weight.

The backbone is found with ``core.locate``: its hub id at the full profile (the weights must be
in the local hub cache: the book never downloads while it runs, and ``core.start`` stops before
any work when they are missing) and a tiny random Qwen2 of the same family at the smoke
profile (``fixtures.py``). On a GPU it runs in bf16, elsewhere in float32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reprobook.core import checks

from .iheval import SLUG, ChatPrompts


@dataclass
class LLM:
    """A causal LM, its tokenizer and where they were loaded from."""

    model: object
    tokenizer: object
    where: str

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    @property
    def width(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def n_params(self) -> int:
        return int(sum(p.numel() for p in self.model.parameters()))

    def blocks(self):
        """The decoder layers, in order."""
        return self.model.model.layers

    def stop_ids(self) -> set[int]:
        """Token ids that end a response: the tokenizer's EOS and the generation config's."""
        ids = {self.tokenizer.eos_token_id}
        extra = getattr(self.model.generation_config, "eos_token_id", None)
        ids |= set(extra if isinstance(extra, (list, tuple)) else [extra])
        return {int(i) for i in ids if i is not None}


def load_backbone(cfg, profile: str) -> LLM:
    """``cfg.backbone`` from where ``core.locate`` says (the hub cache at full, the fixture at
    smoke), in eval mode; its depth and width must be the configuration's ``layers`` and
    ``d`` (the analysis is sized by them)."""
    import torch
    import transformers

    from reprobook.core import locate

    where = locate(SLUG, f"hf-model:{cfg.backbone}", profile)
    cuda = torch.cuda.is_available()
    tok = transformers.AutoTokenizer.from_pretrained(where)
    tok.padding_side = "left"
    model = transformers.AutoModelForCausalLM.from_pretrained(
        where,
        dtype=torch.bfloat16 if cuda else torch.float32,
        device_map="cuda" if cuda else None,
    )
    llm = LLM(model.eval(), tok, where)
    if (llm.n_layers, llm.width) != (cfg.layers, cfg.d):
        raise ValueError(
            f"{cfg.backbone} at {where} has {llm.n_layers} layers of width {llm.width}; the "
            f"configuration says layers={cfg.layers}, d={cfg.d}"
        )
    return llm


@dataclass
class Steering:
    """Add ``alpha * vector`` to the output of decoder layer ``layer`` (1-based) at the last
    prompt token and at every generated one, for every row of the batch."""

    layer: int
    vector: np.ndarray  # (d,)
    alpha: float


@dataclass
class ChatGeneration:
    """Greedy responses with the features the detectors read."""

    text: np.ndarray  # (n,) object: the response up to (without) its first stop token
    lengths: np.ndarray  # (n,) tokens before the stop
    z: np.ndarray | None  # (n, layers + 1, d): each layer's states averaged over the window
    cloud: np.ndarray | None  # (n, window, d): the window's states at the detection layer
    entropy: np.ndarray | None  # (n, window) entropy of each window step's softmax
    max_prob: np.ndarray | None  # (n, window) each window step's largest probability

    def subset(self, index) -> ChatGeneration:
        return ChatGeneration(*(None if a is None else a[index] for a in vars(self).values()))


def _batches(llm: LLM, prompts: ChatPrompts, size: int):
    """Row indices in batches of similar prompt length (less padding), and the chat texts."""
    texts = [
        llm.tokenizer.apply_chat_template(list(m), tokenize=False, add_generation_prompt=True)
        for m in prompts.messages
    ]
    lengths = [len(llm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    order = np.argsort(lengths, kind="stable")
    return texts, [order[i : i + size] for i in range(0, len(order), size)]


def generate(
    llm: LLM,
    prompts: ChatPrompts,
    *,
    max_new_tokens: int,
    window: int,
    layer: int,
    batch_size: int,
    steer: Steering | None = None,
    states: bool = True,
) -> ChatGeneration:
    """Batched greedy decoding (left padding, a KV cache) of ``max_new_tokens`` tokens per
    prompt. With ``states``, forward hooks keep, for the positions that produce the first
    ``window`` tokens (the last prompt token, then each generated one; decoding goes on past a
    stop until the window is full), the embedding output and every decoder layer's output:
    their mean over the window per layer (``z``) and the window's states at decoder layer
    ``layer`` (``cloud``), with the entropy and the largest probability of each window step.
    ``steer`` shifts one layer's output through a hook (eq. `aeo-steer`); the weights are never
    touched."""
    import torch

    max_new = checks.integer(max_new_tokens, "max_new_tokens", minimum=1)
    window = checks.integer(window, "window", minimum=1, maximum=max_new)
    layer = checks.integer(layer, "layer", minimum=1, maximum=llm.n_layers)
    n, L = len(prompts), llm.n_layers
    texts, batches = _batches(llm, prompts, checks.integer(batch_size, "batch_size", minimum=1))
    stops = torch.tensor(sorted(llm.stop_ids()))
    out_text, lengths = np.empty(n, dtype=object), np.zeros(n, dtype=int)
    z = np.zeros((n, L + 1, llm.width), np.float32) if states else None
    cloud = np.zeros((n, window, llm.width), np.float32) if states else None
    ent = np.zeros((n, window)) if states else None
    top = np.zeros((n, window)) if states else None
    device = next(llm.model.parameters()).device
    for rows in batches:
        enc = llm.tokenizer(
            [texts[i] for i in rows], return_tensors="pt", padding=True, add_special_tokens=False
        ).to(device)
        got = _decode(llm, enc["input_ids"], enc["attention_mask"], max_new, window, steer, states)
        tokens, seen, probs = got
        for j, i in enumerate(rows):
            hit = torch.isin(tokens[j].cpu(), stops).nonzero()
            lengths[i] = int(hit[0]) if len(hit) else max_new
            out_text[i] = llm.tokenizer.decode(tokens[j, : lengths[i]], skip_special_tokens=True)
        if states:
            window_states = torch.stack(seen, dim=2).float().cpu().numpy()  # (b, L+1, w, d)
            z[rows] = window_states.mean(2)
            cloud[rows] = window_states[:, layer]
            p = torch.stack(probs, dim=1)  # (b, w, V)
            ent[rows] = (-(p * p.clamp_min(1e-12).log()).sum(-1)).cpu().numpy()
            top[rows] = p.max(-1).values.cpu().numpy()
    return ChatGeneration(out_text, lengths, z, cloud, ent, top)


def _decode(llm, ids, mask, max_new, window, steer, keep):
    """Greedy steps of one batch: (tokens (b, max_new), per window step the stacked states
    (b, L+1, d), per window step the softmax (b, V))."""
    import torch

    blocks = llm.blocks()
    step_states: list = []
    handles = []

    def keep_last(slot):
        def hook(_m, _i, out):
            h = out[0] if isinstance(out, tuple) else out
            step_states[-1][slot] = h[:, -1].detach()

        return hook

    if keep:
        handles.append(llm.model.get_input_embeddings().register_forward_hook(keep_last(0)))
        handles += [b.register_forward_hook(keep_last(i + 1)) for i, b in enumerate(blocks)]
    if steer is not None:
        shift = torch.as_tensor(np.asarray(steer.vector), dtype=torch.float32)

        def add(_m, _i, out):
            h = out[0] if isinstance(out, tuple) else out
            h = h.clone()
            h[:, -1] = h[:, -1] + steer.alpha * shift.to(h.device, h.dtype)  # h + alpha v
            return (h, *out[1:]) if isinstance(out, tuple) else h

        handles.append(blocks[steer.layer - 1].register_forward_hook(add))
    import inspect

    cache_arg = "cache" if "cache" in inspect.signature(llm.model.forward).parameters else None
    tokens, seen, probs = [], [], []
    past, cur = None, ids
    try:
        with torch.no_grad():
            for step in range(max_new):
                step_states.append([None] * (len(blocks) + 1))
                pos = (mask.cumsum(-1) - 1).clamp_min(0)[:, -cur.shape[1] :]
                out = llm.model(
                    input_ids=cur,
                    attention_mask=mask,
                    position_ids=pos,
                    use_cache=True,
                    **{cache_arg or "past_key_values": past},
                )
                logits = out.logits[:, -1].float()
                nxt = logits.argmax(-1)
                if keep and step < window:
                    seen.append(torch.stack(step_states[-1], dim=1))
                    probs.append(logits.softmax(-1))
                tokens.append(nxt)
                past = out.cache if cache_arg else out.past_key_values
                cur = nxt[:, None]
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
                step_states[-1] = None
    finally:
        for h in handles:
            h.remove()
    return torch.stack(tokens, dim=1).cpu(), seen, probs


def parameter_checksum(model) -> str:
    """SHA-256 over the bytes of every parameter and buffer, in name order (any dtype)."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        digest.update(name.encode())
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8)
        digest.update(raw.cpu().numpy().tobytes())
    return digest.hexdigest()
