"""The paper's scale: ModelCompose's modality LoRAs on Vicuna-7B, merged in weight space.

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). Its models and benchmarks are not known; the closest public setting is ModelCompose
(Chen et al., ACL 2024): vision, audio and video LoRAs on ``lmsys/vicuna-7b-v1.5``, published
under the hub id ``Adu2021/ModelCompose``. The full profile (``modelcompose=True``) reads them
from the folder that ``$DCAT_MODELCOMPOSE_DIR`` names (:func:`folder`), laid out as::

    vicuna-7b-v1.5/         the base LLM (config.json, weights, tokenizer), as the hub has it
    */<checkpoint>/         one folder per modality, at most two levels down, as ModelCompose
                            writes them: a config.json that names the modality's encoder
                            (mm_vision_encoder or mm_vision_tower, mm_audio_encoder,
                            mm_video_encoder) and the LLM's LoRA, either as adapter_model.bin
                            with keys '<module>.lora_A.default.weight' and the rank and scale in
                            config.json (lora_r, lora_alpha), or as a PEFT adapter
                            (adapter_config.json with adapter_model.safetensors or .bin)

Each LoRA's update is taken in full form, Delta W = (alpha / r) B A (:func:`lora_delta`), and is
the task vector of its modality: W_m = W_0 + Delta W_m on every linear layer the LoRA adapts.
:func:`study` merges the donor's vector (vision) into each recipient (audio, video) with the
chapter's merges that need no hidden states (averaging, task arithmetic, TIES, DARE, and DCAT-A
with isotropic Gram matrices, :func:`.merging.dcat_isotropic`), and measures what needs no
benchmark: the vectors' sizes and cosines per layer, their sign conflicts, how far each merge
moves the recipient, and the merged LLM's negative log-likelihood on text-only sentences
(:data:`TEXT`). DCAT-A with real Gram matrices, DCAT-B and RegMean need the recipient's hidden
states at its audio or video tokens, hence ModelCompose's encoders and the benchmarks' inputs;
neither they nor the benchmarks (Clotho, AudioCaps, AVQA, MSRVTT-QA) are run here
(:data:`NOT_RUN`).
"""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from reprobook.core import checks

from . import merging

__all__ = [
    "BASE_MODEL",
    "ADAPTERS",
    "BASE_FOLDER",
    "FIND",
    "MODALITIES",
    "TEXT",
    "NOT_RUN",
    "folder",
    "modality_of",
    "checkpoints",
    "missing",
    "require",
    "lora_delta",
    "Adapter",
    "read_adapter",
    "load_adapters",
    "load_base",
    "text_nll",
    "vector_stats",
    "merge_layer",
    "study",
    "summary",
]

SLUG = "dcat_merging"
BASE_MODEL = "lmsys/vicuna-7b-v1.5"
ADAPTERS = "Adu2021/ModelCompose"  # vision (CLIP ViT-L/14-336), audio (BEATs), video LoRAs
BASE_FOLDER = "vicuna-7b-v1.5"  # the base LLM's sub-folder of $DCAT_MODELCOMPOSE_DIR
FIND = "env-path:DCAT_MODELCOMPOSE_DIR"
WEIGHTS_ENV = "DCAT_MODELCOMPOSE_DIR"
MODALITIES = ("vision", "audio", "video")
# the config.json keys that name a checkpoint's modality (ModelCompose's own table)
ENCODER_KEYS = {
    "mm_vision_encoder": "vision",
    "mm_vision_tower": "vision",
    "mm_audio_encoder": "audio",
    "mm_video_encoder": "video",
    "mm_point_encoder": "point",
}
BENCHMARKS = ("Clotho", "AudioCaps", "AVQA", "MSRVTT-QA")
NOT_RUN = (
    "the benchmarks (" + ", ".join(BENCHMARKS) + ") are not run: they need ModelCompose's "
    "encoders (BEATs, LanguageBind), the benchmarks' audio and video and its evaluation "
    "scripts, and so do DCAT-A with real Gram matrices, DCAT-B and RegMean; the full profile "
    "measures the merges of the real LoRAs in weight space and on text-only sentences"
)
# Text-only sentences of ours on which the merged LLM's negative log-likelihood is measured
# (a sanity check that a merge does not break the LLM, as C3b is in the toy).
TEXT = (
    "A dog barks twice and then the street is quiet again.",
    "Rain falls on a tin roof while thunder rolls in the distance.",
    "The train leaves the station at seven in the morning.",
    "She poured the tea and asked whether anyone wanted sugar.",
    "Water boils at one hundred degrees Celsius at sea level.",
    "A small boat drifts slowly across the calm lake.",
    "The children laughed as the kite climbed into the wind.",
    "He closed the book, turned off the lamp and went to sleep.",
    "Paris is the capital of France and lies on the Seine.",
    "An orchestra tunes its instruments before the concert begins.",
    "The cat jumped onto the table and knocked over a glass.",
    "Birds sing in the garden just before the sun rises.",
    "Seven plus five is twelve, and twelve minus four is eight.",
    "A car horn sounds as the traffic light turns green.",
    "The old clock on the wall ticks loudly in the empty room.",
    "Waves crash against the rocks under a grey sky.",
)
_TARGET = ("lora_A", "lora_B")


def folder(profile: str) -> Path:
    """The folder of the base LLM and the LoRAs at ``profile`` (full: the path
    ``$DCAT_MODELCOMPOSE_DIR`` names; smoke: the chapter's fixture of it)."""
    from reprobook import core

    if not core.runs_full_path(profile):
        raise checks.InputError(
            f"modelcompose=True runs at the full and smoke profiles only, got profile {profile!r}"
        )
    return Path(core.locate(SLUG, FIND, profile))


def modality_of(config: dict) -> str | None:
    """The modality a ModelCompose config.json is for (the first encoder key it sets), or None."""
    for key, modality in ENCODER_KEYS.items():
        value = config.get(key)
        if isinstance(value, str) and value:
            return modality
    return None


def _read_json(path: Path) -> dict:
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return out if isinstance(out, dict) else {}


def checkpoints(root) -> dict[str, list[Path]]:
    """modality -> the checkpoint folders for it under ``root`` (itself excluded, at most two
    levels down, the base LLM's folder left out), by their config.json (:func:`modality_of`)."""
    root = Path(root)
    found: dict[str, list[Path]] = {}
    for config in sorted([*root.glob("*/config.json"), *root.glob("*/*/config.json")]):
        if config.parent.name == BASE_FOLDER:
            continue
        modality = modality_of(_read_json(config))
        if modality is not None:
            found.setdefault(modality, []).append(config.parent)
    return found


def _adapter_files(path: Path) -> tuple[str, Path | None]:
    """("peft" | "modelcompose", the weights file or None) of a checkpoint folder."""
    if (path / "adapter_config.json").is_file():
        for name in ("adapter_model.safetensors", "adapter_model.bin"):
            if (path / name).is_file():
                return "peft", path / name
        return "peft", None
    weights = path / "adapter_model.bin"
    return "modelcompose", weights if weights.is_file() else None


def _base_problems(base: Path) -> list[str]:
    where = f"{base.name}/"
    if not base.is_dir():
        return [
            f"the base LLM {BASE_MODEL} in the sub-folder {where} (hf download {BASE_MODEL} "
            f"--local-dir {where})"
        ]
    out = []
    if not (base / "config.json").is_file():
        out.append(f"{where}config.json (the base LLM's configuration)")
    weights = [*base.glob("*.safetensors"), *base.glob("pytorch_model*.bin")]
    if not weights:
        out.append(f"{where}: the base LLM's weights (*.safetensors or pytorch_model*.bin)")
    if not (base / "tokenizer.json").is_file():
        if not (base / "tokenizer.model").is_file():
            out.append(f"{where}: the tokenizer (tokenizer.json or tokenizer.model)")
        else:
            lacking = [m for m in ("sentencepiece", "google.protobuf") if not _importable(m)]
            if lacking:
                names = " and ".join(m.split(".")[-1] for m in lacking)
                out.append(
                    f"the package{'s' if len(lacking) > 1 else ''} {names}, to read "
                    f"{where}tokenizer.model (the folder has no tokenizer.json): pip install "
                    "sentencepiece protobuf"
                )
    return out


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing(root, modalities=MODALITIES) -> list[str]:
    """What the paper-scale run lacks, each named exactly: the packages, the folder, the base
    LLM's configuration, weights or tokenizer, and for each of ``modalities`` its checkpoint
    folder, its LoRA weights or its rank and scale. ``[]`` when nothing is missing."""
    out = [
        f"the Python package {name!r} (pip install {name})"
        for name in ("transformers", "peft")
        if not _importable(name)
    ]
    if root is None or not Path(root).is_dir():
        return out + [
            f"the folder named by ${WEIGHTS_ENV} ({root if root is not None else 'not set'}): "
            f"it holds {BASE_MODEL} and the LoRAs of {ADAPTERS}"
        ]
    root = Path(root)
    out += _base_problems(root / BASE_FOLDER)
    found = checkpoints(root)
    for modality in modalities:
        paths = found.get(modality, [])
        if not paths:
            out.append(
                f"the {modality} checkpoint of {ADAPTERS} (a folder whose config.json sets "
                f"mm_{modality}_encoder, at most two levels below {root})"
            )
            continue
        if len(paths) > 1:
            names = ", ".join(str(p.relative_to(root)) for p in paths)
            out.append(f"one {modality} checkpoint, not {len(paths)} ({names}): keep one")
            continue
        kind, weights = _adapter_files(paths[0])
        rel = paths[0].relative_to(root)
        if weights is None:
            wanted = "adapter_model.safetensors or .bin" if kind == "peft" else "adapter_model.bin"
            out.append(f"{rel}/{wanted} (the {modality} LoRA's weights)")
        elif kind == "modelcompose":
            config = _read_json(paths[0] / "config.json")
            for key in ("lora_r", "lora_alpha"):
                if not isinstance(config.get(key), (int, float)) or isinstance(
                    config.get(key), bool
                ):
                    out.append(f"{rel}/config.json: {key} (the {modality} LoRA's rank and scale)")
    return out


def require(root, modalities=MODALITIES) -> None:
    """Stop with one message that lists everything :func:`missing` finds; return quietly when
    nothing is missing."""
    from reprobook.core import MissingInputs

    lacking = missing(root, modalities)
    if lacking:
        raise MissingInputs(
            "The paper-scale part of chapter 14 (ModelCompose's LoRAs on Vicuna-7B) cannot run: "
            "missing\n- " + "\n- ".join(lacking) + "\nor run the toy alone (-p modelcompose=False)."
        )


def lora_delta(A, B, alpha: float, rank: int | None = None) -> torch.Tensor:
    """Delta W = (alpha / r) B A (d_out, d_in) of a LoRA adapter with A (r, d_in), B (d_out, r):
    the full-form update that merges operate on."""
    A, B = torch.as_tensor(A), torch.as_tensor(B)
    if A.ndim != 2 or B.ndim != 2 or B.shape[1] != A.shape[0]:
        raise checks.InputError(
            f"A must be (r, d_in) and B (d_out, r), got {tuple(A.shape)} and {tuple(B.shape)}"
        )
    r = A.shape[0] if rank is None else checks.integer(rank, "rank", minimum=1)
    return (checks.real(alpha, "alpha") / r) * (B @ A)


@dataclass
class Adapter:
    """One modality's LoRA: ``factors`` maps the base LLM's weight name
    (``model.layers.0.self_attn.q_proj.weight``) to its (A, B); the update is
    ``scale * B @ A`` with ``scale = alpha / r`` (``alpha / sqrt(r)`` for rsLoRA)."""

    modality: str
    path: Path
    rank: int
    alpha: float
    rslora: bool
    factors: dict

    @property
    def scale(self) -> float:
        return self.alpha / (math.sqrt(self.rank) if self.rslora else self.rank)

    def delta(self, key: str, device=None) -> torch.Tensor:
        """The full-form update of weight ``key`` (float32): :func:`lora_delta`."""
        A, B = (t.to(device=device, dtype=torch.float32) for t in self.factors[key])
        alpha = self.alpha * math.sqrt(self.rank) if self.rslora else self.alpha
        return lora_delta(A, B, alpha, self.rank)


def _weight_key(key: str, modality: str) -> tuple[str, str] | None:
    """('<module>.weight', 'lora_A' | 'lora_B') of a LoRA tensor's key, or None for any other
    tensor (a modality projector, say). The PEFT prefix ``base_model.model.`` is dropped; the
    adapter's name must be absent, ``default`` or the modality."""
    if key.startswith("base_model.model."):
        key = key[len("base_model.model.") :]
    parts = key.split(".")
    hits = [i for i, p in enumerate(parts) if p in _TARGET]
    if not hits:
        return None
    i = hits[-1]
    tail = parts[i + 1 :]
    if tail not in (["weight"], ["default", "weight"], [modality, "weight"]):
        raise checks.InputError(
            f"LoRA tensor {key!r}: only the adapter names 'default' and {modality!r} are read"
        )
    return ".".join(parts[:i]) + ".weight", parts[i]


def read_adapter(path, modality: str) -> Adapter:
    """The LoRA of one ModelCompose checkpoint folder, in either layout of the module docstring
    (a PEFT adapter is read with peft's own loaders)."""
    path = Path(path)
    kind, weights = _adapter_files(path)
    if weights is None:
        raise checks.InputError(f"{path} holds no LoRA weights")
    if kind == "peft":
        from peft import LoraConfig
        from peft.utils import load_peft_weights

        cfg = LoraConfig.from_pretrained(str(path))
        if cfg.rank_pattern or cfg.alpha_pattern:
            raise checks.InputError(f"{path}: per-module ranks or alphas are not supported")
        rank, alpha, rslora = int(cfg.r), float(cfg.lora_alpha), bool(cfg.use_rslora)
        state = load_peft_weights(str(path), device="cpu")
    else:
        config = _read_json(path / "config.json")
        rank, alpha, rslora = int(config["lora_r"]), float(config["lora_alpha"]), False
        state = torch.load(weights, map_location="cpu", weights_only=True)
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for key, tensor in state.items():
        hit = _weight_key(key, modality)
        if hit is not None:
            pairs.setdefault(hit[0], {})[hit[1]] = tensor
    factors = {}
    for key, pair in sorted(pairs.items()):
        if set(pair) != set(_TARGET):
            raise checks.InputError(f"{path}: {key} has {sorted(pair)} but needs lora_A and lora_B")
        if pair["lora_A"].shape[0] != rank or pair["lora_B"].shape[1] != rank:
            raise checks.InputError(f"{path}: {key} is not of rank {rank}")
        factors[key] = (pair["lora_A"], pair["lora_B"])
    if not factors:
        raise checks.InputError(f"{path}: no LoRA tensors (keys '...lora_A...weight') found")
    return Adapter(modality, path, rank, alpha, rslora, factors)


def load_adapters(root, modalities=MODALITIES) -> dict[str, Adapter]:
    """modality -> :class:`Adapter`, after :func:`require` has found everything."""
    require(root, modalities)
    found = checkpoints(root)
    return {m: read_adapter(found[m][0], m) for m in modalities}


def load_base(root, device=None):
    """(model, tokenizer) of the base LLM in ``root``/vicuna-7b-v1.5, in float32 and eval mode,
    on ``device`` (the GPU when there is one)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.disable_progress_bar()
    base = Path(root) / BASE_FOLDER
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    return model.to(device).eval(), tokenizer


@torch.no_grad()
def text_nll(model, tokenizer, sentences) -> float:
    """The mean negative log-likelihood (nats per predicted token) of ``sentences`` under
    ``model``, each token given the ones before it (padding left out)."""
    sentences = list(sentences)
    if not sentences:
        raise checks.InputError("sentences must hold at least one sentence, got none")
    device = next(model.parameters()).device
    total, count = 0.0, 0
    for s in sentences:  # one at a time: no padding token is needed
        ids = torch.as_tensor([tokenizer(s)["input_ids"]], device=device)
        if ids.shape[1] < 2:
            raise checks.InputError(f"sentence {s!r} has fewer than two tokens")
        logits = model(input_ids=ids).logits[0, :-1].double()
        nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum")
        total, count = total + float(nll), count + ids.shape[1] - 1
    return total / count


def vector_stats(donor: Adapter, recipient: Adapter, density: float, device=None) -> tuple:
    """Per layer and in all: the norms of the two task vectors, their cosine, and the share of
    sign conflicts among the entries that both keep in TIES's top-``density`` trim (per
    tensor). Returns (one row for the whole LLM, a DataFrame with one row per layer)."""
    density = checks.real(density, "density", above=0, maximum=1)
    rows: dict[int, dict[str, float]] = {}
    for key in sorted(set(donor.factors) | set(recipient.factors)):
        s, t = _delta(donor, key, device), _delta(recipient, key, device)
        if s is None or t is None:
            s = torch.zeros_like(t) if s is None else s
            t = torch.zeros_like(s) if t is None else t
        layer = _layer_of(key)
        r = rows.setdefault(layer, dict.fromkeys(("ss", "tt", "st", "both", "conflict"), 0.0))
        s, t = s.double(), t.double()
        r["ss"] += float((s * s).sum())
        r["tt"] += float((t * t).sum())
        r["st"] += float((s * t).sum())
        keep_s, keep_t = _top(s, density), _top(t, density)
        both = keep_s & keep_t
        r["both"] += float(both.sum())
        r["conflict"] += float((both & (torch.sign(s) != torch.sign(t))).sum())
    table = pd.DataFrame(
        [
            {
                "layer": layer,
                "|tau_S|": math.sqrt(r["ss"]),
                "|tau_T|": math.sqrt(r["tt"]),
                "cosine": r["st"] / max(math.sqrt(r["ss"] * r["tt"]), 1e-300),
            }
            for layer, r in sorted(rows.items())
        ]
    )
    tot = {k: sum(r[k] for r in rows.values()) for k in ("ss", "tt", "st", "both", "conflict")}
    whole = {
        "|tau_S|": math.sqrt(tot["ss"]),
        "|tau_T|": math.sqrt(tot["tt"]),
        "cosine": tot["st"] / max(math.sqrt(tot["ss"] * tot["tt"]), 1e-300),
        "sign conflicts": tot["conflict"] / max(tot["both"], 1.0),
    }
    return whole, table


def _delta(adapter: Adapter, key: str, device) -> torch.Tensor | None:
    return adapter.delta(key, device) if key in adapter.factors else None


def _top(v: torch.Tensor, density: float) -> torch.Tensor:
    keep = max(1, int(round(density * v.numel())))
    cut = v.abs().flatten().kthvalue(v.numel() - keep + 1).values
    return v.abs() >= cut


def _layer_of(key: str) -> int:
    parts = key.split(".")
    for a, b in zip(parts, parts[1:]):
        if a == "layers" and b.isdigit():
            return int(b)
    return -1


def merge_layer(method: str, W0, tau_s, tau_t, coefficient: float, cfg, seed: int):
    """The merged weight of one linear layer from the base weight ``W0`` and the donor's and
    recipient's updates (W_S = W0 + tau_s, W_T = W0 + tau_t), by the chapter's merges
    (:mod:`.merging`): ``"recipient"`` (W_T), ``"average"``, ``"task arithmetic"`` (alpha =
    ``coefficient``), ``"TIES"`` (scale ``coefficient``, density ``cfg.ties_density``),
    ``"DARE + TA"`` (drop ``cfg.dare_drop``, mask from ``seed``, alpha = ``coefficient``) and
    ``"DCAT-A (G = I)"`` (lambda = ``coefficient``, gamma = 2 ``cfg.gamma_rel``, the ridge of
    :func:`.merging.dcat` when G_m = G_t = I)."""
    k = "llm.w"
    rec, don, base = {k: W0 + tau_t}, {k: W0 + tau_s}, {k: W0}
    if method == "recipient":
        return rec[k]
    if method == "average":
        return merging.average(rec, don)[k]
    if method == "task arithmetic":
        return merging.task_arithmetic(rec, {k: tau_s}, coefficient)[k]
    if method == "TIES":
        return merging.ties(rec, base, [{k: tau_t}, {k: tau_s}], cfg.ties_density, coefficient)[k]
    if method == "DARE + TA":
        dropped = merging.dare({k: tau_s.cpu()}, cfg.dare_drop, seed)[k].to(tau_s.device)
        return merging.task_arithmetic(rec, {k: dropped}, coefficient)[k]
    if method == "DCAT-A (G = I)":
        return merging.dcat_isotropic(rec[k], don[k], coefficient, 2 * cfg.gamma_rel)
    raise checks.InputError(f"unknown merge {method!r}")


def _methods(cfg) -> list[tuple[str, float]]:
    out = [("recipient", float("nan")), ("average", 0.5)]
    out += [("task arithmetic", a) for a in cfg.alphas if a > 0]
    out += [("TIES", 1.0), ("DARE + TA", 1.0)]
    out += [("DCAT-A (G = I)", lam) for lam in cfg.lambdas]
    return out


@torch.no_grad()
def study(root, cfg, seed: int, device=None) -> dict:
    """The paper-scale part of notebook 3: load the base LLM and the LoRAs of ``cfg.mc_donor``
    and ``cfg.mc_recipients``; per recipient, the task vectors' statistics
    (:func:`vector_stats`) and every merge of :func:`merge_layer` (task arithmetic at the
    non-zero ``cfg.alphas``, DCAT-A at ``cfg.lambdas``) written into the LLM in turn, with how
    far it moved the recipient (in units of |tau_T|) and its NLL on ``cfg.n_mc_text``
    sentences of :data:`TEXT`. Returns {"vectors", "layers", "merges"} DataFrames."""
    modalities = (cfg.mc_donor, *cfg.mc_recipients)
    adapters = load_adapters(root, modalities)
    model, tokenizer = load_base(root, device)
    device = next(model.parameters()).device
    params = dict(model.named_parameters())
    keys = sorted(set().union(*(a.factors for a in adapters.values())))
    unknown = [k for k in keys if k not in params]
    if unknown:
        raise checks.InputError(f"LoRA layers absent from the base LLM: {', '.join(unknown[:5])}")
    base = {k: params[k].detach().cpu().clone() for k in keys}
    text = TEXT[: checks.integer(cfg.n_mc_text, "n_mc_text", minimum=1, maximum=len(TEXT))]
    base_nll = text_nll(model, tokenizer, text)
    donor = adapters[cfg.mc_donor]
    vectors, layers, merges = [], [], []
    for name in cfg.mc_recipients:
        rec = adapters[name]
        whole, table = vector_stats(donor, rec, cfg.ties_density, device)
        vectors.append({"recipient": name, **whole})
        layers.append(table.assign(recipient=name))
        for method, coef in _methods(cfg):
            moved = 0.0
            for i, k in enumerate(keys):
                W0 = base[k].to(device)
                tau_s, tau_t = (_delta(a, k, device) for a in (donor, rec))
                tau_s = torch.zeros_like(W0) if tau_s is None else tau_s
                tau_t = torch.zeros_like(W0) if tau_t is None else tau_t
                W = merge_layer(method, W0, tau_s, tau_t, coef, cfg, seed * 100_003 + i)
                moved += float(((W - (W0 + tau_t)).double() ** 2).sum())  # from W_T
                params[k].copy_(W)
            nll = text_nll(model, tokenizer, text)
            merges.append(
                {
                    "recipient": name,
                    "merge": method,
                    "coefficient": coef,
                    "moved / |tau_T|": math.sqrt(moved) / max(whole["|tau_T|"], 1e-300),
                    "text NLL": nll,
                    "text NLL - base": nll - base_nll,
                }
            )
    for k in keys:  # leave the base LLM as it was loaded
        params[k].copy_(base[k])
    merges = pd.DataFrame(merges)
    first = merges[merges["merge"] == "recipient"].set_index("recipient")["text NLL"]
    merges["text NLL - recipient"] = merges["text NLL"] - merges["recipient"].map(first)
    return {
        "vectors": pd.DataFrame(vectors),
        "layers": pd.concat(layers, ignore_index=True),
        "merges": merges,
        "base_nll": base_nll,
        "n_text": len(text),
        "adapters": {m: str(a.path.relative_to(Path(root))) for m, a in adapters.items()},
        "ranks": {m: [a.rank, a.alpha] for m, a in adapters.items()},
        "n_layers": len(keys),
    }


def summary(result: dict) -> dict:
    """The recorded details of :func:`study`: JSON-ready tables."""
    merges = result["merges"].replace({np.nan: None})
    return {
        "vectors": result["vectors"].to_dict("records"),
        "merges": merges.to_dict("records"),
        "base_text_nll": result["base_nll"],
        "n_text": result["n_text"],
        "adapters": result["adapters"],
        "lora_rank_alpha": result["ranks"],
        "n_weight_matrices": result["n_layers"],
    }
